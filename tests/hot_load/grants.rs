//! Upgrades whose config grants more wait for an admin's approval; narrower grants swap
//! in at once.

use super::*;

/// A plugins directory (watched) holding `echo.wasm` as `name` with a sidecar granting
/// `hosts`, on a host with admin and agent tokens.
async fn granted_plugin(
    name: &str,
    hosts: &[&str],
) -> (
    TestHost,
    tempfile::TempDir,
    wharf::hot_reload::PluginsWatcher,
) {
    let host = admin_host(vec![]).await;
    let dir = tempfile::tempdir().unwrap();
    drop_file(dir.path(), &format!("{name}.toml"), &sidecar(hosts));
    drop_file(dir.path(), &format!("{name}.wasm"), &wasm("echo"));
    let watcher = wharf::hot_reload::watch(host.wharf.clone(), dir.path().to_path_buf())
        .await
        .unwrap();
    assert_eq!(granted_hosts(&host, name), hosts, "loaded at start");
    (host, dir, watcher)
}

fn sidecar(hosts: &[&str]) -> Vec<u8> {
    format!("[grants]\nhttp_hosts = {hosts:?}\n").into_bytes()
}

/// The `http_hosts` the running version of `name` is granted.
fn granted_hosts(host: &TestHost, name: &str) -> Vec<String> {
    let lines = host.wharf.backend_grants(name);
    let hosts = lines.iter().find(|g| g.what == "http_hosts");
    hosts.map(|g| g.values.clone()).unwrap_or_default()
}

async fn pending_as(host: &TestHost, bearer: &str, name: &str) -> Value {
    let listed = backends_as(host, bearer).await;
    let entry = listed["backends"]
        .as_array()
        .and_then(|list| list.iter().find(|b| b["name"] == name).cloned());
    entry.map(|b| b["pending"].clone()).unwrap_or(Value::Null)
}

#[tokio::test]
async fn a_sidecar_granting_more_waits_for_approval() {
    let (host, dir, _watcher) = granted_plugin("grown", &["a.test:80"]).await;
    drop_file(
        dir.path(),
        "grown.toml",
        &sidecar(&["a.test:80", "b.test:80"]),
    );
    wait_for(
        "the upgrade to be held",
        Duration::from_secs(30),
        || async { !pending_as(&host, ADMIN, "grown").await.is_null() },
    )
    .await;
    let pending = pending_as(&host, ADMIN, "grown").await;
    assert_eq!(
        pending["grants_added"],
        json!({ "http_hosts": ["b.test:80"] }),
        "{pending}"
    );
    assert_eq!(pending["added"]["http_hosts"], json!([]), "same component");
    let agent_view = pending_as(&host, AGENT, "grown").await;
    assert!(
        agent_view.is_object() && agent_view.get("grants_added").is_none(),
        "grants are for admins: {agent_view}"
    );
    let (_, reply) = call_as(&host, AGENT, "grown:say", json!({"text": "old"})).await;
    assert_eq!(reply["data"]["result"]["text"], "old", "{reply}");
    assert_eq!(
        granted_hosts(&host, "grown"),
        ["a.test:80"],
        "the old config"
    );

    let (_, body) = admin_post(&host, "/v1/admin/backends/grown/approve", Some(ADMIN)).await;
    assert_eq!(body["code"], 0, "{body}");
    assert!(pending_as(&host, ADMIN, "grown").await.is_null());
    assert_eq!(granted_hosts(&host, "grown"), ["a.test:80", "b.test:80"]);
    let (_, reply) = call_as(&host, AGENT, "grown:say", json!({"text": "new"})).await;
    assert_eq!(reply["data"]["result"]["text"], "new", "{reply}");
}

#[tokio::test]
async fn a_sidecar_granting_less_swaps_in_without_approval() {
    let (host, dir, _watcher) = granted_plugin("narrowed", &["a.test:80", "b.test:80"]).await;
    drop_file(dir.path(), "narrowed.toml", &sidecar(&["a.test:80"]));
    wait_for("the narrower grants", Duration::from_secs(30), || async {
        granted_hosts(&host, "narrowed") == ["a.test:80"]
    })
    .await;
    assert!(pending_as(&host, ADMIN, "narrowed").await.is_null());
    let (_, reply) = call_as(&host, AGENT, "narrowed:say", json!({"text": "hi"})).await;
    assert_eq!(reply["data"]["result"]["text"], "hi", "{reply}");
}
