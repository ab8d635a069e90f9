//! `GET /metrics`: tool calls, instance gauges, backend events and host import calls show
//! up in the Prometheus exposition with the values the calls made.

use serde_json::json;
use wharf_integration_tests::{TestHost, bundled, start};

async fn scrape(h: &TestHost) -> (String, String) {
    let response = reqwest::get(format!("{}/metrics", h.url)).await.unwrap();
    assert_eq!(response.status(), 200);
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    (content_type, response.text().await.unwrap())
}

/// The value of the sample `series` (name and labels, exactly as exposed).
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|line| {
        let rest = line.strip_prefix(series)?.strip_prefix(' ')?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_instances_events_and_imports_are_exposed() {
    let h = start(vec![("echo", bundled("echo")), ("probe", bundled("probe"))]).await;
    for _ in 0..2 {
        let r = h.call("echo:say", json!({"text": "hi"})).await;
        assert_eq!(r.code(), 0, "{}", r.body);
    }
    let r = h
        .call("echo:fail", json!({"code": 4001, "message": "x"}))
        .await;
    assert_eq!(r.code(), 4001, "{}", r.body);
    let r = h
        .call(
            "probe:kv",
            json!({"scope": "backend", "key": "k", "value": "v"}),
        )
        .await;
    assert_eq!(r.code(), 0, "{}", r.body);

    let (content_type, text) = scrape(&h).await;
    assert!(content_type.contains("openmetrics-text"), "{content_type}");
    assert!(text.trim_end().ends_with("# EOF"), "{text}");
    let expect = |series: &str, want: f64| {
        assert_eq!(value(&text, series), Some(want), "{series} in\n{text}");
    };
    expect(
        r#"wharf_tool_calls_total{backend="echo",tool="echo:say",code="0"}"#,
        2.0,
    );
    expect(
        r#"wharf_tool_calls_total{backend="echo",tool="echo:fail",code="4001"}"#,
        1.0,
    );
    expect(
        r#"wharf_tool_call_duration_seconds_count{backend="echo"}"#,
        3.0,
    );
    expect(
        r#"wharf_backend_events_total{backend="echo",event="load"}"#,
        1.0,
    );
    expect(
        r#"wharf_backend_events_total{backend="probe",event="load"}"#,
        1.0,
    );
    expect(r#"wharf_instances{backend="echo",state="busy"}"#, 0.0);
    let idle = value(&text, r#"wharf_instances{backend="echo",state="idle"}"#);
    assert!(
        idle.is_some_and(|n| n >= 1.0),
        "idle echo instances in\n{text}"
    );
    expect(r#"wharf_instances_discarded_total{backend="echo"}"#, 0.0);
    expect(r#"wharf_instances_retired_total{backend="echo"}"#, 0.0);
    let kv_ok: f64 = text
        .lines()
        .filter(|l| {
            l.starts_with(r#"wharf_host_import_calls_total{backend="probe",import="kv."#)
                && l.contains(r#"outcome="ok""#)
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert!(kv_ok >= 1.0, "kv import calls in\n{text}");
    expect(
        r#"wharf_host_import_calls_total{backend="probe",import="kv.set",outcome="ok"}"#,
        1.0,
    );
    let compiled = text
        .lines()
        .any(|l| l.starts_with(r#"wharf_backend_compile_seconds_count{backend="echo",cache=""#));
    assert!(compiled, "compile histogram in\n{text}");

    // A failing call counts under its code; a second scrape sees the new totals.
    let r = h.call("echo:say", json!({"text": 5})).await;
    assert_eq!(r.code(), 4004, "{}", r.body);
    let (_, text) = scrape(&h).await;
    assert_eq!(
        value(
            &text,
            r#"wharf_tool_calls_total{backend="echo",tool="echo:say",code="4004"}"#
        ),
        Some(1.0),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_is_in_the_openapi_document() {
    let h = start(vec![("echo", bundled("echo"))]).await;
    let doc = h.get("/openapi.json").await;
    assert!(
        doc.body["paths"]["/metrics"]["get"].is_object(),
        "{}",
        doc.body
    );
}
