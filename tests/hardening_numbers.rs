//! Numbers and sizes that cross a boundary, tried as an attacker would against a real host:
//! request numbers that overflow expiry arithmetic, hostile rows written straight into the
//! store, sizes a sandbox reports, sizes a guest chooses, and uploads on the files route.
//! After each the host still answers `/healthz`.

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;
use wharf_integration_tests::processes::WharfProcess;
use wharf_integration_tests::{TestHost, bundled, start};

/// 18446744073709551 s: fits every integer type, but times 1000 plus "now" overflows u64.
const HOSTILE_TTL: u64 = 18_446_744_073_709_551;

async fn healthy(url: &str) {
    let reply: Value = reqwest::get(format!("{url}/healthz"))
        .await
        .expect("the host still answers")
        .json()
        .await
        .expect("healthz is JSON");
    assert_eq!(reply["code"], 0, "{reply}");
}

async fn still_lists_sessions(h: &TestHost) {
    let list = h.get("/v1/sessions").await;
    assert_eq!(list.code(), 0, "{}", list.body);
    let compat = h.get("/api/v1/session/list").await;
    assert_eq!(compat.code(), 0, "{}", compat.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ttl_that_overflows_expiry_is_refused_on_every_route() {
    let h = start(vec![("scratchpad", bundled("scratchpad"))]).await;

    let rest = h
        .post(
            "/v1/sessions",
            json!({"backend": "scratchpad", "key": "k", "ttl_seconds": HOSTILE_TTL}),
        )
        .await;
    assert_eq!((rest.status, rest.code()), (400, 4004), "{}", rest.body);
    let compat = h
        .post(
            "/api/v1/session/create",
            json!({"worker_id": "w", "resource_type": "scratchpad", "ttl": HOSTILE_TTL}),
        )
        .await;
    assert_eq!(
        (compat.status, compat.code()),
        (400, 4004),
        "{}",
        compat.body
    );
    for hostile in [json!(-1), json!(1e300), json!(u64::MAX), json!("60")] {
        let r = h
            .post(
                "/v1/sessions",
                json!({"backend": "scratchpad", "key": "k", "ttl_seconds": hostile}),
            )
            .await;
        assert_eq!(r.code(), 4004, "{hostile}: {}", r.body);
    }
    still_lists_sessions(&h).await;

    // The largest TTL accepted (ten years) is served and listed with its expiry.
    let ok = h
        .post(
            "/v1/sessions",
            json!({"backend": "scratchpad", "key": "long", "ttl_seconds": 316_224_000u64}),
        )
        .await;
    assert_eq!(ok.code(), 0, "{}", ok.body);
    let listed = h.sessions_listed().await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert!(listed[0]["expires_at_ms"].as_u64().is_some(), "{listed:?}");
    healthy(&h.url).await;
}

fn write_config(dir: &Path, db: &Path) -> PathBuf {
    let path = dir.join("wharf.toml");
    std::fs::write(
        &path,
        format!(
            "[server]\ndata_dir = \"{}\"\n\n[store]\nurl = \"sqlite://{}?mode=rwc\"\n\n[backends.scratchpad]\npath = \"bundled:scratchpad\"\n",
            dir.join("data").display(),
            db.display()
        ),
    )
    .expect("config written");
    path
}

fn sqlite(db: &Path, sql: &str) {
    let out = std::process::Command::new("sqlite3")
        .arg(db)
        .arg(sql)
        .output()
        .expect("sqlite3 runs");
    assert!(
        out.status.success(),
        "sqlite3 failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A copy of the good row `id` under a new id and key, with `column = value`.
fn hostile_copy(db: &Path, id: &str, n: usize, column: &str, value: &str) -> String {
    const COLUMNS: [&str; 17] = [
        "id",
        "tenant",
        "backend",
        "skey",
        "state",
        "data",
        "owner",
        "holder",
        "holder_until",
        "plugin_version",
        "node",
        "lease_until",
        "created_at",
        "last_activity",
        "idle_ttl",
        "max_expires_at",
        "generation",
    ];
    let bad_id = format!("ses_hostile{n}");
    let select: Vec<String> = COLUMNS
        .iter()
        .map(|c| match *c {
            "id" => format!("'{bad_id}'"),
            "skey" => format!("'hostile-{n}'"),
            c if c == column => value.to_string(),
            c => c.to_string(),
        })
        .collect();
    sqlite(
        db,
        &format!(
            "INSERT INTO wharf_sessions ({}) SELECT {} FROM wharf_sessions WHERE id = '{id}'",
            COLUMNS.join(", "),
            select.join(", ")
        ),
    );
    bad_id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_stored_rows_are_skipped_and_reported_and_the_host_starts() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("shared.db");
    let config = write_config(dir.path(), &db);

    let first = WharfProcess::start(&config);
    let client = reqwest::Client::new();
    let created: Value = client
        .post(format!("{}/v1/sessions", first.url))
        .json(&json!({"backend": "scratchpad", "key": "good"}))
        .send()
        .await
        .expect("reaches the host")
        .json()
        .await
        .expect("JSON");
    assert_eq!(created["code"], 0, "{created}");
    let good = created["data"]["id"].as_str().expect("id").to_string();
    assert!(first.terminate(Duration::from_secs(20)), "clean stop");

    let hostile = [
        ("idle_ttl", HOSTILE_TTL.to_string()),
        ("last_activity", i64::MAX.to_string()),
        ("created_at", "-5".to_string()),
        ("max_expires_at", "-1".to_string()),
        ("generation", "-7".to_string()),
        ("state", "'bogus'".to_string()),
        ("data", "'{not json'".to_string()),
    ];
    let bad_ids: Vec<String> = hostile
        .iter()
        .enumerate()
        .map(|(n, (column, value))| hostile_copy(&db, &good, n, column, value))
        .collect();

    let second = WharfProcess::start(&config);
    healthy(&second.url).await;
    let listed: Value = reqwest::get(format!("{}/v1/sessions", second.url))
        .await
        .expect("lists")
        .json()
        .await
        .expect("JSON");
    assert_eq!(listed["code"], 0, "{listed}");
    let ids: Vec<&str> = listed["data"]["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .filter_map(|s| s["id"].as_str())
        .collect();
    assert_eq!(ids, vec![good.as_str()], "only the good row is served");
    for bad in &bad_ids {
        let one: Value = reqwest::get(format!("{}/v1/sessions/{bad}", second.url))
            .await
            .expect("answers")
            .json()
            .await
            .expect("JSON");
        let code = one["code"].as_u64().expect("a code");
        assert!(
            wharf::Code::from_u32(code as u32).is_some() && code != 0,
            "{bad}: {one}"
        );
    }
    // The skipped rows are reported in the log, by id.
    let log = std::fs::read_dir(dir.path())
        .expect("dir")
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "log"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
        .collect::<String>();
    for bad in &bad_ids {
        assert!(
            log.contains(&format!("session={bad}")) && log.contains("damaged session row"),
            "{bad} is not reported in the log:\n{log}"
        );
    }
    healthy(&second.url).await;
}

fn sandbox_backend() -> wharf::config::BackendConfig {
    wharf_integration_tests::docker_provider()
}

/// A host with a docker-provider backend named `sizedocker` (its own label value, so other
/// tests' containers are never touched) and small limits.
async fn sandbox_host() -> TestHost {
    wharf_integration_tests::start_with(vec![("sizedocker", sandbox_backend())], |s| {
        s.max_upload_bytes = 1 << 20;
        s.upload_read_timeout_ms = 1_500;
    })
    .await
}

async fn sandbox_session(h: &TestHost, key: &str) -> String {
    let r = h
        .post("/v1/sessions", json!({"backend": "sizedocker", "key": key}))
        .await;
    assert_eq!(r.code(), 0, "{}", r.body);
    r.body["data"]["id"].as_str().expect("id").to_string()
}

async fn run(h: &TestHost, session: &str, command: &str) -> Value {
    let r = h
        .call_in(
            session,
            "sizedocker:run_command",
            json!({"command": command}),
        )
        .await;
    assert_eq!(r.code(), 0, "{}", r.body);
    r.body["data"]["result"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_refuses_a_file_past_its_cap_instead_of_buffering_it() {
    if !wharf_integration_tests::docker_ready() {
        return;
    }
    let h = sandbox_host().await;
    let s = sandbox_session(&h, "export").await;
    // 66 MiB: past export_file's 64 MiB cap.
    run(&h, &s, "head -c 69206016 /dev/zero > /tmp/big").await;
    let r = h
        .call_in(&s, "sizedocker:export_file", json!({"path": "/tmp/big"}))
        .await;
    assert_eq!(r.code(), 4000, "{}", r.body);
    let message = r.body["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("69206016 bytes") && message.contains("/files?path="),
        "{message}"
    );
    healthy(&h.url).await;
    assert_eq!(h.delete(&format!("/v1/sessions/{s}")).await.code(), 0);
}

/// Sends a PUT to the files route by hand: headers declaring `declared` bytes, then `sent`,
/// then nothing (the connection stays open) until `release` fires. Returns the reply.
async fn stalled_upload(
    addr: std::net::SocketAddr,
    session: &str,
    declared: usize,
    sent: &[u8],
    release: tokio::sync::oneshot::Receiver<()>,
) -> (u16, Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut tcp = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connects");
    let head = format!(
        "PUT /v1/sessions/{session}/files?path=/tmp/up HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/octet-stream\r\nContent-Length: {declared}\r\nConnection: close\r\n\r\n"
    );
    tcp.write_all(head.as_bytes()).await.expect("writes");
    tcp.write_all(sent).await.expect("writes");
    let mut reply = Vec::new();
    let read = tcp.read_to_end(&mut reply);
    tokio::pin!(read);
    tokio::select! {
        r = &mut read => { r.expect("reads"); }
        _ = release => {
            let rest = vec![b'z'; declared - sent.len()];
            let (mut rd, mut wr) = tcp.split();
            let _ = wr.write_all(&rest).await;
            rd.read_to_end(&mut reply).await.expect("reads");
        }
    }
    wharf_integration_tests::raw_http_reply(&reply)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_are_capped_time_out_and_do_not_hold_the_session_while_they_arrive() {
    if !wharf_integration_tests::docker_ready() {
        return;
    }
    let h = sandbox_host().await;
    let s = sandbox_session(&h, "uploads").await;
    let url = format!("{}/v1/sessions/{s}/files?path=/tmp/up", h.url);
    let client = reqwest::Client::new();

    // Over the 1 MiB limit: 413 with 4013, and nothing written.
    let over = client
        .put(&url)
        .header("content-type", "application/octet-stream")
        .body(vec![b'x'; (1 << 20) + 1])
        .send()
        .await
        .expect("answers");
    assert_eq!(over.status().as_u16(), 413);
    let body: Value = over.json().await.expect("JSON");
    assert_eq!(body["code"], 4013, "{body}");
    let listed = run(&h, &s, "ls /tmp/up 2>&1 || true").await;
    assert!(
        listed["stdout"]
            .as_str()
            .unwrap_or_default()
            .contains("No such file"),
        "{listed}"
    );

    // Within the limit: written whole.
    let ok = client
        .put(&url)
        .header("content-type", "application/octet-stream")
        .body(vec![b'y'; 1 << 20])
        .send()
        .await
        .expect("answers");
    let body: Value = ok.json().await.expect("JSON");
    assert_eq!(body["data"]["bytes_written"], 1 << 20, "{body}");

    // A body that stalls is cut off by the read timeout, with 5006.
    let (_never, release) = tokio::sync::oneshot::channel();
    let stalled = tokio::time::timeout(
        Duration::from_secs(30),
        stalled_upload(h.addr, &s, 100, b"abc", release),
    )
    .await
    .expect("a stalled upload is answered, not left hanging");
    assert_eq!(stalled.1["code"], 5006, "{stalled:?}");

    // While an upload is still arriving, the session's calls run.
    let (go, release) = tokio::sync::oneshot::channel();
    let (addr, session) = (h.addr, s.clone());
    let upload =
        tokio::spawn(async move { stalled_upload(addr, &session, 10, b"abc", release).await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let call = tokio::time::timeout(
        Duration::from_secs(20),
        h.call_in(
            &s,
            "sizedocker:run_command",
            json!({"command": "echo turn"}),
        ),
    )
    .await
    .expect("a call in the session is not blocked behind an arriving upload");
    assert_eq!(call.code(), 0, "{}", call.body);
    let _ = go.send(());
    let (status, body) = upload.await.expect("upload task");
    assert_eq!((status, body["code"].clone()), (200, json!(0)), "{body}");
    healthy(&h.url).await;
    assert_eq!(h.delete(&format!("/v1/sessions/{s}")).await.code(), 0);
}

fn probe() -> wharf::config::BackendConfig {
    let mut cfg = bundled("probe");
    cfg.grants.images = vec!["wharf-sandbox:test".into()];
    cfg
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sizes_a_guest_chooses_are_clamped_to_the_host_cap() {
    if !wharf_integration_tests::docker_ready() {
        return;
    }
    let h = wharf_integration_tests::start_with(vec![("sizeprobe", probe())], |s| {
        s.max_guest_buffer_bytes = 1 << 20;
    })
    .await;
    let created = h
        .call("sizeprobe:create", json!({"image": "wharf-sandbox:test"}))
        .await;
    assert_eq!(created.code(), 0, "{}", created.body);
    let id = created.body["data"]["result"]
        .as_str()
        .expect("id")
        .to_string();

    // The guest asks for 4 GiB of output; the host keeps its own 1 MiB.
    let out = h
        .call(
            "sizeprobe:exec",
            json!({"id": id, "command": "head -c 3145728 /dev/zero | tr '\\0' a", "max_output_bytes": u32::MAX}),
        )
        .await;
    assert_eq!(out.code(), 0, "{}", out.body);
    assert_eq!(
        out.body["data"]["result"].as_str().map(str::len),
        Some(1 << 20),
        "stdout is the host's cap, not the guest's"
    );

    // Copy-out with no limit of the guest's own: a file past the host's cap is refused.
    let made = h
        .call(
            "sizeprobe:exec",
            json!({"id": id, "command": "head -c 2097152 /dev/zero > /tmp/two; head -c 1000 /dev/zero > /tmp/small"}),
        )
        .await;
    assert_eq!(made.code(), 0, "{}", made.body);
    let big = h
        .call(
            "sizeprobe:copy_out",
            json!({"id": id, "path": "/tmp/two", "max_bytes": u64::MAX}),
        )
        .await;
    assert_ne!(big.code(), 0, "{}", big.body);
    let small = h
        .call(
            "sizeprobe:copy_out",
            json!({"id": id, "path": "/tmp/small", "max_bytes": u64::MAX}),
        )
        .await;
    assert_eq!(small.body["data"]["result"], 1000, "{}", small.body);
    assert_eq!(
        h.call("sizeprobe:remove", json!({"id": id})).await.code(),
        0
    );
    healthy(&h.url).await;
}
