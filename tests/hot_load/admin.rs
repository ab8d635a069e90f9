//! Admin routes and what they do: refusals, unload, approval, tokens, pinned sha256.

use super::*;

#[tokio::test]
async fn a_bad_upgrade_leaves_the_old_version_serving() {
    let host = admin_host(vec![
        ("echo", bundled("echo")),
        ("idx", index_config("good")),
    ])
    .await;
    // Not a component at all.
    let (status, body) = put_wasm(&host, "echo", b"garbage".to_vec(), Some(ADMIN)).await;
    assert_eq!((status, body["code"].as_u64()), (400, Some(4000)), "{body}");
    // A component built against a WIT version this host does not know.
    let future = wat::parse_str(
        r#"(component
             (core module $m (func (export "f")))
             (core instance $i (instantiate $m))
             (func $f (canon lift (core func $i "f")))
             (instance $api (export "describe" (func $f)))
             (export "wharf:plugin/backend@0.9.0" (instance $api)))"#,
    )
    .unwrap();
    let (_, body) = put_wasm(&host, "echo", future, Some(ADMIN)).await;
    assert_eq!(body["code"], 4000, "{body}");
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains("wharf:plugin@0.9.0")
            && message.contains("wharf:plugin@0.1.0, wharf:plugin@0.2.0"),
        "the refusal names the version and the ones served: {body}"
    );
    let (_, reply) = call_as(&host, AGENT, "echo:say", json!({"text": "ok"})).await;
    assert_eq!(
        reply["data"]["result"]["text"], "ok",
        "the old version serves"
    );
    let listed = backends_as(&host, AGENT).await;
    let echo = listed["backends"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["name"] == "echo")
        .unwrap();
    assert!(
        echo["last_error"]["reason"]
            .as_str()
            .unwrap()
            .contains("wharf:plugin@0.9.0"),
        "{echo}"
    );
    assert_eq!(echo["last_error"]["sha256"].as_str().unwrap().len(), 64);

    // A warmup that fails (the config is not what the index expects).
    let mut bad = bundled("text-index");
    bad.config = Some(toml::from_str("documents = \"not a list\"").unwrap());
    let err = host
        .wharf
        .deploy("idx", Arc::new(wasm("text-index")), bad)
        .await
        .unwrap_err();
    assert_eq!(err.code.as_u32(), 4000);
    assert!(err.message.contains("warmup"), "{}", err.message);
    let (_, reply) = call_as(&host, AGENT, "idx:search", json!({"query": "quagga"})).await;
    assert_eq!(reply["data"]["result"][0]["id"], "good", "{reply}");

    // A good upload clears the error.
    let (_, body) = put_wasm(&host, "echo", variant(&wasm("echo"), "fixed"), Some(ADMIN)).await;
    assert_eq!(body["code"], 0, "{body}");
    assert!(body["data"]["last_error"].is_null(), "{body}");
}

#[tokio::test]
async fn unload_drains_then_answers_5011() {
    let host = Arc::new(admin_host(vec![("slow", bundled("misbehaving"))]).await);
    let pool = host.wharf.backend("slow").unwrap().behaviour().pool();
    let busy = {
        let host = host.clone();
        tokio::spawn(async move {
            call_as(
                &host,
                AGENT,
                "slow:busy",
                json!({"iterations": 1_500_000_000u64}),
            )
            .await
        })
    };
    wait_for("the call to start", Duration::from_secs(10), || {
        let pool = pool.clone();
        async move { pool.status().busy == 1 }
    })
    .await;
    let url = format!("{}/v1/admin/backends/slow", host.url);
    let (status, body) = send(reqwest::Client::new().delete(url), Some(ADMIN)).await;
    assert_eq!(
        (status, body["data"]["unloaded"].as_bool()),
        (200, Some(true)),
        "{body}"
    );
    assert_eq!(
        pool.status().busy,
        0,
        "the unload waited for the call in flight"
    );
    let (_, finished) = busy.await.unwrap();
    assert_eq!(
        finished["code"], 0,
        "the call in flight finished on the old version: {finished}"
    );
    let (status, reply) = call_as(&host, AGENT, "slow:count", json!({})).await;
    assert_eq!(
        (status, reply["code"].as_u64()),
        (503, Some(5011)),
        "{reply}"
    );
    assert!(
        pool.is_draining() && pool.status().idle == 0,
        "old instances were shut down"
    );
}

/// An instance still out when its pool drains is shut down when it comes back, not kept.
#[tokio::test]
async fn an_instance_checked_in_after_the_drain_is_not_kept() {
    let host = Arc::new(start(vec![("slow", bundled("misbehaving"))]).await);
    let backend = host.wharf.backend("slow").unwrap();
    let pool = backend.behaviour().pool();
    let busy = {
        let host = host.clone();
        tokio::spawn(async move {
            host.call("slow:busy", json!({"iterations": 300_000_000u64}))
                .await
        })
    };
    wait_for("the call to start", Duration::from_secs(10), || {
        let pool = pool.clone();
        async move { pool.status().busy == 1 }
    })
    .await;
    let retired_before = pool.status().retired;
    backend.drain().await;
    assert!(pool.is_draining());
    assert_eq!(pool.status().idle, 0);
    let finished = busy.await.unwrap();
    assert_eq!(finished.code(), 0, "the call out during the drain finished");
    assert_eq!(pool.status().idle, 0, "a drained pool keeps nothing");
    assert_eq!(
        pool.status().retired,
        retired_before + 1,
        "the instance that came back was retired (shut down)"
    );
    let refused = backend
        .call_tool(wharf::runtime::ToolCall {
            tenant: std::sync::Arc::from(wharf::quotas::HOST_TENANT),
            action: "count".into(),
            args: json!({}),
            session: None,
            timeout: Duration::from_secs(5),
            trace_id: None,
            output: None,
            cancel: None,
            host: None,
        })
        .await;
    assert!(refused.is_err(), "no new checkouts");
}

#[tokio::test]
async fn an_escalating_upgrade_waits_for_approval() {
    let host = admin_host(vec![("tool", bundled("echo"))]).await;
    // A first load is never pending, whatever it declares.
    let (_, body) = put_wasm(&host, "fresh", wasm("probe"), Some(ADMIN)).await;
    assert_eq!(
        (body["code"].as_u64(), body["data"]["state"].as_str()),
        (Some(0), Some("ready")),
        "{body}"
    );

    let (_, body) = put_wasm(&host, "tool", wasm("probe"), Some(ADMIN)).await;
    assert_eq!(body["code"], 0, "{body}");
    assert_eq!(body["data"]["state"], "pending", "{body}");
    assert_eq!(
        body["data"]["pending"]["added"]["images"],
        json!(["wharf-sandbox:*"])
    );
    assert_eq!(
        body["data"]["pending"]["added"]["http_hosts"],
        json!(["*:*"])
    );
    let (_, reply) = call_as(&host, AGENT, "tool:say", json!({"text": "still echo"})).await;
    assert_eq!(reply["code"], 0, "the running version serves: {reply}");
    let listed = backends_as(&host, AGENT).await;
    let entry = listed["backends"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["name"] == "tool")
        .unwrap()
        .clone();
    assert_eq!(entry["declared_name"], "echo");
    assert_eq!(entry["pending"]["version"], "0.1.0", "{entry}");
    assert_eq!(
        entry["pending"]["added"]["images"],
        json!(["wharf-sandbox:*"]),
        "{entry}"
    );

    // Rejected over REST: the running version keeps serving, nothing waits any more.
    let (status, _) = admin_post(&host, "/v1/admin/backends/tool/reject", Some(AGENT)).await;
    assert_eq!(status, 403);
    let (status, _) = admin_post(&host, "/v1/admin/backends/tool/reject", None).await;
    assert_eq!(status, 401);
    let (_, body) = admin_post(&host, "/v1/admin/backends/tool/reject", Some(ADMIN)).await;
    assert_eq!(body["code"], 0, "{body}");
    assert_eq!(body["data"]["rejected"]["declared_name"], "probe", "{body}");
    let listed = backends_as(&host, AGENT).await;
    let entry = &listed["backends"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["name"] == "tool")
        .unwrap()["pending"];
    assert!(entry.is_null(), "nothing waits after the reject: {entry}");
    let (_, reply) = call_as(&host, AGENT, "tool:say", json!({"text": "kept"})).await;
    assert_eq!(
        reply["code"], 0,
        "the running version still serves: {reply}"
    );
    let (_, body) = admin_post(&host, "/v1/admin/backends/tool/reject", Some(ADMIN)).await;
    assert_eq!(body["code"], 4002, "nothing left to reject: {body}");
    let (_, body) = admin_post(&host, "/v1/admin/backends/ghost/reject", Some(ADMIN)).await;
    assert_eq!(body["code"], 4002, "no such backend: {body}");

    // Uploaded again, and this time approved.
    let (_, body) = put_wasm(&host, "tool", wasm("probe"), Some(ADMIN)).await;
    assert_eq!(body["data"]["state"], "pending", "{body}");
    let (status, _) = admin_post(&host, "/v1/admin/backends/tool/approve", Some(AGENT)).await;
    assert_eq!(status, 403);
    let (_, body) = admin_post(&host, "/v1/admin/backends/tool/approve", Some(ADMIN)).await;
    assert_eq!(body["code"], 0, "{body}");
    assert_eq!(body["data"]["declared_name"], "probe");
    assert!(body["data"]["pending"].is_null());
    let tools = send(
        reqwest::Client::new().get(format!("{}/v1/tools", host.url)),
        Some(AGENT),
    )
    .await
    .1;
    let names: Vec<&str> = tools["data"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(
        names.contains(&"tool:kv") && !names.contains(&"tool:say"),
        "{names:?}"
    );
    let (_, body) = admin_post(&host, "/v1/admin/backends/tool/approve", Some(ADMIN)).await;
    assert_eq!(body["code"], 4002, "nothing left to approve: {body}");
}

#[tokio::test]
async fn admin_routes_need_an_admin_token() {
    let host = admin_host(vec![("echo", bundled("echo"))]).await;
    let (status, _) = put_wasm(&host, "echo", wasm("echo"), None).await;
    assert_eq!(status, 401);
    let (status, body) = put_wasm(&host, "echo", wasm("echo"), Some(AGENT)).await;
    assert_eq!((status, body["code"].as_u64()), (403, Some(4030)), "{body}");
    let url = format!("{}/v1/admin/backends/echo", host.url);
    let (status, _) = send(reqwest::Client::new().delete(&url), Some(AGENT)).await;
    assert_eq!(status, 403);
    let (status, _) = send(reqwest::Client::new().delete(&url), None).await;
    assert_eq!(status, 401);
    let (status, _) = admin_post(&host, "/v1/admin/backends/echo/approve", None).await;
    assert_eq!(status, 401);
    assert_eq!(
        call_as(&host, AGENT, "echo:ping", json!({})).await.1["code"],
        0,
        "nothing was unloaded"
    );

    // Without an admin token configured the routes do not exist.
    let open = start(vec![("echo", bundled("echo"))]).await;
    let (status, body) = put_wasm(&open, "echo", wasm("echo"), None).await;
    assert_eq!((status, body["code"].as_u64()), (400, Some(4002)), "{body}");
    assert_eq!(open.delete("/v1/admin/backends/echo").await.code(), 4002);
    assert_eq!(open.call("echo:ping", json!({})).await.code(), 0);
}

#[tokio::test]
async fn a_sha256_mismatch_is_refused() {
    let host = admin_host(vec![]).await;
    let mut pinned = bundled("echo");
    pinned.sha256 = Some("ab".repeat(32));
    let err = host
        .wharf
        .load_backend("pinned", pinned.clone())
        .await
        .unwrap_err();
    assert!(
        format!("{err:#}").contains("integrity check failed"),
        "{err:#}"
    );
    assert!(format!("{err:#}").contains(&sha(&wasm("echo"))), "{err:#}");
    pinned.sha256 = Some(sha(&wasm("echo")).to_uppercase());
    host.wharf.load_backend("pinned", pinned).await.unwrap();

    let url = format!(
        "{}/v1/admin/backends/up?sha256={}",
        host.url,
        "cd".repeat(32)
    );
    let (status, body) = send(
        reqwest::Client::new().put(url).body(wasm("echo")),
        Some(ADMIN),
    )
    .await;
    assert_eq!((status, body["code"].as_u64()), (400, Some(4000)), "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("integrity check failed"),
        "{body}"
    );
    let url = format!(
        "{}/v1/admin/backends/up?sha256={}",
        host.url,
        sha(&wasm("echo"))
    );
    let (_, body) = send(
        reqwest::Client::new().put(url).body(wasm("echo")),
        Some(ADMIN),
    )
    .await;
    assert_eq!(body["code"], 0, "{body}");
}
