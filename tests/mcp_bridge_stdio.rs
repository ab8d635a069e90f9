//! MCP servers over stdio as Wharf backends (issue 40): the bundled `mcp-bridge` starts the
//! server inside a container of its own, through the container and process imports and
//! the sandbox agent, under its own grants: the official Python SDK's demo server (tools
//! over REST and MCP, concurrent calls, a tool added at run time, a crash and its
//! restart), its network (`none` reaches nothing, `bridge` what the bridge reaches), gVisor
//! when that is the bridge's grant, one server per session, and a stdio server that
//! floods, answers half a message, never answers or chatters.

use rmcp::model::CallToolRequestParams;
use serde_json::json;
use std::time::{Duration, Instant};
use wharf_integration_tests::mcp_servers::{
    ContainersCleanup, MCP_IMAGE, docker_and_mcp_image, mcp_client, number, stdio_bridge,
};
use wharf_integration_tests::{
    TestHost, bundled, containers_labelled, docker_bridge_gateway, eventually, start,
};

const DEMO: &[&str] = &["/usr/bin/python3", "/srv/demo_server.py", "--stdio"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_server_in_a_container_of_its_own_serves_its_tools() {
    if !docker_and_mcp_image().await {
        return;
    }
    let _cleanup = ContainersCleanup("stdio-demo");
    let h = start(vec![("stdio-demo", stdio_bridge(DEMO, ""))]).await;
    let names = h.tool_names("stdio-demo").await;
    assert!(names.contains(&"stdio-demo:add".to_string()), "{names:?}");

    let r = h.call("stdio-demo:add", json!({"a": 2, "b": 3})).await;
    assert_eq!(r.code(), 0, "{}", r.body);
    assert_eq!(number(&r.body["data"]["result"]), 5);
    let r = h
        .call("stdio-demo:fail", json!({"message": "no luck"}))
        .await;
    assert_eq!(r.code(), 5000, "{}", r.body);
    assert!(
        r.body["message"].as_str().unwrap().contains("no luck"),
        "{}",
        r.body
    );

    // The server runs in one container of this backend, with no network.
    let containers = containers_labelled("wharf.backend", "stdio-demo");
    assert_eq!(containers.len(), 1, "{containers:?}");
    let inspect = std::process::Command::new("docker")
        .args([
            "inspect",
            "-f",
            "{{.Config.Image}} {{.HostConfig.NetworkMode}}",
            &containers[0],
        ])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&inspect.stdout).trim(),
        format!("{MCP_IMAGE} none")
    );

    // Calls at once, from several instances, each get their own answer.
    let replies = futures::future::join_all(
        (0..16).map(|i| h.call("stdio-demo:add", json!({"a": i, "b": 1000}))),
    )
    .await;
    for (i, r) in replies.iter().enumerate() {
        assert_eq!(r.code(), 0, "{}", r.body);
        assert_eq!(number(&r.body["data"]["result"]), i as i64 + 1000);
    }
    assert_eq!(containers_labelled("wharf.backend", "stdio-demo").len(), 1);

    // A tool the server adds reaches a connected MCP client.
    let (client, recorder) = mcp_client(&h).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let changed = recorder.heard.notified();
    let r = h.call("stdio-demo:enable_extra", json!({})).await;
    assert_eq!(r.code(), 0, "{}", r.body);
    tokio::time::timeout(Duration::from_secs(10), changed)
        .await
        .expect("no list_changed after the stdio server added a tool");
    let params = CallToolRequestParams::new("stdio-demo_extra")
        .with_arguments(json!({"x": 7}).as_object().cloned().unwrap());
    let reply = client.call_tool(params).await.unwrap();
    assert_eq!(
        number(reply.structured_content.as_ref().unwrap()),
        70,
        "{reply:?}"
    );
    client.cancel().await.unwrap();

    // Unloaded, the backend leaves no container behind.
    assert!(h.wharf.unload_backend("stdio-demo").await.unwrap());
    assert!(containers_labelled("wharf.backend", "stdio-demo").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_servers_network_is_the_bridges_grant() {
    if !docker_and_mcp_image().await {
        return;
    }
    let (_a, _b) = (
        ContainersCleanup("stdio-offline"),
        ContainersCleanup("stdio-online"),
    );
    let listener = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || for _ in listener.incoming() {});
    let mut online = stdio_bridge(DEMO, "network = \"bridge\"");
    online.grants.networks = vec!["bridge".into()];
    let h = start(vec![
        ("stdio-offline", stdio_bridge(DEMO, "")),
        ("stdio-online", online),
    ])
    .await;
    let gateway = docker_bridge_gateway();
    let args = json!({"host": gateway, "port": port});
    let r = h.call("stdio-offline:reach", args.clone()).await;
    assert_eq!(r.code(), 0, "{}", r.body);
    let said = r.body["data"]["result"].to_string();
    assert!(
        said.contains("refused"),
        "network none reached the host: {said}"
    );
    let r = h.call("stdio-online:reach", args).await;
    let said = r.body["data"]["result"].to_string();
    assert!(said.contains("connected"), "{said}");

    // A network the operator did not grant: no container is made, so no tool is served.
    let _c = ContainersCleanup("stdio-ungranted");
    h.wharf
        .load_backend(
            "stdio-ungranted",
            stdio_bridge(DEMO, "network = \"bridge\""),
        )
        .await
        .unwrap();
    assert!(h.tool_names("stdio-ungranted").await.is_empty());
    assert!(containers_labelled("wharf.backend", "stdio-ungranted").is_empty());
    let r = h.call("stdio-ungranted:add", json!({"a": 1, "b": 1})).await;
    assert_eq!(r.code(), 4002, "{}", r.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_stdio_server_is_started_again() {
    if !docker_and_mcp_image().await {
        return;
    }
    let _cleanup = ContainersCleanup("stdio-crash");
    let h = start(vec![(
        "stdio-crash",
        stdio_bridge(DEMO, "timeout_ms = 5000"),
    )])
    .await;
    // Under a loaded machine the first listing can run past the 5 s timeout; the bridge
    // lists again, and the test is about what follows.
    eventually(60, "the server's tools were never listed", async || {
        h.tool_names("stdio-crash")
            .await
            .contains(&"stdio-crash:pid".to_string())
    })
    .await;
    let r = h.call("stdio-crash:pid", json!({})).await;
    assert_eq!(r.code(), 0, "{}", r.body);
    let first = number(&r.body["data"]["result"]);
    let r = h.call("stdio-crash:crash", json!({})).await;
    assert!(r.code() >= 5000, "{}", r.body);
    assert_eq!(r.body["retryable"], true, "{}", r.body);
    let started = Instant::now();
    let mut again = 0;
    eventually(30, "the crashed server was not started again", async || {
        let r = h.call("stdio-crash:pid", json!({})).await;
        if r.code() == 0 {
            again = number(&r.body["data"]["result"]);
            true
        } else {
            assert_eq!(r.body["retryable"], true, "{}", r.body);
            false
        }
    })
    .await;
    assert_ne!(again, first);
    eprintln!("restarted within {} ms", started.elapsed().as_millis());
}

async fn hostile_host(name: &'static str, mode: &str) -> TestHost {
    let argv = ["/usr/bin/python3", "/srv/hostile_stdio.py", "--mode", mode];
    start(vec![
        (name, stdio_bridge(&argv, "timeout_ms = 3000")),
        ("echo", bundled("echo")),
    ])
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_stdio_servers_are_contained() {
    if !docker_and_mcp_image().await {
        return;
    }
    // Floods its stdout: the ring overtakes the reader; a clear error, and it still answers.
    let _c = ContainersCleanup("stdio-flood");
    let h = hostile_host("stdio-flood", "flood").await;
    let r = h.call("stdio-flood:bad", json!({})).await;
    assert_eq!(r.code(), 5000, "{}", r.body);
    assert_eq!(h.call("echo:say", json!({"text": "x"})).await.code(), 0);
    // The same server answers again once it has written the rest of its flood.
    eventually(
        20,
        "the flooding server did not answer `ok` again",
        async || h.call("stdio-flood:ok", json!({})).await.code() == 0,
    )
    .await;

    // Half a message and never the rest; and never an answer: the bridge's deadline.
    for (name, mode) in [("stdio-malformed", "malformed"), ("stdio-silent", "silent")] {
        let _c = ContainersCleanup(name);
        let h = hostile_host(name, mode).await;
        let started = Instant::now();
        let r = h.call(&format!("{name}:bad"), json!({})).await;
        assert_eq!(r.code(), 5006, "{mode}: {}", r.body);
        assert!(started.elapsed() < Duration::from_secs(10), "{mode}");
        let r = h.call(&format!("{name}:ok"), json!({})).await;
        assert_eq!(r.code(), 0, "{mode}: {}", r.body);
    }

    // Chatter (other ids, notifications, garbage) around the answer: still understood.
    let _c = ContainersCleanup("stdio-noise");
    let h = hostile_host("stdio-noise", "noise").await;
    let r = h.call("stdio-noise:bad", json!({})).await;
    assert_eq!(r.code(), 0, "{}", r.body);
    assert_eq!(r.body["data"]["result"], "ok", "{}", r.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_per_session_keeps_each_sessions_state_apart() {
    if !docker_and_mcp_image().await {
        return;
    }
    let _cleanup = ContainersCleanup("stdio-each");
    let h = start(vec![(
        "stdio-each",
        stdio_bridge(DEMO, "sessions = \"per_session\""),
    )])
    .await;
    // Every tool needs a session.
    let r = h.call("stdio-each:pid", json!({})).await;
    assert_eq!(r.code(), 4007, "{}", r.body);

    let (a, b) = (
        h.open_session("stdio-each", "agent-a").await,
        h.open_session("stdio-each", "agent-b").await,
    );
    let pid = async |s: &str| {
        let r = h.call_in(s, "stdio-each:pid", json!({})).await;
        assert_eq!(r.code(), 0, "{}", r.body);
        number(&r.body["data"]["result"])
    };
    let (a1, a2, b1) = (pid(&a).await, pid(&a).await, pid(&b).await);
    assert_eq!(a1, a2, "one session, one server");
    assert_eq!(containers_labelled("wharf.session", &a).len(), 1);
    assert_eq!(containers_labelled("wharf.session", &b).len(), 1);
    assert_ne!(
        containers_labelled("wharf.session", &a),
        containers_labelled("wharf.session", &b)
    );

    // A session's end removes its server's container; the other session's keeps serving.
    let r = h.delete(&format!("/v1/sessions/{a}")).await;
    assert_eq!(r.code(), 0, "{}", r.body);
    eventually(
        20,
        "the ended session's container is still there",
        async || containers_labelled("wharf.session", &a).is_empty(),
    )
    .await;
    assert_eq!(pid(&b).await, b1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_server_runs_under_gvisor_when_that_is_what_the_bridge_is_granted() {
    if !docker_and_mcp_image().await || !wharf_integration_tests::gvisor_ready() {
        return;
    }
    let _cleanup = ContainersCleanup("stdio-gvisor");
    let mut config = stdio_bridge(DEMO, "");
    config.grants.isolation = vec!["gvisor".into()];
    let h = wharf_integration_tests::start_with(vec![("stdio-gvisor", config)], |s| {
        s.runtimes.insert(
            "gvisor".to_string(),
            wharf_integration_tests::GVISOR_RUNTIME.to_string(),
        );
    })
    .await;
    let r = h.call("stdio-gvisor:add", json!({"a": 40, "b": 2})).await;
    assert_eq!(r.code(), 0, "{}", r.body);
    assert_eq!(number(&r.body["data"]["result"]), 42);
    let containers = containers_labelled("wharf.backend", "stdio-gvisor");
    assert_eq!(containers.len(), 1, "{containers:?}");
    let runtime = std::process::Command::new("docker")
        .args(["inspect", "-f", "{{.HostConfig.Runtime}}", &containers[0]])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&runtime.stdout).trim(),
        wharf_integration_tests::GVISOR_RUNTIME
    );
}
