//! The Python example (`plugins/python-workbench`, built with `wharf-py build` over the
//! pinned componentize-py) in a real host: loaded from a config path and from a plugins
//! directory, arguments validated from the schema its type hints generate, per-session
//! data across calls and across a restart of a real `wharf serve` process, a Python
//! exception as a coded error, kv in both scopes, a warmup that raises refused with its
//! reason — over REST and over MCP.

use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use wharf::config::BackendConfig;
use wharf_integration_tests::processes::wharf_bin;
use wharf_integration_tests::python::workbench_wasm;
use wharf_integration_tests::{TestHost, start_with};

#[path = "python_backend/mcp.rs"]
mod mcp;
#[path = "python_backend/parity.rs"]
mod parity;
#[path = "python_backend/provider.rs"]
mod provider;
#[path = "python_backend/served.rs"]
mod served;

/// A compile cache holding the example, compiled once by `wharf inspect` (the first load of
/// the 18 MB component compiles for several seconds; the tests here are about behaviour).
fn compiled_cache() -> PathBuf {
    static SEED: OnceLock<PathBuf> = OnceLock::new();
    SEED.get_or_init(|| {
        let wasm = workbench_wasm();
        let data = wasm.with_file_name("test-seed");
        let out = Command::new(wharf_bin())
            .arg("inspect")
            .arg(&wasm)
            .arg("--data-dir")
            .arg(&data)
            .output()
            .expect("wharf inspect runs");
        assert!(
            out.status.success(),
            "inspect failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        data.join("compile-cache")
    })
    .clone()
}

/// A fresh data directory whose compile cache already holds the example.
fn seeded_data_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    let cache = dir.path().join("compile-cache");
    std::fs::create_dir_all(&cache).expect("cache dir");
    for entry in std::fs::read_dir(compiled_cache()).expect("seed cache") {
        let entry = entry.expect("entry");
        std::fs::copy(entry.path(), cache.join(entry.file_name())).expect("copy");
    }
    dir
}

fn workbench(config: Option<Value>) -> BackendConfig {
    let mut backend = BackendConfig::at(workbench_wasm().display().to_string());
    backend.config = config.map(|c| toml::Value::try_from(c).expect("toml"));
    backend
}

async fn host(config: Option<Value>) -> (TestHost, tempfile::TempDir) {
    let data = seeded_data_dir();
    let dir = data.path().to_path_buf();
    let h = start_with(vec![("workbench", workbench(config))], |s| {
        s.data_dir = dir;
    })
    .await;
    (h, data)
}

async fn new_session(h: &TestHost, key: &str) -> String {
    let r = h
        .post("/v1/sessions", json!({"backend": "workbench", "key": key}))
        .await;
    assert_eq!(r.code(), 0, "{:?}", r.body);
    r.body["data"]["id"].as_str().expect("id").to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schema_from_type_hints_is_enforced_and_exceptions_become_coded_errors() {
    let docs = json!({"documents": {"pier": "A pier is where boats tie up in a wharf"}});
    let (h, _data) = host(Some(docs)).await;

    // The schema comes from the signature and the docstring.
    let tools = h.get("/v1/tools").await.body["data"]["tools"].clone();
    let search = tools
        .as_array()
        .expect("tools")
        .iter()
        .find(|t| t["name"] == "workbench:search")
        .expect("workbench:search listed")
        .clone();
    assert_eq!(
        search["description"],
        "Searches the documents indexed at warmup."
    );
    let schema = &search["input_schema"];
    assert_eq!(schema["required"], json!(["query"]), "{schema}");
    assert_eq!(schema["properties"]["limit"]["type"], "integer");
    assert_eq!(schema["properties"]["limit"]["default"], 5);
    assert_eq!(
        schema["properties"]["query"]["description"],
        "Words to look for."
    );
    assert_eq!(search["annotations"]["read_only"], true);
    let add = tools
        .as_array()
        .expect("tools")
        .iter()
        .find(|t| t["name"] == "workbench:add_note")
        .expect("add_note")
        .clone();
    assert_eq!(add["session"], "required");
    assert_eq!(
        add["input_schema"]["properties"]["priority"]["enum"],
        json!(["low", "normal", "high"])
    );
    assert!(
        add["input_schema"]["properties"].get("session").is_none(),
        "the injected session is not an argument: {add}"
    );

    // The shared index was built in warmup, with the operator's documents.
    let r = h
        .call("workbench:search", json!({"query": "boats", "limit": 2}))
        .await;
    assert_eq!(r.code(), 0, "{:?}", r.body);
    assert_eq!(r.body["data"]["result"][0]["id"], "pier");

    // The host validates against the generated schema before Python runs.
    let missing = h.call("workbench:search", json!({"limit": 2})).await;
    assert_eq!(missing.code(), 4003, "{:?}", missing.body);
    let wrong = h
        .call("workbench:search", json!({"query": "x", "limit": "two"}))
        .await;
    assert_eq!(wrong.code(), 4004, "{:?}", wrong.body);
    let literal = h
        .call("workbench:divide", json!({"a": 1, "b": "zero"}))
        .await;
    assert_eq!(literal.code(), 4004, "{:?}", literal.body);
    let unknown = h
        .call("workbench:search", json!({"query": "x", "lmit": 2}))
        .await;
    assert_eq!(unknown.code(), 4004, "{:?}", unknown.body);

    // ToolError codes pass through.
    let r = h
        .call("workbench:search", json!({"query": "x", "limit": 99}))
        .await;
    assert_eq!(r.code(), 4000, "{:?}", r.body);
    let r = h.call("workbench:search", json!({"query": "zebra"})).await;
    assert_eq!(r.code(), 4006, "{:?}", r.body);
    assert!(r.body["message"].as_str().unwrap_or("").contains("zebra"));

    // An uncaught exception: 5000 with its message and type, not a trap (5013).
    let r = h.call("workbench:divide", json!({"a": 1, "b": 0})).await;
    assert_eq!(r.code(), 5000, "{:?}", r.body);
    assert_eq!(r.body["message"], "division by zero");
    assert_eq!(r.body["data"]["exception"], "ZeroDivisionError");
    let info = h.backend_info("workbench").await;
    assert_eq!(info["instances"]["discarded"], 0, "no trap: {info}");
    let r = h.call("workbench:divide", json!({"a": 1, "b": 4})).await;
    assert_eq!(r.body["data"]["result"], 0.25, "{:?}", r.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_data_kv_and_attachments() {
    let (h, _data) = host(None).await;
    let a = new_session(&h, "thread-a").await;
    let b = new_session(&h, "thread-b").await;

    // A session tool without a session is refused by the host.
    let r = h.call("workbench:add_note", json!({"text": "x"})).await;
    assert_ne!(r.code(), 0, "{:?}", r.body);

    for (text, tags) in [("one", json!(["x"])), ("two", json!(["y"]))] {
        let r = h
            .call_in(
                &a,
                "workbench:add_note",
                json!({"text": text, "tags": tags}),
            )
            .await;
        assert_eq!(r.code(), 0, "{:?}", r.body);
    }
    let r = h
        .call_in(
            &a,
            "workbench:add_note",
            json!({"text": "three", "priority": "high"}),
        )
        .await;
    assert_eq!(r.body["data"]["result"]["count"], 3, "{:?}", r.body);
    let r = h
        .call_in(
            &a,
            "workbench:add_note",
            json!({"text": "x", "priority": "urgent"}),
        )
        .await;
    assert_eq!(r.code(), 4004, "Literal is an enum: {:?}", r.body);

    // Session data persists across calls and stays per session.
    let listed = h.call_in(&a, "workbench:list_notes", json!({})).await;
    let notes = listed.body["data"]["result"]["notes"].clone();
    let texts: Vec<&str> = notes
        .as_array()
        .expect("notes")
        .iter()
        .filter_map(|n| n["text"].as_str())
        .collect();
    assert_eq!(texts, ["one", "two", "three"]);
    assert_eq!(listed.body["data"]["result"]["owner"], "thread-a");
    let other = h.call_in(&b, "workbench:list_notes", json!({})).await;
    assert_eq!(other.body["data"]["result"]["notes"], json!([]));

    // A dataclass argument (with a Literal field) arrives as the dataclass.
    let filtered = h
        .call_in(&a, "workbench:list_notes", json!({"filter": {"tag": "y"}}))
        .await;
    assert_eq!(
        filtered.body["data"]["result"]["notes"][0]["text"], "two",
        "{:?}",
        filtered.body
    );
    let filtered = h
        .call_in(
            &a,
            "workbench:list_notes",
            json!({"filter": {"priority": "high"}}),
        )
        .await;
    assert_eq!(filtered.body["data"]["result"]["notes"][0]["text"], "three");
    let bad = h
        .call_in(
            &a,
            "workbench:list_notes",
            json!({"filter": {"colour": "red"}}),
        )
        .await;
    assert_eq!(bad.code(), 4004, "{:?}", bad.body);

    // Attachments.
    let r = h.call_in(&a, "workbench:export_notes", json!({})).await;
    assert_eq!(r.code(), 0, "{:?}", r.body);
    let attachment = &r.body["data"]["attachments"][0];
    assert_eq!(
        (&attachment["name"], &attachment["mime_type"]),
        (&json!("notes.md"), &json!("text/markdown"))
    );

    // kv, backend scope: shared by every instance and call.
    for expected in 1..=3 {
        let r = h.call("workbench:bump", json!({"counter": "visits"})).await;
        assert_eq!(r.body["data"]["result"]["value"], expected, "{:?}", r.body);
    }
    let r = h
        .call("workbench:bump", json!({"counter": "other", "by": 5}))
        .await;
    assert_eq!(
        r.body["data"]["result"]["known"],
        json!(["counter/other", "counter/visits"])
    );

    // kv, session scope: one draft per session.
    let r = h
        .call_in(&a, "workbench:draft", json!({"text": "draft of a"}))
        .await;
    assert_eq!(
        r.body["data"]["result"]["draft"], "draft of a",
        "{:?}",
        r.body
    );
    let r = h.call_in(&b, "workbench:draft", json!({})).await;
    assert_eq!(
        r.body["data"]["result"]["draft"],
        Value::Null,
        "{:?}",
        r.body
    );
    let r = h.call_in(&a, "workbench:draft", json!({})).await;
    assert_eq!(r.body["data"]["result"]["draft"], "draft of a");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warmup_that_raises_is_refused_with_its_reason() {
    let data = seeded_data_dir();
    let dir = data.path().to_path_buf();
    let h = start_with(vec![], |s| s.data_dir = dir).await;

    // From a config path: the load fails with the exception's message.
    let refused = h
        .wharf
        .load_backend(
            "broken",
            workbench(Some(json!({"documents": {"empty": "  "}}))),
        )
        .await
        .expect_err("a warmup that raises refuses the load");
    let reason = format!("{refused:#}");
    assert!(reason.contains("document 'empty' is empty"), "{reason}");
    assert_eq!(
        h.call("broken:search", json!({"query": "x"})).await.code(),
        4002
    );

    // From a plugins directory: listed as rejected with the reason; a good one loads.
    let plugins = tempfile::tempdir().expect("plugins dir");
    let wasm = std::fs::read(workbench_wasm()).expect("wasm");
    std::fs::write(plugins.path().join("good.wasm"), &wasm).expect("write");
    std::fs::write(plugins.path().join("bad.wasm"), &wasm).expect("write");
    std::fs::write(
        plugins.path().join("bad.toml"),
        "[config.documents]\nempty = \"\"\n",
    )
    .expect("write");
    let _watcher = wharf::hot_reload::watch(h.wharf.clone(), plugins.path().to_path_buf())
        .await
        .expect("watch");
    let r = h.call("good:search", json!({"query": "python"})).await;
    assert_eq!(r.code(), 0, "{:?}", r.body);
    let rejected = h.get("/v1/backends").await.body["data"]["rejected"].clone();
    let bad = rejected
        .as_array()
        .and_then(|r| r.iter().find(|r| r["name"] == "bad").cloned())
        .unwrap_or_else(|| panic!("bad is rejected: {rejected}"));
    assert!(
        bad["reason"]
            .as_str()
            .unwrap_or("")
            .contains("document 'empty' is empty"),
        "{bad}"
    );
}

/// A loopback server answering each request with the `authorization` header it was sent.
fn authorization_echo() -> u16 {
    wharf_integration_tests::loopback_server(|head| {
        head.lines()
            .find_map(|l| l.strip_prefix("authorization: "))
            .unwrap_or("none")
            .to_string()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_granted_secret_is_the_bearer_token_of_an_outbound_call() {
    let secret = tempfile::NamedTempFile::new().expect("secret file");
    std::fs::write(secret.path(), "s3cr3t").expect("write");
    let mut backend = workbench(None);
    backend.grants.http_hosts = vec!["127.0.0.1:*".into()];
    backend.grants.http_private_cidrs = vec!["127.0.0.0/8".into()];
    backend.grants.secrets = toml::Value::Table(toml::Table::from_iter([(
        "upstream_token".to_string(),
        toml::Value::String(format!("file:{}", secret.path().display())),
    )]))
    .try_into()
    .expect("grants");
    let data = seeded_data_dir();
    let dir = data.path().to_path_buf();
    let h = start_with(vec![("workbench", backend)], |s| s.data_dir = dir).await;
    // componentize-py links every import of the world: a Python backend is a 0.3.0 one.
    assert_eq!(h.backend_info("workbench").await["contract"], "0.3.0");

    let url = format!("http://127.0.0.1:{}/", authorization_echo());
    let sent = h
        .call(
            "workbench:fetch",
            json!({"url": url, "bearer_secret": "upstream_token"}),
        )
        .await;
    assert_eq!(sent.code(), 0, "{}", sent.body);
    assert_eq!(sent.body["data"]["result"]["body"], "Bearer s3cr3t");

    // A name the operator did not grant reaches the caller as the SDK's ToolError 4030.
    let refused = h
        .call(
            "workbench:fetch",
            json!({"url": url, "bearer_secret": "other"}),
        )
        .await;
    assert_eq!(refused.code(), 4030, "{}", refused.body);
    assert!(
        refused.body["message"]
            .as_str()
            .unwrap_or("")
            .contains("secret `other` is not granted"),
        "{}",
        refused.body
    );
    drop(data);
}

/// The SDK's `files` and `process` modules against a real container: the workbench makes
/// one of its own and, through the sandbox agent, writes, appends, reads (all and a piece),
/// stats and lists a file, then runs a process that reads its stdin and reads its output
/// to the end, and kills another (an argv, no shell).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_and_processes_through_the_agent_from_python() {
    if !wharf_integration_tests::docker_ready() {
        return;
    }
    wharf_integration_tests::remove_backend_containers("workbench");
    let mut backend = workbench(None);
    backend.grants.images = vec!["wharf-sandbox:test".into()];
    let data = seeded_data_dir();
    let dir = data.path().to_path_buf();
    let h = start_with(vec![("workbench", backend)], |s| s.data_dir = dir).await;
    let r = h
        .call(
            "workbench:sandbox_files",
            json!({"image": "wharf-sandbox:test"}),
        )
        .await;
    assert_eq!(r.code(), 0, "{}", r.body);
    let result = &r.body["data"]["result"];
    assert_eq!(result["content"], "one\ntwo\n", "{result}");
    assert_eq!(result["size"], 8);
    assert_eq!(result["piece"], "two", "from an offset, bounded");
    assert_eq!(result["kind"], "file");
    assert_eq!(result["entries"], json!([["a.txt", "file"]]));
    assert_eq!(result["output"], "out\ngot hi\n");
    assert_eq!(result["exit_code"], 0);
    assert_eq!(result["listed"], true);
    assert_eq!(result["killed"], 137, "SIGKILL: 128 + 9");

    // An image the operator did not grant is refused before anything runs.
    let refused = h
        .call(
            "workbench:sandbox_files",
            json!({"image": "busybox:latest"}),
        )
        .await;
    assert_eq!(refused.code(), 4030, "{}", refused.body);
    wharf_integration_tests::remove_backend_containers("workbench");
    drop(data);
}
