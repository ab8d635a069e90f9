//! Real `wharf serve` processes: session data and kv across a restart, and a cold compile
//! in the worker process.

use super::*;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// A `wharf serve --plugins DIR` process on a free port, with its own data directory.
struct Served {
    child: Child,
    url: String,
}

impl Served {
    fn start(plugins: &Path, data: &Path) -> Served {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .expect("port")
            .local_addr()
            .expect("addr")
            .port();
        let log = data.join(format!("serve-{port}.log"));
        let child = Command::new(wharf_bin())
            .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
            .arg("--plugins")
            .arg(plugins)
            .arg("--data-dir")
            .arg(data)
            .stdout(Stdio::null())
            .stderr(
                std::fs::File::create(&log)
                    .map(Stdio::from)
                    .unwrap_or(Stdio::null()),
            )
            .spawn()
            .expect("wharf starts");
        let url = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(120);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "wharf did not start: {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Served { child, url }
    }

    async fn post(&self, path: &str, body: Value) -> Value {
        reqwest::Client::new()
            .post(format!("{}{path}", self.url))
            .json(&body)
            .send()
            .await
            .expect("request")
            .json()
            .await
            .expect("json")
    }

    fn stop(mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_data_and_kv_survive_a_restart_of_wharf_serve() {
    let data = seeded_data_dir();
    let plugins = tempfile::tempdir().expect("plugins");
    std::fs::copy(workbench_wasm(), plugins.path().join("workbench.wasm")).expect("copy");

    let first = Served::start(plugins.path(), data.path());
    let created = first
        .post(
            "/v1/sessions",
            json!({"backend": "workbench", "key": "restart-me"}),
        )
        .await;
    let id = created["data"]["id"]
        .as_str()
        .expect("session id")
        .to_string();
    let call = |tool: &str, args: Value| json!({"tool": tool, "args": args, "session_id": id});
    let r = first
        .post(
            "/v1/call",
            call("workbench:add_note", json!({"text": "before"})),
        )
        .await;
    assert_eq!(r["code"], 0, "{r}");
    let r = first
        .post("/v1/call", call("workbench:draft", json!({"text": "kept"})))
        .await;
    assert_eq!(r["code"], 0, "{r}");
    let r = first
        .post(
            "/v1/call",
            json!({"tool": "workbench:bump", "args": {"counter": "c"}}),
        )
        .await;
    assert_eq!(r["data"]["result"]["value"], 1, "{r}");
    first.stop();

    let second = Served::start(plugins.path(), data.path());
    let r = second
        .post(
            "/v1/call",
            call("workbench:add_note", json!({"text": "after"})),
        )
        .await;
    assert_eq!(
        r["data"]["result"]["count"], 2,
        "the same session, its data kept: {r}"
    );
    let r = second
        .post("/v1/call", call("workbench:list_notes", json!({})))
        .await;
    let texts: Vec<Value> = r["data"]["result"]["notes"]
        .as_array()
        .expect("notes")
        .iter()
        .map(|n| n["text"].clone())
        .collect();
    assert_eq!(texts, [json!("before"), json!("after")]);
    let r = second
        .post("/v1/call", call("workbench:draft", json!({})))
        .await;
    assert_eq!(r["data"]["result"]["draft"], "kept", "{r}");
    let r = second
        .post(
            "/v1/call",
            json!({"tool": "workbench:bump", "args": {"counter": "c"}}),
        )
        .await;
    assert_eq!(r["data"]["result"]["value"], 2, "{r}");
    second.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wharf_serve_compiles_cold_in_a_worker_and_reports_what_does_not_compile() {
    // No seeded cache: the binary compiles the 18 MB component cold, in a child process.
    let data = tempfile::tempdir().expect("data");
    let plugins = tempfile::tempdir().expect("plugins");
    std::fs::copy(workbench_wasm(), plugins.path().join("workbench.wasm")).expect("copy");
    std::fs::write(plugins.path().join("garbage.wasm"), b"\0asm not really").expect("write");
    let served = Served::start(plugins.path(), data.path());
    let r = served
        .post(
            "/v1/call",
            json!({"tool": "workbench:divide", "args": {"a": 1, "b": 2}}),
        )
        .await;
    assert_eq!(r["data"]["result"], 0.5, "{r}");
    let backends: Value = reqwest::get(format!("{}/v1/backends", served.url))
        .await
        .expect("backends")
        .json()
        .await
        .expect("json");
    let garbage = backends["data"]["rejected"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["name"] == "garbage").cloned())
        .unwrap_or_else(|| panic!("garbage is rejected: {backends}"));
    let reason = garbage["reason"].as_str().unwrap_or("");
    assert!(
        reason.contains("compiling the component") && reason.matches("compiling").count() == 1,
        "the worker's reason, once: {reason}"
    );
    let cached = std::fs::read_dir(data.path().join("compile-cache"))
        .expect("cache dir")
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "cwasm"))
        .count();
    assert_eq!(cached, 1, "the worker stored the artifact");
    served.stop();
    let log = std::fs::read_dir(data.path())
        .expect("data dir")
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("serve-"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
        .collect::<String>();
    assert!(log.contains("compiled in a worker process"), "{log}");
}
