//! An OTLP/HTTP trace receiver for the tests: accepts `POST /v1/traces` as the
//! OpenTelemetry collector does (binary protobuf, `ExportTraceServiceRequest`), decodes the
//! official messages and keeps the spans.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::IntoResponse;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use prost::Message;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// One received span, its ids in lowercase hex as W3C trace context writes them.
#[derive(Debug, Clone)]
pub struct ReceivedSpan {
    /// 32 hex digits.
    pub trace_id: String,
    /// 16 hex digits.
    pub span_id: String,
    /// Empty for a root span.
    pub parent_span_id: String,
    /// The span's name.
    pub name: String,
    /// String forms of the span's attributes.
    pub attributes: BTreeMap<String, String>,
    /// The resource's `service.name`.
    pub service_name: String,
}

/// A running receiver.
pub struct Collector {
    /// Its base URL (`http://127.0.0.1:PORT`), what `otlp_endpoint` takes.
    pub url: String,
    spans: Arc<Mutex<Vec<ReceivedSpan>>>,
    bad_requests: Arc<Mutex<Vec<String>>>,
}

fn text(value: &Option<AnyValue>) -> String {
    match value.as_ref().and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        Some(any_value::Value::DoubleValue(d)) => d.to_string(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

fn attributes(list: &[KeyValue]) -> BTreeMap<String, String> {
    list.iter()
        .map(|kv| (kv.key.clone(), text(&kv.value)))
        .collect()
}

type Shared = (Arc<Mutex<Vec<ReceivedSpan>>>, Arc<Mutex<Vec<String>>>);

async fn traces(
    State((spans, bad)): State<Shared>,
    headers: HeaderMap,
    body: Bytes,
) -> impl IntoResponse {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    if content_type != "application/x-protobuf" {
        bad.lock()
            .unwrap()
            .push(format!("content-type {content_type:?}"));
        return (StatusCode::UNSUPPORTED_MEDIA_TYPE, Vec::new());
    }
    let request = match ExportTraceServiceRequest::decode(body) {
        Ok(r) => r,
        Err(e) => {
            bad.lock().unwrap().push(format!("undecodable: {e}"));
            return (StatusCode::BAD_REQUEST, Vec::new());
        }
    };
    let mut got = Vec::new();
    for resource_spans in request.resource_spans {
        let resource = resource_spans
            .resource
            .map(|r| attributes(&r.attributes))
            .unwrap_or_default();
        let service_name = resource.get("service.name").cloned().unwrap_or_default();
        for scope in resource_spans.scope_spans {
            for span in scope.spans {
                got.push(ReceivedSpan {
                    trace_id: hex(&span.trace_id),
                    span_id: hex(&span.span_id),
                    parent_span_id: hex(&span.parent_span_id),
                    name: span.name,
                    attributes: attributes(&span.attributes),
                    service_name: service_name.clone(),
                });
            }
        }
    }
    spans.lock().unwrap().extend(got);
    (
        StatusCode::OK,
        ExportTraceServiceResponse::default().encode_to_vec(),
    )
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl Collector {
    /// Starts a receiver on a free loopback port.
    pub async fn start() -> Collector {
        let spans = Arc::new(Mutex::new(Vec::new()));
        let bad = Arc::new(Mutex::new(Vec::new()));
        let app = axum::Router::new()
            .route("/v1/traces", axum::routing::post(traces))
            .with_state((spans.clone(), bad.clone()));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Collector {
            url,
            spans,
            bad_requests: bad,
        }
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<ReceivedSpan> {
        self.spans.lock().unwrap().clone()
    }

    /// Requests it refused (wrong content type, undecodable body).
    pub fn bad_requests(&self) -> Vec<String> {
        self.bad_requests.lock().unwrap().clone()
    }

    /// Waits (up to `within`) until the spans of `trace_id` satisfy `done`, then returns them.
    pub async fn trace(
        &self,
        trace_id: &str,
        within: std::time::Duration,
        done: impl Fn(&[ReceivedSpan]) -> bool,
    ) -> Vec<ReceivedSpan> {
        let deadline = std::time::Instant::now() + within;
        loop {
            let spans: Vec<ReceivedSpan> = self
                .spans()
                .into_iter()
                .filter(|s| s.trace_id == trace_id)
                .collect();
            if done(&spans) || std::time::Instant::now() > deadline {
                return spans;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }
}
