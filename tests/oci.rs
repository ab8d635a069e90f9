//! Backends from OCI registries, against a real registry: Debian's `docker-registry` (the
//! CNCF distribution registry) started by the test on a free loopback port with its own
//! storage. Components are pushed and signed with the real `wharf` binary.
//!
//! Must hold: push with `wharf push`, load by tag and by digest, a tampered blob is refused
//! (digest mismatch), an unsigned or wrongly signed component is refused under
//! `require_signature`, a signed one loads; a restart with the registry stopped serves from
//! the cache (and an uncached one is rejected, then loaded on retry once the registry is
//! back); an admin upload survives a restart.

use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;
use wharf::Wharf;
use wharf::config::WharfConfig;
use wharf::server::BoundServer;
use wharf_integration_tests::registry::{LocalRegistry, echo_file, wharf_cli};

/// A host made from config text, as `wharf serve` makes it, with a base URL.
struct Served {
    wharf: Arc<Wharf>,
    url: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Served {
    async fn start(config: &str) -> Served {
        let config = WharfConfig::parse(config, |_| None).expect("config parses");
        let wharf = Wharf::from_config(&config).await.expect("host starts");
        let bound = BoundServer::bind(wharf.clone(), "127.0.0.1:0".parse().expect("addr"))
            .await
            .expect("bind");
        let url = format!("http://{}", bound.local_addr().expect("addr"));
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(bound.serve(async {
            let _ = rx.await;
        }));
        Served {
            wharf,
            url,
            stop: Some(tx),
        }
    }

    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.wharf.shutdown().await;
    }

    async fn backends(&self) -> Value {
        let r = reqwest::Client::new()
            .get(format!("{}/v1/backends", self.url))
            .bearer_auth(ADMIN)
            .send()
            .await
            .expect("reply");
        r.json::<Value>().await.expect("json")["data"].clone()
    }

    async fn entry(&self, name: &str) -> Option<Value> {
        self.backends().await["backends"]
            .as_array()?
            .iter()
            .find(|b| b["name"] == name)
            .cloned()
    }

    async fn rejection(&self, name: &str) -> Option<String> {
        self.backends().await["rejected"]
            .as_array()?
            .iter()
            .find(|b| b["name"] == name)
            .and_then(|b| b["reason"].as_str().map(str::to_string))
    }

    async fn say(&self, backend: &str) -> Value {
        let r = reqwest::Client::new()
            .post(format!("{}/v1/call", self.url))
            .bearer_auth(ADMIN)
            .json(&json!({ "tool": format!("{backend}:say"), "args": { "text": "hi" } }))
            .send()
            .await
            .expect("reply");
        r.json::<Value>().await.expect("json")
    }
}

const ADMIN: &str = "t-admin";

/// `[server]` with a data dir and an admin token, `[oci]` from `oci`, and `backends`.
fn config(data_dir: &Path, oci: &str, backends: &str) -> String {
    format!(
        "[server]\ndata_dir = {:?}\n\n[[auth.tokens]]\nname = \"ops\"\nvalue = \"{ADMIN}\"\nscopes = [\"admin\", \"read\", \"call\"]\n\n[oci]\nretry_seconds = 1\n{oci}\n\n{backends}",
        data_dir.display().to_string()
    )
}

fn backend(name: &str, path: &str) -> String {
    format!("[backends.{name}]\npath = {path:?}\n")
}

#[tokio::test(flavor = "multi_thread")]
async fn push_then_load_by_tag_and_by_digest() {
    let Some(registry) = LocalRegistry::start() else {
        return;
    };
    let dir = tempfile::tempdir().expect("dir");
    let tag = registry.reference("acme/echo:1.0.0");
    let pinned = wharf_cli(&["push", echo_file(dir.path()).to_str().expect("utf8"), &tag]);
    assert!(
        pinned.starts_with(&registry.reference("acme/echo@sha256:")),
        "{pinned}"
    );

    let data = dir.path().join("data");
    let backends = backend("bytag", &tag) + &backend("bydigest", &pinned);
    let host = Served::start(&config(&data, "", &backends)).await;
    for name in ["bytag", "bydigest"] {
        let entry = host
            .entry(name)
            .await
            .unwrap_or_else(|| panic!("{name} loaded"));
        assert_eq!(entry["oci"]["resolved"], pinned.as_str(), "{entry}");
        assert_eq!(host.say(name).await["code"], 0);
    }
    assert_eq!(
        host.entry("bytag").await.expect("loaded")["oci"]["reference"],
        tag.as_str()
    );

    // `wharf pull` resolves the tag to the same digest.
    let pulled = wharf_cli(&[
        "pull",
        &tag,
        "--data-dir",
        dir.path().join("cli").to_str().expect("utf8"),
    ]);
    assert_eq!(pulled, pinned);
    host.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tampered_blob_is_refused_with_a_digest_mismatch() {
    let Some(registry) = LocalRegistry::start() else {
        return;
    };
    let dir = tempfile::tempdir().expect("dir");
    let tag = registry.reference("acme/echo:tampered");
    wharf_cli(&["push", echo_file(dir.path()).to_str().expect("utf8"), &tag]);
    let echo = wharf::bundled::wasm("echo").expect("bundled echo");
    registry.tamper_blob(echo);

    let data = dir.path().join("data");
    let host = Served::start(&config(&data, "", &backend("echo", &tag))).await;
    assert!(
        host.entry("echo").await.is_none(),
        "a tampered component loaded"
    );
    let reason = host.rejection("echo").await.expect("rejected");
    assert!(reason.contains("digest mismatch"), "{reason}");
    host.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn require_signature_refuses_unsigned_and_wrongly_signed_and_loads_signed() {
    let Some(registry) = LocalRegistry::start() else {
        return;
    };
    let dir = tempfile::tempdir().expect("dir");
    let keys = dir.path();
    wharf_cli(&["keygen", keys.join("ops").to_str().expect("utf8")]);
    wharf_cli(&["keygen", keys.join("stranger").to_str().expect("utf8")]);
    let tag = registry.reference("acme/echo:signed");
    wharf_cli(&["push", echo_file(dir.path()).to_str().expect("utf8"), &tag]);
    let oci = format!(
        "require_signature = true\nsignature_keys = [{:?}]\n",
        keys.join("ops.pub").display().to_string()
    );
    let start = |n: &str| {
        let data = dir.path().join(n);
        let text = config(&data, &oci, &backend("echo", &tag));
        async move { Served::start(&text).await }
    };

    let host = start("unsigned").await;
    assert!(host.entry("echo").await.is_none());
    let reason = host.rejection("echo").await.expect("rejected");
    assert!(reason.contains("unsigned"), "{reason}");
    host.stop().await;

    wharf_cli(&[
        "sign",
        "--key",
        keys.join("stranger.key").to_str().expect("utf8"),
        &tag,
    ]);
    let host = start("stranger").await;
    assert!(host.entry("echo").await.is_none());
    let reason = host.rejection("echo").await.expect("rejected");
    assert!(reason.contains("wrongly signed"), "{reason}");
    host.stop().await;

    wharf_cli(&[
        "sign",
        "--key",
        keys.join("ops.key").to_str().expect("utf8"),
        &tag,
    ]);
    let host = start("signed").await;
    let entry = host.entry("echo").await.expect("a signed component loads");
    assert_eq!(entry["oci"]["signature_verified"], true);
    assert_eq!(host.say("echo").await["code"], 0);
    host.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restart_with_the_registry_stopped_serves_from_the_cache() {
    let Some(mut registry) = LocalRegistry::start() else {
        return;
    };
    let dir = tempfile::tempdir().expect("dir");
    let tag = registry.reference("acme/echo:1");
    let never_pulled = registry.reference("acme/echo:2");
    wharf_cli(&["push", echo_file(dir.path()).to_str().expect("utf8"), &tag]);
    let data = dir.path().join("data");

    let host = Served::start(&config(&data, "", &backend("echo", &tag))).await;
    assert_eq!(
        host.entry("echo").await.expect("loaded")["oci"]["from_cache"],
        false
    );
    host.stop().await;

    registry.stop();
    let backends = backend("echo", &tag) + &backend("later", &never_pulled);
    let host = Served::start(&config(&data, "", &backends)).await;
    let entry = host.entry("echo").await.expect("served from the cache");
    assert_eq!(entry["oci"]["from_cache"], true, "{entry}");
    assert_eq!(host.say("echo").await["code"], 0);
    let reason = host.rejection("later").await.expect("uncached: rejected");
    assert!(reason.contains("unavailable"), "{reason}");

    // Back up and pushed: the background retry loads it.
    registry.restart();
    wharf_cli(&[
        "push",
        echo_file(dir.path()).to_str().expect("utf8"),
        &never_pulled,
    ]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while host.entry("later").await.is_none() {
        assert!(std::time::Instant::now() < deadline, "not retried");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    host.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_admin_upload_survives_a_restart_and_delete_forgets_it() {
    let dir = tempfile::tempdir().expect("dir");
    let data = dir.path().join("data");
    let text = config(&data, "", "");
    let host = Served::start(&text).await;
    let echo = wharf::bundled::wasm("echo").expect("bundled echo").to_vec();
    let url = format!("{}/v1/admin/backends/kept", host.url);
    let r = reqwest::Client::new()
        .put(&url)
        .bearer_auth(ADMIN)
        .header("content-type", "application/octet-stream")
        .body(echo)
        .send()
        .await
        .expect("reply");
    assert_eq!(r.status(), 200, "{:?}", r.text().await);
    host.stop().await;

    let host = Served::start(&text).await;
    assert!(host.entry("kept").await.is_some(), "the upload was lost");
    assert_eq!(host.say("kept").await["code"], 0);
    // The restarted host listens on another port.
    let r = reqwest::Client::new()
        .delete(format!("{}/v1/admin/backends/kept", host.url))
        .bearer_auth(ADMIN)
        .send()
        .await
        .expect("reply");
    assert_eq!(r.status(), 200);
    host.stop().await;

    let host = Served::start(&text).await;
    assert!(
        host.entry("kept").await.is_none(),
        "a deleted upload came back"
    );
    host.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plugins_dir_sidecar_naming_a_reference_loads_it_and_its_removal_unloads() {
    let Some(registry) = LocalRegistry::start() else {
        return;
    };
    let dir = tempfile::tempdir().expect("dir");
    let tag = registry.reference("acme/echo:dropped");
    let pinned = wharf_cli(&["push", echo_file(dir.path()).to_str().expect("utf8"), &tag]);
    let plugins = dir.path().join("plugins");
    std::fs::create_dir_all(&plugins).expect("plugins dir");
    std::fs::write(plugins.join("pulled.toml"), format!("path = {tag:?}\n")).expect("sidecar");

    let host = Served::start(&config(&dir.path().join("data"), "", "")).await;
    let _watcher = wharf::hot_reload::watch(host.wharf.clone(), plugins.clone())
        .await
        .expect("watch");
    let entry = host.entry("pulled").await.expect("loaded from the sidecar");
    assert_eq!(entry["oci"]["resolved"], pinned.as_str(), "{entry}");
    assert_eq!(host.say("pulled").await["code"], 0);

    std::fs::remove_file(plugins.join("pulled.toml")).expect("removed");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while host.entry("pulled").await.is_some() {
        assert!(std::time::Instant::now() < deadline, "not unloaded");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    host.stop().await;
}
