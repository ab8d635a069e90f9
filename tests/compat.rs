//! The compatibility API of the sandbox server Wharf replaces, driven exactly as its Python
//! client drives it (the same paths and bodies, the worker id in the body and in the
//! `X-Worker-ID` header), against a real host with the bundled components.

use serde_json::{Value, json};
use std::time::Duration;
use wharf_integration_tests::{
    Reply, TestHost, bundled, containers_labelled, docker_provider, docker_ready, start,
    start_with, token,
};

async fn host() -> TestHost {
    start(vec![
        ("echo", bundled("echo")),
        ("scratchpad", bundled("scratchpad")),
    ])
    .await
}

/// Sends a request as the client does: JSON body (for POST) and optionally `X-Worker-ID`.
async fn send(h: &TestHost, get: bool, path: &str, body: Value, worker: Option<&str>) -> Reply {
    let client = reqwest::Client::new();
    let url = format!("{}{path}", h.url);
    let mut request = if get {
        client.get(url)
    } else {
        client.post(url).json(&body)
    };
    if let Some(w) = worker {
        request = request.header("X-Worker-ID", w);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    let body = serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text}"));
    Reply { status, body }
}

async fn post(h: &TestHost, path: &str, body: Value) -> Reply {
    send(h, false, path, body, None).await
}

async fn execute(h: &TestHost, worker: &str, action: &str, params: Value) -> Reply {
    let body = json!({"worker_id": worker, "action": action, "params": params, "timeout": null});
    send(h, false, "/api/v1/execute", body, Some(worker)).await
}

async fn create(h: &TestHost, worker: &str, resource_type: &str) -> Reply {
    let body = json!({"worker_id": worker, "resource_type": resource_type,
                      "session_config": {}, "custom_name": null});
    send(h, false, "/api/v1/session/create", body, Some(worker)).await
}

async fn worker_sessions(h: &TestHost, worker: &str) -> Vec<Value> {
    let r = post(h, "/api/v1/session/list", json!({"worker_id": worker})).await;
    assert_eq!(r.code(), 0, "{}", r.body);
    r.body["data"]["sessions"].as_array().unwrap().clone()
}

async fn last_activity(h: &TestHost, worker: &str) -> u64 {
    worker_sessions(h, worker).await[0]["last_activity"]
        .as_u64()
        .unwrap()
}

fn codes(r: &Reply) -> Vec<u64> {
    let results = r.body["data"]["results"].as_array().unwrap();
    results
        .iter()
        .map(|e| e["code"].as_u64().unwrap())
        .collect()
}

#[tokio::test]
async fn health_and_ready() {
    let h = host().await;
    let health = h.get("/health").await;
    assert_eq!((health.status, health.code()), (200, 0));
    assert_eq!(health.body["data"]["status"], "healthy");
    let ready = h.get("/ready").await;
    assert_eq!((ready.status, ready.code()), (200, 0), "{}", ready.body);
    assert_eq!(ready.body["data"]["backends"], 2);

    let empty = start(vec![]).await;
    assert_eq!(empty.get("/health").await.code(), 0);
    let not_ready = empty.get("/ready").await;
    assert_eq!((not_ready.status, not_ready.code()), (503, 5011));
}

#[tokio::test]
async fn a_created_session_keeps_its_state_across_executes() {
    let h = host().await;
    let created = create(&h, "w1", "scratchpad").await;
    assert_eq!(created.code(), 0, "{}", created.body);
    let data = &created.body["data"];
    let id = data["session_id"].as_str().unwrap().to_string();
    assert_eq!(
        (&data["worker_id"], &data["resource_type"]),
        (&json!("w1"), &json!("scratchpad"))
    );
    assert_eq!(data["data"]["notes"], json!([]));
    assert_eq!(data["status"], "created");
    let again = create(&h, "w1", "scratchpad").await;
    assert_eq!(
        (
            again.body["data"]["session_id"].as_str(),
            again.body["data"]["status"].as_str()
        ),
        (Some(id.as_str()), Some("exists"))
    );

    let first = execute(&h, "w1", "scratchpad:write", json!({"note": "a"})).await;
    assert_eq!(first.code(), 0, "{}", first.body);
    assert_eq!(first.body["data"]["count"], 1);
    assert_eq!(first.body["meta"]["session_id"], id.as_str());
    // The worker id only in the header this time, and an alias of the tool name.
    let body = json!({"action": "scratchpad.write", "params": {"note": "b"}, "timeout": 30});
    let second = send(&h, false, "/api/v1/execute", body, Some("w1")).await;
    assert_eq!(second.code(), 0, "{}", second.body);
    assert_eq!(second.body["data"]["count"], 2);
    let read = execute(&h, "w1", "scratchpad:read", json!({})).await;
    assert_eq!(read.code(), 0, "{}", read.body);
    assert_eq!(read.body["data"]["notes"], json!(["a", "b"]));

    let listed = worker_sessions(&h, "w1").await;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["session_id"], id.as_str());
    let via_get = send(&h, true, "/api/v1/session/list", json!({}), Some("w1")).await;
    assert_eq!(via_get.body["data"]["count"], 1, "{}", via_get.body);
    assert_eq!(worker_sessions(&h, "someone-else").await.len(), 0);

    let destroy = json!({"worker_id": "w1", "resource_type": "scratchpad"});
    let destroyed = post(&h, "/api/v1/session/destroy", destroy.clone()).await;
    assert_eq!(destroyed.code(), 0, "{}", destroyed.body);
    assert_eq!(destroyed.body["data"]["session_id"], id.as_str());
    assert!(worker_sessions(&h, "w1").await.is_empty());
    let twice = post(&h, "/api/v1/session/destroy", destroy).await;
    assert_eq!((twice.status, twice.code()), (404, 4007));
}

#[tokio::test]
async fn a_session_tool_without_a_session_runs_in_a_temporary_one() {
    let h = host().await;
    for _ in 0..2 {
        let r = execute(&h, "w-temp", "scratchpad:write", json!({"note": "x"})).await;
        assert_eq!(r.code(), 0, "{}", r.body);
        assert_eq!(r.body["data"]["count"], 1, "a fresh pad every time");
        assert!(r.body["meta"]["session_id"].is_string());
        assert!(
            h.sessions_listed().await.is_empty(),
            "the temporary session is gone"
        );
    }
    // Bad arguments are refused before a session is paid for.
    let bad = execute(&h, "w-temp", "scratchpad:write", json!({"note": 5})).await;
    assert_eq!(bad.code(), 4004, "{}", bad.body);
    // Three at once, each in its own temporary session.
    let actions: Vec<Value> = (0..3)
        .map(|i| json!({"action": "scratchpad:write", "params": {"note": format!("n{i}")}}))
        .collect();
    let body = json!({"worker_id": "w-temp", "actions": actions, "parallel": true, "stop_on_error": false, "trace_id": "batch-trace-1"});
    let r = post(&h, "/api/v1/execute/batch", body).await;
    assert_eq!(r.code(), 0, "{}", r.body);
    assert_eq!(codes(&r), [0, 0, 0]);
    assert_eq!(
        r.body["meta"]["trace_id"], "batch-trace-1",
        "the client's trace id"
    );
    assert!(h.sessions_listed().await.is_empty());
    // A stateless tool needs no worker at all.
    let body = json!({"action": "echo:say", "params": {"text": "hi", "times": 2}, "trace_id": "say-trace-1"});
    let say = post(&h, "/api/v1/execute", body).await;
    assert_eq!(say.code(), 0, "{}", say.body);
    assert_eq!(
        say.body["meta"]["trace_id"], "say-trace-1",
        "the client's trace id"
    );
    assert_eq!(say.body["data"]["text"], "hihi");
    assert_eq!(say.body["meta"]["tool"], "echo:say");
}

#[tokio::test]
async fn batches_report_every_action() {
    let h = host().await;
    let say = |t: &str| json!({"action": "echo:say", "params": {"text": t}});
    let fail = json!({"action": "echo:fail", "params": {"code": 4001, "message": "no"}});

    let body = json!({"worker_id": "w-b", "actions": [say("a"), say("b"), say("c")],
                      "parallel": true, "stop_on_error": true});
    let all = post(&h, "/api/v1/execute/batch", body).await;
    assert_eq!((all.status, all.code()), (200, 0), "{}", all.body);
    let results = all.body["data"]["results"].as_array().unwrap();
    let texts: Vec<&str> = results
        .iter()
        .map(|r| r["data"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["a", "b", "c"], "in the order given");
    assert!(results.iter().all(|r| r["action"] == "echo:say"));

    let body = json!({"worker_id": "w-b", "actions": [say("a"), fail.clone(), say("c")],
                      "parallel": false, "stop_on_error": false});
    let some = post(&h, "/api/v1/execute/batch", body).await;
    assert_eq!((some.status, some.code()), (207, 5010), "{}", some.body);
    assert_eq!(codes(&some), [0, 4001, 0]);
    assert_eq!(some.body["data"]["results"][1]["message"], "no");

    let body = json!({"worker_id": "w-b", "actions": [fail, {"action": "nosuch:tool", "params": {}},
                      {"params": {}}], "parallel": true, "stop_on_error": false});
    let none = post(&h, "/api/v1/execute/batch", body).await;
    // Every action failed on the caller's own error: the batch is the caller's error too
    // (issue 33: never 500).
    assert_eq!((none.status, none.code()), (400, 4000), "{}", none.body);
    assert_eq!(codes(&none), [4001, 4002, 4003]);
}

#[tokio::test]
async fn a_serial_batch_stops_at_the_first_failure() {
    let h = host().await;
    assert_eq!(create(&h, "w-stop", "scratchpad").await.code(), 0);
    let actions = json!([
        {"action": "scratchpad:write", "params": {"note": "first"}},
        {"action": "echo:fail", "params": {"code": 5000, "message": "boom"}},
        {"action": "scratchpad:write", "params": {"note": "never"}},
    ]);
    let body = json!({"worker_id": "w-stop", "actions": actions, "parallel": false, "stop_on_error": true});
    let r = post(&h, "/api/v1/execute/batch", body).await;
    assert_eq!((r.status, r.code()), (207, 5010), "{}", r.body);
    assert_eq!(codes(&r), [0, 5000, 5010]);
    assert_eq!(r.body["data"]["results"][2]["skipped"], true);
    assert_eq!(r.body["data"]["executed"], 2);
    let read = execute(&h, "w-stop", "scratchpad:read", json!({})).await;
    assert_eq!(
        read.body["data"]["notes"],
        json!(["first"]),
        "the third action never ran"
    );
}

#[tokio::test]
async fn heartbeat_and_refresh_extend_the_sessions_of_a_worker() {
    let h = host().await;
    assert_eq!(create(&h, "w-hb", "scratchpad").await.code(), 0);
    let before = last_activity(&h, "w-hb").await;
    tokio::time::sleep(Duration::from_millis(30)).await;
    let body = json!({"worker_id": "w-hb"});
    let beat = post(&h, "/api/v1/lifecycle/heartbeat", body).await;
    assert_eq!(beat.code(), 0, "{}", beat.body);
    assert_eq!(beat.body["data"]["active_sessions"], json!(["scratchpad"]));
    let after = last_activity(&h, "w-hb").await;
    assert!(after > before, "{after} > {before}");

    tokio::time::sleep(Duration::from_millis(30)).await;
    let body = json!({"worker_id": "w-hb", "resource_type": "scratchpad"});
    let refreshed = post(&h, "/api/v1/session/refresh", body).await;
    assert_eq!(refreshed.code(), 0, "{}", refreshed.body);
    assert_eq!(refreshed.body["data"]["refreshed_count"], 1);
    let later = last_activity(&h, "w-hb").await;
    assert!(later > after);
    let body = json!({"worker_id": "w-hb", "resource_type": "echo"});
    assert_eq!(post(&h, "/api/v1/session/refresh", body).await.code(), 4007);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disconnect_destroys_every_session_of_the_worker() {
    let docker = docker_ready();
    let mut backends = vec![
        ("echo", bundled("echo")),
        ("scratchpad", bundled("scratchpad")),
    ];
    if docker {
        backends.push(("docker", docker_provider()));
    }
    let h = start(backends).await;
    assert_eq!(create(&h, "w-d", "scratchpad").await.code(), 0);
    assert_eq!(create(&h, "w-other", "scratchpad").await.code(), 0);
    let mut container_of = None;
    let run = |command: &str| json!({ "command": command });
    if docker {
        // A sandbox tool without a session: a container for the one call, gone after it.
        let r = execute(&h, "w-d", "docker:run_command", run("echo hi")).await;
        assert_eq!(r.code(), 0, "{}", r.body);
        assert_eq!(r.body["data"]["stdout"], "hi\n");
        let temp = r.body["meta"]["session_id"].as_str().unwrap();
        assert!(containers_labelled("wharf.session", temp).is_empty());

        let s = create(&h, "w-d", "docker").await;
        assert_eq!(s.code(), 0, "{}", s.body);
        let id = s.body["data"]["session_id"].as_str().unwrap().to_string();
        assert_eq!(containers_labelled("wharf.session", &id).len(), 1);
        let r = execute(&h, "w-d", "docker:run_command", run("echo 3")).await;
        assert_eq!(
            (r.code(), r.body["meta"]["session_id"].as_str()),
            (0, Some(id.as_str()))
        );
        container_of = Some(id);
    }
    let expected = if docker { 2 } else { 1 };
    assert_eq!(worker_sessions(&h, "w-d").await.len(), expected);
    let r = send(
        &h,
        false,
        "/api/v1/worker/disconnect",
        json!({}),
        Some("w-d"),
    )
    .await;
    assert_eq!(r.code(), 0, "{}", r.body);
    assert_eq!(r.body["data"]["sessions_cleaned"], expected);
    assert!(worker_sessions(&h, "w-d").await.is_empty());
    let left = h.sessions_listed().await;
    assert_eq!(left.len(), 1);
    assert_eq!(left[0]["key"], "w-other", "other workers keep theirs");
    if let Some(id) = container_of {
        assert!(
            containers_labelled("wharf.session", &id).is_empty(),
            "the container is gone"
        );
    }
}

#[tokio::test]
async fn tools_and_their_schemas() {
    let h = host().await;
    let r = h.get("/api/v1/tools?include_hidden=False").await;
    assert_eq!(r.code(), 0, "{}", r.body);
    assert_eq!(
        r.body["tools"], r.body["data"]["tools"],
        "where the client reads them"
    );
    let tools = r.body["data"]["tools"].as_array().unwrap();
    let say = tools.iter().find(|t| t["name"] == "echo:say").unwrap();
    assert_eq!(say["backend"], "echo");
    assert_eq!(say["input_schema"]["properties"]["text"]["type"], "string");
    assert_eq!(say["session"], "none");
    let write = tools
        .iter()
        .find(|t| t["name"] == "scratchpad:write")
        .unwrap();
    assert_eq!(
        (&write["session"], &write["requires_session"]),
        (&json!("required"), &json!(true))
    );

    for name in ["echo:say", "echo.say"] {
        let s = h.get(&format!("/api/v1/tools/{name}/schema")).await;
        assert_eq!(s.code(), 0, "{}", s.body);
        assert_eq!(s.body["data"]["name"], "echo:say");
        assert_eq!(s.body["data"]["input_schema"]["required"], json!(["text"]));
        assert_eq!(s.body["input_schema"], s.body["data"]["input_schema"]);
    }
    let unknown = h.get("/api/v1/tools/nosuch:tool/schema").await;
    assert_eq!((unknown.status, unknown.code()), (400, 4002));
}

#[tokio::test]
async fn a_missing_worker_id_is_4003() {
    let h = host().await;
    let body = json!({"resource_type": "scratchpad", "session_config": {}});
    let r = post(&h, "/api/v1/session/create", body).await;
    assert_eq!((r.status, r.code()), (400, 4003), "{}", r.body);
    for path in [
        "/api/v1/lifecycle/heartbeat",
        "/api/v1/worker/disconnect",
        "/api/v1/session/refresh",
    ] {
        assert_eq!(post(&h, path, json!({})).await.code(), 4003, "{path}");
    }
    let body = json!({"action": "scratchpad:write", "params": {"note": "x"}});
    assert_eq!(post(&h, "/api/v1/execute", body).await.code(), 4003);
    let body = json!({"worker_id": "w", "session_config": {}});
    assert_eq!(
        post(&h, "/api/v1/session/create", body).await.code(),
        4003,
        "no resource_type"
    );
    assert!(h.sessions_listed().await.is_empty());
}

#[tokio::test]
async fn tokens_guard_everything_but_health() {
    let h = start_with(vec![("echo", bundled("echo"))], |s| {
        s.auth.tokens = vec![token(
            "reader",
            "t-read",
            &[wharf::config::TokenScope::Read],
        )];
    })
    .await;
    assert_eq!(
        (h.get("/health").await.code(), h.get("/ready").await.code()),
        (0, 0)
    );
    assert_eq!(h.get("/api/v1/tools").await.code(), 4010);
    let client = reqwest::Client::new();
    let status = |r: reqwest::RequestBuilder| async move {
        r.bearer_auth("t-read")
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    };
    assert_eq!(
        status(client.get(format!("{}/api/v1/tools", h.url))).await,
        200
    );
    let body = json!({"worker_id": "w", "action": "echo:say", "params": {"text": "x"}});
    let exec = client.post(format!("{}/api/v1/execute", h.url)).json(&body);
    assert_eq!(
        status(exec).await,
        403,
        "a read-only token may not run tools"
    );
}
