//! Pause and resume (issue 37, docs/agents.md "Pausing a session"), through a real host,
//! real Docker and docker-provider sandboxes: a paused session's background process stops
//! and continues where it was (same pid, same memory); a call to a paused session resumes
//! it and says so; `on_idle = "pause"` pauses at the idle TTL and ends the session at its
//! paused TTL; a backend that cannot pause is refused with 4030; a `kill -9` of the host
//! while a session is paused (and a crash between the row and the engine) leaves a session
//! the API reports truthfully, on SQLite and PostgreSQL.

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use wharf_integration_tests::processes::{WharfProcess, store_urls};
use wharf_integration_tests::{
    GVISOR_RUNTIME, TestHost, bundled, containers_labelled, docker_provider, docker_ready,
    eventually, gvisor_ready, remove_backend_containers, start, start_with,
};

const COUNTER: &str = "i=0; while :; do echo $i; i=$((i+1)); sleep 0.05; done";

async fn post(url: &str, path: &str, body: Value) -> Value {
    reqwest::Client::new()
        .post(format!("{url}{path}"))
        .json(&body)
        .send()
        .await
        .expect("the host answers")
        .json()
        .await
        .expect("JSON")
}

async fn get(url: &str, path: &str) -> Value {
    reqwest::get(format!("{url}{path}"))
        .await
        .expect("the host answers")
        .json()
        .await
        .expect("JSON")
}

async fn call(url: &str, session: &str, tool: &str, args: Value) -> Value {
    post(
        url,
        "/v1/call",
        json!({"tool": tool, "args": args, "session_id": session}),
    )
    .await
}

async fn ok(url: &str, session: &str, tool: &str, args: Value) -> Value {
    let reply = call(url, session, tool, args.clone()).await;
    assert_eq!(reply["code"], 0, "{tool} {args}: {reply}");
    reply["data"]["result"].clone()
}

async fn new_session(url: &str, backend: &str, key: &str) -> String {
    let reply = post(url, "/v1/sessions", json!({"backend": backend, "key": key})).await;
    assert_eq!(reply["code"], 0, "{reply}");
    reply["data"]["id"].as_str().expect("an id").to_string()
}

/// The session's one container, through the Docker CLI.
fn container_of(session: &str) -> String {
    let ids = containers_labelled("wharf.session", session);
    assert_eq!(ids.len(), 1, "one container for {session}: {ids:?}");
    ids[0].clone()
}

/// Docker's own word on whether a container is paused.
fn docker_paused(id: &str) -> bool {
    let out = std::process::Command::new("docker")
        .args(["inspect", "--format", "{{.State.Paused}}", id])
        .output()
        .expect("docker inspect runs");
    String::from_utf8_lossy(&out.stdout).trim() == "true"
}

/// Everything the counter printed so far, as numbers.
async fn counted(url: &str, session: &str, backend: &str, pid: u64) -> Vec<u64> {
    let out = ok(
        url,
        session,
        &format!("{backend}:process_output"),
        json!({"pid": pid, "max_bytes": 262_144}),
    )
    .await;
    out["output"]
        .as_str()
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

fn assert_consecutive(numbers: &[u64]) {
    for (n, value) in numbers.iter().enumerate() {
        assert_eq!(
            *value, n as u64,
            "the count went on from where it was: {numbers:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_sessions_process_stops_and_continues_where_it_was() {
    if !docker_ready() {
        return;
    }
    let backend = "pausedocker";
    remove_backend_containers(backend);
    let h = start(vec![(backend, docker_provider())]).await;
    let url = h.url.clone();
    let info = h.backend_info(backend).await;
    assert!(
        info.to_string().contains("suspension"),
        "the docker provider offers the feature: {info}"
    );
    let sid = new_session(&url, backend, "counter").await;
    let container = container_of(&sid);
    let pid = ok(
        &url,
        &sid,
        &format!("{backend}:start_process"),
        json!({"command": COUNTER}),
    )
    .await["pid"]
        .as_u64()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;

    let paused = post(&url, &format!("/v1/sessions/{sid}/pause"), json!({})).await;
    assert_eq!(paused["code"], 0, "{paused}");
    assert_eq!(paused["data"]["state"], "paused", "{paused}");
    assert!(
        paused["data"]["paused_until_ms"].as_u64().is_some(),
        "{paused}"
    );
    assert!(docker_paused(&container), "the engine's freezer holds it");
    let again = post(&url, &format!("/v1/sessions/{sid}/pause"), json!({})).await;
    assert_eq!(again["code"], 0, "pausing is idempotent: {again}");
    let shown = get(&url, &format!("/v1/sessions/{sid}")).await;
    assert_eq!(shown["data"]["state"], "paused", "{shown}");

    // Two seconds frozen: a running counter would print 40 lines in that time.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let resumed = post(&url, &format!("/v1/sessions/{sid}/resume"), json!({})).await;
    assert_eq!(resumed["code"], 0, "{resumed}");
    assert_eq!(resumed["data"]["state"], "ready", "{resumed}");
    assert_eq!(resumed["data"]["resumed"], true, "{resumed}");
    assert!(!docker_paused(&container));
    let after_resume = counted(&url, &sid, backend, pid).await;
    assert_consecutive(&after_resume);
    // 0.5 s before the pause is about 10 lines; the two frozen seconds added none (the
    // read after the resume takes a few lines' time at most).
    assert!(
        after_resume.len() < 25,
        "the counter did not run while paused: {} lines",
        after_resume.len()
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    let later = counted(&url, &sid, backend, pid).await;
    assert_consecutive(&later);
    assert!(later.len() > after_resume.len(), "it runs again");
    let listed = ok(&url, &sid, &format!("{backend}:list_processes"), json!({})).await;
    assert!(
        listed["processes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["pid"] == pid && p["running"] == true),
        "the same process: {listed}"
    );
    let not_paused = post(&url, &format!("/v1/sessions/{sid}/resume"), json!({})).await;
    assert_eq!(not_paused["data"]["resumed"], false, "{not_paused}");

    // A call to a paused session resumes it first, and says so.
    let paused = post(&url, &format!("/v1/sessions/{sid}/pause"), json!({})).await;
    assert_eq!(paused["data"]["state"], "paused", "{paused}");
    let refresh = post(&url, &format!("/v1/sessions/{sid}/refresh"), json!({})).await;
    assert_eq!(
        refresh["code"], 4090,
        "a paused session is not refreshed: {refresh}"
    );
    let started = Instant::now();
    let reply = call(
        &url,
        &sid,
        &format!("{backend}:run_command"),
        json!({"command": "echo hi"}),
    )
    .await;
    let took = started.elapsed();
    assert_eq!(reply["code"], 0, "{reply}");
    assert_eq!(reply["data"]["result"]["stdout"], "hi\n", "{reply}");
    assert_eq!(reply["meta"]["resumed"], true, "{reply}");
    eprintln!("a call that resumed its session took {took:?}");
    assert!(!docker_paused(&container));
    let plain = call(
        &url,
        &sid,
        &format!("{backend}:run_command"),
        json!({"command": "true"}),
    )
    .await;
    assert!(plain["meta"].get("resumed").is_none(), "{plain}");

    // The agent pauses its own sandbox with the `pause_sandbox` tool: once its call ends.
    let asked = ok(&url, &sid, &format!("{backend}:pause_sandbox"), json!({})).await;
    assert_eq!(asked["pausing"], true, "{asked}");
    eventually(10, "the tool's pause lands after its call", async || {
        docker_paused(&container)
            && get(&url, &format!("/v1/sessions/{sid}")).await["data"]["state"] == "paused"
    })
    .await;
    let reply = call(
        &url,
        &sid,
        &format!("{backend}:pause_sandbox"),
        json!({"later": true}),
    )
    .await;
    assert_eq!(reply["code"], 4004, "no arguments: {reply}");
    let resumed_by_call = ok(&url, &sid, &format!("{backend}:list_processes"), json!({})).await;
    assert!(
        resumed_by_call["processes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["pid"] == pid && p["running"] == true),
        "the same process after the tool's pause: {resumed_by_call}"
    );

    // The scrape counts paused sessions.
    post(&url, &format!("/v1/sessions/{sid}/pause"), json!({})).await;
    let metrics = reqwest::get(format!("{url}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics
            .lines()
            .any(|l| l.contains("state=\"paused\"") && l.contains(backend) && l.ends_with(" 1")),
        "{metrics}"
    );
    // Deleting a paused session removes its frozen container.
    let deleted = reqwest::Client::new()
        .delete(format!("{url}/v1/sessions/{sid}"))
        .send()
        .await
        .unwrap();
    assert!(deleted.status().is_success());
    eventually(10, "the paused container is removed", async || {
        containers_labelled("wharf.session", &sid).is_empty()
    })
    .await;
    remove_backend_containers(backend);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gvisor_sandbox_pauses_and_continues_too() {
    if !docker_ready() || !gvisor_ready() {
        return;
    }
    let backend = "pausegvisor";
    remove_backend_containers(backend);
    let mut cfg = docker_provider();
    cfg.grants.isolation = vec!["gvisor".into()];
    let h = start_with(vec![(backend, cfg)], |s| {
        s.runtimes.insert("gvisor".into(), GVISOR_RUNTIME.into());
    })
    .await;
    let url = h.url.clone();
    let reply = post(
        &url,
        "/v1/sessions",
        json!({"backend": backend, "key": "gv", "config": {"isolation": "gvisor"}}),
    )
    .await;
    assert_eq!(reply["code"], 0, "{reply}");
    let sid = reply["data"]["id"].as_str().unwrap().to_string();
    let container = container_of(&sid);
    let pid = ok(
        &url,
        &sid,
        &format!("{backend}:start_process"),
        json!({"command": COUNTER}),
    )
    .await["pid"]
        .as_u64()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let paused = post(&url, &format!("/v1/sessions/{sid}/pause"), json!({})).await;
    assert_eq!(paused["data"]["state"], "paused", "{paused}");
    assert!(docker_paused(&container));
    tokio::time::sleep(Duration::from_secs(2)).await;
    let reply = call(
        &url,
        &sid,
        &format!("{backend}:process_output"),
        json!({"pid": pid, "max_bytes": 262_144}),
    )
    .await;
    assert_eq!(reply["meta"]["resumed"], true, "{reply}");
    let numbers: Vec<u64> = reply["data"]["result"]["output"]
        .as_str()
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    assert_consecutive(&numbers);
    assert!(
        numbers.len() < 25,
        "the counter did not run while paused: {} lines",
        numbers.len()
    );
    remove_backend_containers(backend);
}

/// Paused sessions count against their own caps — the backend's `max_paused`, the tenant's
/// `paused_sessions` — and not against the tenant's `containers`, which a resume is then
/// checked against as a create is (else pausing would be a way around it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_sessions_have_their_own_caps_and_not_the_running_containers_quota() {
    if !docker_ready() {
        return;
    }
    let (one, other) = ("pausecap", "pausecap2");
    remove_backend_containers(one);
    remove_backend_containers(other);
    let mut capped = docker_provider();
    capped.sessions.max_paused = 1;
    let h: TestHost = start_with(vec![(one, capped), (other, docker_provider())], |s| {
        s.quotas = toml::from_str::<wharf::config::QuotaConfig>(
            "[default]\ncontainers = 1\npaused_sessions = 2\n",
        )
        .unwrap();
    })
    .await;
    let url = h.url.clone();
    let pause = async |id: &str| post(&url, &format!("/v1/sessions/{id}/pause"), json!({})).await;
    let resume = async |id: &str| post(&url, &format!("/v1/sessions/{id}/resume"), json!({})).await;
    let delete = async |id: &str| {
        reqwest::Client::new()
            .delete(format!("{url}/v1/sessions/{id}"))
            .send()
            .await
            .expect("the host answers");
    };

    let s1 = new_session(&url, one, "s1").await;
    assert_eq!(pause(&s1).await["code"], 0);
    // Paused, it runs no container: a second session is within `containers = 1`.
    let s2 = new_session(&url, one, "s2").await;
    let past_backend = pause(&s2).await;
    assert_eq!(past_backend["code"], 4030, "{past_backend}");
    assert_eq!(
        past_backend["data"]["quota"], "paused_sessions",
        "{past_backend}"
    );
    // A resume would run two: refused, by a call's auto-resume too.
    let refused = resume(&s1).await;
    assert_eq!(refused["code"], 4030, "{refused}");
    assert_eq!(refused["data"]["quota"], "containers", "{refused}");
    let by_call = call(
        &url,
        &s1,
        &format!("{one}:run_command"),
        json!({"command": "true"}),
    )
    .await;
    assert_eq!(by_call["code"], 4030, "{by_call}");
    assert_eq!(
        get(&url, &format!("/v1/sessions/{s1}")).await["data"]["state"],
        "paused"
    );
    delete(&s2).await;

    // The tenant's cap holds across backends: two paused at most.
    let s3 = new_session(&url, other, "s3").await;
    assert_eq!(pause(&s3).await["code"], 0);
    let s4 = new_session(&url, other, "s4").await;
    let past_tenant = pause(&s4).await;
    assert_eq!(past_tenant["code"], 4030, "{past_tenant}");
    assert_eq!(past_tenant["data"]["tenant_limit"], 2, "{past_tenant}");
    delete(&s4).await;

    // Nothing else runs now: the resume goes through, and the session works.
    assert_eq!(resume(&s1).await["code"], 0);
    ok(
        &url,
        &s1,
        &format!("{one}:run_command"),
        json!({"command": "true"}),
    )
    .await;
    delete(&s1).await;
    delete(&s3).await;
    remove_backend_containers(one);
    remove_backend_containers(other);
}

fn idle_pausing() -> wharf::config::BackendConfig {
    let mut cfg = docker_provider();
    cfg.sessions.idle_ttl_seconds = 2;
    cfg.sessions.on_idle = wharf::config::OnIdle::Pause;
    cfg.sessions.paused_ttl_seconds = 5;
    cfg
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_session_is_paused_resumed_by_a_call_and_ended_at_its_paused_ttl() {
    if !docker_ready() {
        return;
    }
    let backend = "idlepause";
    remove_backend_containers(backend);
    let h: TestHost = start(vec![(backend, idle_pausing())]).await;
    let url = h.url.clone();
    let sid = new_session(&url, backend, "idle").await;
    let container = container_of(&sid);
    ok(
        &url,
        &sid,
        &format!("{backend}:run_command"),
        json!({"command": "echo kept > /tmp/mark"}),
    )
    .await;
    eventually(15, "the idle session is paused", async || {
        get(&url, &format!("/v1/sessions/{sid}")).await["data"]["state"] == "paused"
    })
    .await;
    assert!(docker_paused(&container));
    let reply = call(
        &url,
        &sid,
        &format!("{backend}:run_command"),
        json!({"command": "cat /tmp/mark"}),
    )
    .await;
    assert_eq!(reply["code"], 0, "{reply}");
    assert_eq!(reply["data"]["result"]["stdout"], "kept\n", "{reply}");
    assert_eq!(reply["meta"]["resumed"], true, "{reply}");

    // Idle again: paused, then ended once its paused TTL runs out.
    eventually(15, "paused again", async || {
        get(&url, &format!("/v1/sessions/{sid}")).await["data"]["state"] == "paused"
    })
    .await;
    eventually(
        20,
        "the paused session ends at its paused TTL",
        async || get(&url, &format!("/v1/sessions/{sid}")).await["code"] == 4007,
    )
    .await;
    eventually(10, "its container is removed", async || {
        containers_labelled("wharf.session", &sid).is_empty()
    })
    .await;
    remove_backend_containers(backend);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_cannot_pause_is_refused_with_4030_naming_the_feature() {
    let h = start(vec![("padnotes", bundled("scratchpad"))]).await;
    let sid = new_session(&h.url, "padnotes", "k").await;
    let reply = post(&h.url, &format!("/v1/sessions/{sid}/pause"), json!({})).await;
    assert_eq!(reply["code"], 4030, "{reply}");
    assert!(
        reply["message"]
            .as_str()
            .unwrap_or_default()
            .contains("suspension"),
        "{reply}"
    );
    let shown = get(&h.url, &format!("/v1/sessions/{sid}")).await;
    assert_eq!(shown["data"]["state"], "ready", "nothing changed: {shown}");
    let missing = post(&h.url, "/v1/sessions/nope/pause", json!({})).await;
    assert_eq!(missing["code"], 4007, "{missing}");

    // `on_idle = "pause"` needs a provider that can pause: refused at load.
    let mut cfg = bundled("scratchpad");
    cfg.sessions.on_idle = wharf::config::OnIdle::Pause;
    let refused = h.wharf.load_backend("padpause", cfg).await;
    let message = format!("{:#}", refused.expect_err("refused"));
    assert!(message.contains("on_idle"), "{message}");
}

/// What the hosts of `dir` logged, for a failure's message.
fn logs(dir: &Path) -> String {
    let mut all = String::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if entry.path().extension().is_some_and(|e| e == "log") {
            all.push_str(&std::fs::read_to_string(entry.path()).unwrap_or_default());
        }
    }
    all
}

fn write_config(dir: &Path, store: &str) -> PathBuf {
    let path = dir.join("wharf.toml");
    std::fs::write(
        &path,
        format!(
            r#"[server]
data_dir = "{}"

[store]
url = "{store}"

[backends.crashpause]
path = "bundled:docker-provider"
[backends.crashpause.grants]
images = ["wharf-sandbox:test"]
"#,
            dir.join("data").display()
        ),
    )
    .unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_session_outlives_kill_9_and_a_crash_between_row_and_engine_is_finished() {
    if !docker_ready() {
        return;
    }
    let backend = "crashpause";
    let dir = tempfile::tempdir().unwrap();
    for (engine, store) in store_urls(dir.path()) {
        remove_backend_containers(backend);
        let config = write_config(dir.path(), &store);
        let first = WharfProcess::start(&config);
        let sid = new_session(&first.url, backend, &format!("crash-{engine}")).await;
        let container = container_of(&sid);
        let pid = ok(
            &first.url,
            &sid,
            &format!("{backend}:start_process"),
            json!({"command": COUNTER}),
        )
        .await["pid"]
            .as_u64()
            .unwrap();
        let paused = post(&first.url, &format!("/v1/sessions/{sid}/pause"), json!({})).await;
        assert_eq!(paused["data"]["state"], "paused", "{engine}: {paused}");
        first.kill9();

        // While the host is down, the engine's side is undone, as if the host had died
        // between writing the row and freezing the container.
        let thawed = std::process::Command::new("docker")
            .args(["unpause", &container])
            .status()
            .unwrap();
        assert!(thawed.success());
        assert!(!docker_paused(&container));

        let second = WharfProcess::start(&config);
        let shown = get(&second.url, &format!("/v1/sessions/{sid}")).await;
        assert_eq!(shown["data"]["state"], "paused", "{engine}: {shown}");
        assert!(
            docker_paused(&container),
            "{engine}: recovery froze the paused session's sandbox again; logs: {}",
            logs(dir.path())
        );
        let reply = call(
            &second.url,
            &sid,
            &format!("{backend}:list_processes"),
            json!({}),
        )
        .await;
        assert_eq!(reply["code"], 0, "{engine}: {reply}");
        assert_eq!(reply["meta"]["resumed"], true, "{engine}: {reply}");
        assert!(
            reply["data"]["result"]["processes"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["pid"] == pid && p["running"] == true),
            "{engine}: the same process after the restart: {reply}"
        );
        let numbers = counted(&second.url, &sid, backend, pid).await;
        assert_consecutive(&numbers);

        // A paused session whose container is gone is removed, not left paused.
        post(&second.url, &format!("/v1/sessions/{sid}/pause"), json!({})).await;
        second.kill9();
        let _ = std::process::Command::new("docker")
            .args(["rm", "-f", &container])
            .output();
        let third = WharfProcess::start(&config);
        let gone = get(&third.url, &format!("/v1/sessions/{sid}")).await;
        assert_eq!(gone["code"], 4007, "{engine}: {gone}");
        drop(third);
        remove_backend_containers(backend);
    }
}
