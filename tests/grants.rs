//! Grants and ownership through a real backend calling the host imports: ungranted images,
//! mounts, networks and HTTP hosts get 4030; one backend cannot touch another's containers;
//! a dead Docker engine answers 5012 quickly while other backends keep serving, and so does
//! a host with no container engine at all.

use serde_json::json;
use std::time::{Duration, Instant};
use wharf_integration_tests::{
    TestHost, bundled, containers_labelled, docker_ready, start, start_with,
};

fn probe() -> wharf::config::BackendConfig {
    let mut cfg = bundled("probe");
    cfg.grants.images = vec!["wharf-sandbox:test".into()];
    cfg
}

async fn two_probes() -> TestHost {
    start(vec![("probe", probe()), ("other", probe())]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ungranted_images_mounts_networks_and_labels_get_4030() {
    if !docker_ready() {
        return;
    }
    let h = two_probes().await;
    let cases = [
        (json!({"image": "ubuntu:latest"}), "grants.images"),
        (
            json!({"image": "wharf-sandbox:test", "mounts": ["/etc"]}),
            "grants.host_mounts",
        ),
        (
            json!({"image": "wharf-sandbox:test", "network": "bridge"}),
            "grants.networks",
        ),
        (
            json!({"image": "wharf-sandbox:test", "network": "host"}),
            "never allowed",
        ),
        (
            json!({"image": "wharf-sandbox:test", "labels": [["wharf.session", "forged"]]}),
            "wharf.",
        ),
    ];
    for (args, why) in cases {
        let r = h.call("probe:create", args.clone()).await;
        assert_eq!((r.status, r.code()), (403, 4030), "{args}: {}", r.body);
        assert!(
            r.body["message"].as_str().unwrap().contains(why),
            "{args}: {}",
            r.body
        );
    }
    assert!(
        containers_labelled("wharf.backend", "probe").is_empty(),
        "nothing was created"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_cannot_touch_another_backends_container() {
    if !docker_ready() {
        return;
    }
    let h = two_probes().await;
    let created = h
        .call("probe:create", json!({"image": "wharf-sandbox:test"}))
        .await;
    assert_eq!(created.code(), 0, "{}", created.body);
    let id = created.body["data"]["result"].as_str().unwrap().to_string();
    assert_eq!(id.len(), 64, "full ids");
    assert_eq!(
        h.call("probe:inspect", json!({"id": id})).await.body["data"]["result"],
        id.as_str()
    );
    assert_eq!(
        h.call("probe:exec", json!({"id": id, "command": "echo mine"}))
            .await
            .body["data"]["result"],
        "mine\n"
    );

    assert!(
        h.call("other:inspect", json!({"id": id})).await.body["data"]["result"].is_null(),
        "not visible to another backend"
    );
    let exec = h
        .call("other:exec", json!({"id": id, "command": "echo theirs"}))
        .await;
    assert_ne!(exec.code(), 0, "{}", exec.body);
    assert!(
        exec.body["message"].as_str().unwrap().contains("not found"),
        "{}",
        exec.body
    );
    h.call("other:remove", json!({"id": id})).await;
    assert_eq!(
        h.call("other:list", json!({})).await.body["data"]["result"],
        json!([])
    );
    assert_eq!(
        containers_labelled("wharf.backend", "probe"),
        vec![id.clone()],
        "still there after another backend's remove"
    );
    // Prefixes and names are not resolved.
    assert!(
        h.call("probe:inspect", json!({"id": &id[..12]})).await.body["data"]["result"].is_null()
    );

    let labels = std::process::Command::new("docker")
        .args([
            "inspect",
            "-f",
            "{{index .Config.Labels \"wharf.backend\"}} {{index .Config.Labels \"wharf.node\"}}",
            &id,
        ])
        .output()
        .unwrap();
    let labels = String::from_utf8_lossy(&labels.stdout).to_string();
    assert!(labels.starts_with("probe "), "{labels}");
    assert!(labels.contains(h.wharf.node_id()), "{labels}");
    assert_eq!(h.call("probe:remove", json!({"id": id})).await.code(), 0);
    assert_eq!(
        h.call("probe:remove", json!({"id": id})).await.code(),
        0,
        "remove is idempotent"
    );
    assert!(containers_labelled("wharf.backend", "probe").is_empty());
}

async fn serve_once(body: &'static str) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = axum::Router::new().route("/hello", axum::routing::get(move || async move { body }));
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outbound_http_is_denied_unless_granted_by_name_and_address() {
    let addr = serve_once("hello from loopback").await;
    let url = format!("http://127.0.0.1:{}/hello", addr.port());
    let by_name = format!("http://localhost:{}/hello", addr.port());

    let mut named_only = bundled("probe");
    named_only.grants.http_hosts = vec![
        format!("localhost:{}", addr.port()),
        "169.254.169.254:*".into(),
    ];
    let mut granted = bundled("probe");
    granted.grants.http_hosts = vec![
        format!("127.0.0.1:{}", addr.port()),
        format!("localhost:{}", addr.port()),
    ];
    granted.grants.http_private_cidrs = vec!["127.0.0.0/8".into(), "::1/128".into()];
    let h = start(vec![
        ("none", bundled("probe")),
        ("named", named_only),
        ("granted", granted),
    ])
    .await;

    let r = h.call("none:fetch", json!({"url": url})).await;
    assert_eq!(r.code(), 4030, "no grant at all: {}", r.body);
    // The name is granted, but it resolves to loopback, which is not.
    let r = h.call("named:fetch", json!({"url": by_name})).await;
    assert_eq!(r.code(), 4030, "loopback by name: {}", r.body);
    let r = h
        .call(
            "named:fetch",
            json!({"url": "http://169.254.169.254/latest/meta-data/"}),
        )
        .await;
    assert_eq!(r.code(), 4030, "metadata address: {}", r.body);
    let r = h.call("granted:fetch", json!({"url": url})).await;
    assert_eq!(r.code(), 0, "{}", r.body);
    assert_eq!(r.body["data"]["result"]["body"], "hello from loopback");
    assert_eq!(
        h.call("granted:fetch", json!({"url": by_name})).await.body["data"]["result"]["status"],
        200
    );
    let other_port = format!("http://127.0.0.1:{}/hello", addr.port() + 1);
    assert_eq!(
        h.call("granted:fetch", json!({"url": other_port}))
            .await
            .code(),
        4030,
        "port not granted"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_docker_engine_answers_5012_quickly() {
    let h = start_with(vec![("probe", probe()), ("echo", bundled("echo"))], |s| {
        s.docker_host = Some("unix:///nonexistent/docker.sock".into());
    })
    .await;
    let started = Instant::now();
    let r = h
        .call("probe:create", json!({"image": "wharf-sandbox:test"}))
        .await;
    assert_eq!((r.status, r.code()), (503, 5012), "{}", r.body);
    assert_eq!(r.body["retryable"], true);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    let r = h.call("probe:list", json!({})).await;
    assert_eq!(r.code(), 5012);
    assert_eq!(
        h.call("echo:ping", json!({})).await.code(),
        0,
        "other backends keep serving"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_without_a_container_engine_answers_5012_from_every_container_import() {
    // An endpoint the Docker client refuses at start: the host runs on the disabled engine.
    let h = start_with(vec![("probe", probe()), ("echo", bundled("echo"))], |s| {
        s.docker_host = Some("ftp://not-a-docker-endpoint".into());
    })
    .await;
    let id = "0".repeat(64);
    let calls = [
        ("probe:create", json!({"image": "wharf-sandbox:test"})),
        ("probe:inspect", json!({"id": id})),
        ("probe:exec", json!({"id": id, "command": "true"})),
        (
            "probe:copy_out",
            json!({"id": id, "path": "/etc/hostname", "max_bytes": 10}),
        ),
        ("probe:remove", json!({"id": id})),
        ("probe:list", json!({})),
    ];
    for (tool, args) in calls {
        let r = h.call(tool, args).await;
        assert_eq!((r.status, r.code()), (503, 5012), "{tool}: {}", r.body);
        assert_eq!(r.body["retryable"], false, "{tool}: {}", r.body);
        assert!(
            r.body["message"]
                .as_str()
                .unwrap_or_default()
                .contains("no container engine is configured"),
            "{tool}: {}",
            r.body
        );
    }
    assert_eq!(
        h.call("echo:ping", json!({})).await.code(),
        0,
        "other backends keep serving"
    );
}
