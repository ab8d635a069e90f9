//! Traces of a real `wharf serve` exported over OTLP/HTTP to a receiver that decodes the
//! official protobuf messages: the request, the guest call, each host import and the store
//! are spans of one trace, and that trace's id is the one in the answer's envelope. A
//! collector that never answers costs the calls nothing, and a bad `[telemetry]` fails
//! start-up naming the key.

use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};
use wharf_integration_tests::collector::{Collector, ReceivedSpan};
use wharf_integration_tests::processes::{WharfProcess, wharf_bin};

const TOKEN: &str = "tr4ce-token";

fn write_config(dir: &Path, telemetry: &str) -> std::path::PathBuf {
    let config = dir.join("wharf.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\ndata_dir = \"{}\"\n\n[telemetry]\n{telemetry}\n\n[[auth.tokens]]\nname = \"agent\"\nvalue = \"{TOKEN}\"\nscopes = [\"call\", \"read\"]\n\n[backends.probe]\npath = \"bundled:probe\"\n\n[backends.echo]\npath = \"bundled:echo\"\n",
            dir.join("data").display()
        ),
    )
    .unwrap();
    config
}

async fn post(client: &reqwest::Client, url: &str, body: Value) -> Value {
    client
        .post(url)
        .bearer_auth(TOKEN)
        .json(&body)
        .timeout(Duration::from_secs(30))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

fn named<'a>(spans: &'a [ReceivedSpan], name: &str) -> Option<&'a ReceivedSpan> {
    spans.iter().find(|s| s.name == name)
}

/// Whether `ancestor` is on `span`'s parent chain.
fn descends_from(spans: &[ReceivedSpan], span: &ReceivedSpan, ancestor: &ReceivedSpan) -> bool {
    let mut current = span.parent_span_id.clone();
    for _ in 0..64 {
        if current == ancestor.span_id {
            return true;
        }
        match spans.iter().find(|s| s.span_id == current) {
            Some(parent) => current = parent.parent_span_id.clone(),
            None => return false,
        }
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_is_one_trace_from_request_to_store_under_the_envelope_trace_id() {
    let collector = Collector::start().await;
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        dir.path(),
        &format!(
            "otlp_endpoint = \"{}\"\nservice_name = \"wharf-under-test\"\nexport_interval_ms = 100",
            collector.url
        ),
    );
    let host = WharfProcess::start(&config);
    let client = reqwest::Client::new();
    let session = post(
        &client,
        &format!("{}/v1/sessions", host.url),
        json!({"backend": "probe"}),
    )
    .await;
    let session_id = session["data"]["id"].as_str().unwrap().to_string();
    let reply = post(
        &client,
        &format!("{}/v1/call", host.url),
        json!({"tool": "probe:kv", "session_id": session_id,
               "args": {"scope": "session", "key": "k", "value": "v"}}),
    )
    .await;
    assert_eq!(reply["code"], 0, "{reply}");
    let trace_id = reply["meta"]["trace_id"].as_str().unwrap().to_string();
    assert_eq!(trace_id.len(), 32, "a W3C trace id: {trace_id}");
    assert!(trace_id.chars().all(|c| c.is_ascii_hexdigit()));

    let spans = collector
        .trace(&trace_id, Duration::from_secs(20), |spans| {
            ["rest.call", "backend_call", "import kv.set", "store.kv_set"]
                .iter()
                .all(|name| named(spans, name).is_some())
        })
        .await;
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    let request =
        named(&spans, "rest.call").unwrap_or_else(|| panic!("no request span: {names:?}"));
    let guest = named(&spans, "backend_call").unwrap_or_else(|| panic!("no guest call: {names:?}"));
    let import =
        named(&spans, "import kv.set").unwrap_or_else(|| panic!("no import span: {names:?}"));
    let store = named(&spans, "store.kv_set").unwrap_or_else(|| panic!("no store span: {names:?}"));
    assert!(request.parent_span_id.is_empty(), "the request is the root");
    assert_eq!(
        request.attributes.get("token").map(String::as_str),
        Some("agent")
    );
    assert!(descends_from(&spans, guest, request), "{spans:#?}");
    assert!(descends_from(&spans, import, guest), "{spans:#?}");
    assert!(descends_from(&spans, store, import), "{spans:#?}");
    assert_eq!(
        guest.attributes.get("backend").map(String::as_str),
        Some("probe")
    );
    // The session's own rows (claim, touch, release) are read under the request too.
    assert!(
        spans.iter().any(|s| s.name.starts_with("store.")
            && s.name != "store.kv_set"
            && descends_from(&spans, s, request)
            && !descends_from(&spans, s, guest)),
        "a session row span under the request: {names:?}"
    );
    assert!(spans.iter().all(|s| s.service_name == "wharf-under-test"));

    // The compatibility API keeps a client's own trace id in its answer and puts it on the
    // request's span, where an operator can search for it.
    let compat = post(
        &client,
        &format!("{}/api/v1/execute", host.url),
        json!({"action": "echo:ping", "params": {}, "trace_id": "client-7f3a"}),
    )
    .await;
    assert_eq!(compat["meta"]["trace_id"], "client-7f3a", "{compat}");
    let deadline = Instant::now() + Duration::from_secs(20);
    let tagged = loop {
        let found = collector.spans().into_iter().find(|s| {
            s.name == "compat.execute"
                && s.attributes
                    .get("wharf.client_trace_id")
                    .map(String::as_str)
                    == Some("client-7f3a")
        });
        if found.is_some() || Instant::now() > deadline {
            break found;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let tagged = tagged.expect("the compat request's span, tagged with the client's id");
    let all = collector.spans();
    assert!(
        all.iter().any(|s| s.name == "backend_call"
            && s.trace_id == tagged.trace_id
            && descends_from(&all, s, &tagged)),
        "the guest call under the compat request"
    );
    assert!(
        collector.bad_requests().is_empty(),
        "{:?}",
        collector.bad_requests()
    );
    assert!(host.terminate(Duration::from_secs(20)), "a clean exit");
}

/// A receiver that accepts connections and never answers.
async fn silent_collector() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    url
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_that_never_answers_costs_calls_nothing_and_shutdown_stays_bounded() {
    let url = silent_collector().await;
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        dir.path(),
        &format!(
            "otlp_endpoint = \"{url}\"\nexport_interval_ms = 10\nexport_timeout_ms = 60000\nmax_queue_spans = 16"
        ),
    );
    let host = WharfProcess::start(&config);
    let client = reqwest::Client::new();
    // Far more spans than the queue holds, while the one export in flight hangs for a minute.
    for i in 0..300 {
        let reply = post(
            &client,
            &format!("{}/v1/call", host.url),
            json!({"tool": "echo:ping", "args": {}}),
        )
        .await;
        assert_eq!(reply["code"], 0, "call {i}: {reply}");
    }
    let started = Instant::now();
    assert!(
        host.terminate(Duration::from_secs(30)),
        "SIGTERM: a clean exit"
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the flush at shutdown is bounded"
    );
}

#[test]
fn a_bad_telemetry_section_fails_start_up_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    for (telemetry, key) in [
        (
            "otlp_endpoint = \"ftp://collector:4318\"",
            "telemetry.otlp_endpoint",
        ),
        (
            "otlp_endpoint = \"http://c:4318\"\nexport_interval_ms = 0",
            "telemetry.export_interval_ms",
        ),
        (
            "otlp_endpoint = \"http://c:4318\"\nsampling = 2",
            "sampling",
        ),
    ] {
        let config = write_config(dir.path(), telemetry);
        let out = std::process::Command::new(wharf_bin())
            .args(["serve", "--listen", "127.0.0.1:0", "--config"])
            .arg(&config)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{telemetry}: refused");
        assert!(stderr.contains(key), "{telemetry}: names {key}: {stderr}");
    }
}
