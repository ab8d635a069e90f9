//! The isolation rows: a gVisor sandbox's session create against `docker run -d
//! --runtime=runsc` of the same image, `run_command "true"` under gVisor beside runc (the
//! same host, the sandbox agent in both) and through the engine link (gVisor registered
//! without host sockets; runc on an engine reached over TCP), and a warm-pool hit of a
//! gVisor shape — all in one run.

use super::{CREATES, Cleanup, Client, EXECS, Figures, docker, ms, p50};
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use wharf::config::WarmPoolConfig;
use wharf_integration_tests::{
    GVISOR_RUNTIME, GVISOR_WITHOUT_HOST_SOCKETS, docker_over_tcp, docker_provider, start_with,
};

/// Warm-pool takes timed (each after the pool has refilled).
const TAKES: usize = 5;
/// How long a taken gVisor sandbox may take to be replaced in the pool.
const REFILL_WITHIN: Duration = Duration::from_secs(30);

fn gvisor_provider() -> wharf::config::BackendConfig {
    let mut cfg = docker_provider();
    cfg.grants.isolation = vec!["container".into(), "gvisor".into()];
    cfg
}

async fn gvisor_host(cfg: wharf::config::BackendConfig) -> wharf_integration_tests::TestHost {
    gvisor_host_on(cfg, GVISOR_RUNTIME).await
}

async fn gvisor_host_on(
    cfg: wharf::config::BackendConfig,
    runtime: &str,
) -> wharf_integration_tests::TestHost {
    start_with(vec![("docker", cfg)], |s| {
        s.runtimes.insert("gvisor".into(), runtime.into());
    })
    .await
}

/// `run_command "true"` p50 under gVisor registered without host sockets: the agent
/// reached through the engine link, ms.
async fn link_execs(cleanup: &mut Cleanup) -> f64 {
    let mut cfg = gvisor_provider();
    // gVisor's ptrace platform counts its own threads against the pids limit (about 80 at
    // rest, 12-27 per running process): the link is one more process.
    let mut config = toml::map::Map::new();
    config.insert("pids_limit".into(), toml::Value::Integer(512));
    cfg.config = Some(toml::Value::Table(config));
    let host = gvisor_host_on(cfg, GVISOR_WITHOUT_HOST_SOCKETS).await;
    let p50 = session_execs(&host, "gv-link", &json!({"isolation": "gvisor"}), cleanup).await;
    drop(host);
    p50
}

/// `run_command "true"` p50 in a new session of `host` with `config`, ms; the session is
/// deleted after.
async fn session_execs(
    host: &wharf_integration_tests::TestHost,
    key: &str,
    config: &Value,
    cleanup: &mut Cleanup,
) -> f64 {
    let client = Client::new(host);
    let session = client.create_session_with(key, config).await;
    cleanup.sessions.push(session.clone());
    client.run(&session, "true").await;
    let mut samples = Vec::new();
    for _ in 0..EXECS {
        let t = Instant::now();
        client.run(&session, "true").await;
        samples.push(ms(t.elapsed()));
    }
    client.delete_all(&[session], cleanup).await;
    p50(&mut samples)
}

/// gVisor session create vs `docker run -d --runtime=runsc`: (Wharf p50, CLI p50), ms.
async fn creates(client: &Client, cleanup: &mut Cleanup) -> (f64, f64) {
    let gvisor = json!({"isolation": "gvisor"});
    super::creates_like(client, cleanup, &gvisor, &["--runtime", GVISOR_RUNTIME]).await
}

/// `run_command "true"` p50 under gVisor and under runc, ms.
async fn execs(client: &Client, cleanup: &mut Cleanup) -> (f64, f64) {
    let gv = client
        .create_session_with("gv-exec", &json!({"isolation": "gvisor"}))
        .await;
    let runc = client.create_session_with("runc-exec", &Value::Null).await;
    cleanup.sessions.extend([gv.clone(), runc.clone()]);
    let mut samples = [Vec::new(), Vec::new()];
    for (session, out) in [&gv, &runc].into_iter().zip(samples.iter_mut()) {
        client.run(session, "true").await;
        for _ in 0..EXECS {
            let t = Instant::now();
            client.run(session, "true").await;
            out.push(ms(t.elapsed()));
        }
    }
    client.delete_all(&[gv, runc], cleanup).await;
    let [mut gv, mut runc] = samples;
    (p50(&mut gv), p50(&mut runc))
}

/// `run_command "true"` p50 on an engine reached over TCP (runc; the agent copied in and
/// reached through the engine link), ms.
async fn remote_execs(cleanup: &mut Cleanup) -> f64 {
    let engine = docker_over_tcp().await;
    let host = start_with(vec![("docker", docker_provider())], |s| {
        s.docker_host = Some(engine.clone());
    })
    .await;
    let p50 = session_execs(&host, "remote-link", &Value::Null, cleanup).await;
    drop(host);
    p50
}

/// A warm-pool hit of a gVisor shape: session create p50 over [`TAKES`] takes, ms.
async fn warm_hits(cleanup: &mut Cleanup) -> f64 {
    let mut cfg = gvisor_provider();
    cfg.warm_pool = Some(WarmPoolConfig {
        size: 1,
        shapes: vec![toml::toml! { isolation = "gvisor" }.into()],
        ..WarmPoolConfig::default()
    });
    let host = gvisor_host(cfg).await;
    let client = Client::new(&host);
    let mut hits = Vec::new();
    for i in 0..TAKES {
        let deadline = Instant::now() + REFILL_WITHIN;
        // Taken sandboxes are deleted below, so a running pooled one is an idle one.
        while wharf_integration_tests::containers_labelled("wharf.pool", "docker")
            .iter()
            .all(|id| docker(&["inspect", "-f", "{{.State.Running}}", id]) != "true")
        {
            assert!(Instant::now() < deadline, "the gVisor pool never refilled");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // Running is not yet recorded as ready in the store: give the pool that moment.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let t = Instant::now();
        let body = client
            .create_session_full(&format!("gv-warm-{i}"), &json!({"isolation": "gvisor"}))
            .await;
        hits.push(ms(t.elapsed()));
        assert!(
            body["data"]["data"]["warm"].is_string(),
            "a warm sandbox: {body}"
        );
        let id = body["data"]["id"].as_str().unwrap_or_default().to_string();
        cleanup.sessions.push(id.clone());
        client.delete_all(&[id], cleanup).await;
    }
    drop(host);
    p50(&mut hits)
}

/// The isolation rows (needs gVisor's runtime; the caller checks).
pub(super) async fn rows(cleanup: &mut Cleanup) -> Figures {
    let host = gvisor_host(gvisor_provider()).await;
    let client = Client::new(&host);
    let (w, c) = creates(&client, cleanup).await;
    let (gv, runc) = execs(&client, cleanup).await;
    drop(host);
    let linked = link_execs(cleanup).await;
    let remote = remote_execs(cleanup).await;
    let hit = warm_hits(cleanup).await;
    let rows = vec![
        (
            format!("gVisor: session create (isolation gvisor), p50 of {CREATES}"),
            format!("{w:.1} ms"),
        ),
        (
            format!("gVisor: `docker run -d --runtime=runsc` (CLI), p50 of {CREATES}"),
            format!("{c:.1} ms"),
        ),
        (
            "ratio Wharf / CLI, gVisor create".into(),
            format!("{:.2}x", w / c),
        ),
        (
            format!("gVisor: run_command \"true\" through the agent, p50 of {EXECS}"),
            format!(
                "{gv:.2} ms (runc, same host: {runc:.2} ms; {:.1}x)",
                gv / runc
            ),
        ),
        (
            format!(
                "gVisor without host sockets: run_command \"true\" through the engine link, p50 of {EXECS}"
            ),
            format!(
                "{linked:.2} ms (host socket, same run: {gv:.2} ms; {:.2}x)",
                linked / gv
            ),
        ),
        (
            format!(
                "runc on an engine over TCP: run_command \"true\" through the engine link, p50 of {EXECS}"
            ),
            format!(
                "{remote:.2} ms (local socket, same run: {runc:.2} ms; {:.2}x)",
                remote / runc
            ),
        ),
        (
            format!("gVisor: warm-pool hit, session create p50 of {TAKES}"),
            format!("{hit:.1} ms"),
        ),
    ];
    Figures {
        rows,
        create_ratio: w / c,
        exec_ratio: f64::NAN,
        agent_exec: (f64::NAN, f64::NAN),
        concurrent: (f64::NAN, f64::NAN, f64::NAN),
        warm_hit: (hit, f64::NAN),
    }
}
