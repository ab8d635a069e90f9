//! Which requests [`super`] answers itself: the headers and params of a plain `tools/call`,
//! for a peer in an MCP session (a 2025 revision) and for a 2026-07-28 request.

use super::super::json_reply::accepts;
use http::{HeaderMap, HeaderValue, header};
use rmcp::model::{CallToolRequestParams, ProtocolVersion};

const PROTOCOL_HEADER: &str = "mcp-protocol-version";
/// The 2026-07-28 revision's standard headers naming the method and the tool.
const METHOD_HEADER: &str = "mcp-method";
const NAME_HEADER: &str = "mcp-name";
/// The `_meta` keys that only rmcp's own handling honours in an MCP session.
const RMCP_META: [&str; 2] = ["progressToken", "io.modelcontextprotocol/protocolVersion"];

/// The headers of a request this module may answer (module doc).
pub(super) fn plain_headers(headers: &HeaderMap, limit: usize) -> bool {
    let version_ok = match headers.get(PROTOCOL_HEADER).map(HeaderValue::to_str) {
        None => true,
        Some(Ok(v)) => {
            v < ProtocolVersion::STANDARD_HEADERS.as_str()
                && ProtocolVersion::KNOWN_VERSIONS
                    .iter()
                    .any(|k| k.as_str() == v)
        }
        Some(Err(_)) => false,
    };
    version_ok && body_headers(headers, limit)
}

/// A body of declared length within `limit`, sent as JSON, by a client that accepts both
/// a JSON answer and an event stream.
fn body_headers(headers: &HeaderMap, limit: usize) -> bool {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    declared.is_some_and(|n| n <= limit)
        && accepts_json_and_events(headers)
        && crate::api::json_body::check_media_type(headers, true, &["application/json"], false)
            .is_ok()
}

/// Whether the client accepts both a JSON body and an event stream. The value the MCP
/// specification gives clients is matched as bytes; any other is parsed.
fn accepts_json_and_events(headers: &HeaderMap) -> bool {
    const USUAL: &[u8] = b"application/json, text/event-stream";
    let mut values = headers.get_all(header::ACCEPT).iter();
    if let (Some(only), None) = (values.next(), values.next())
        && only.as_bytes() == USUAL
    {
        return true;
    }
    accepts(headers, "application/json") && accepts(headers, "text/event-stream")
}

/// Whether this module may answer a `tools/call` with these params.
pub(super) fn plain_call(params: &CallToolRequestParams) -> bool {
    let rmcp_only = params.input_responses.is_some()
        || params.request_state.is_some()
        || params
            .meta
            .as_ref()
            .is_some_and(|m| RMCP_META.iter().any(|k| m.contains_key(*k)));
    !rmcp_only
}

/// The headers of a 2026-07-28 request (no MCP session) answered here: that version, the
/// standard `Mcp-Method: tools/call`, and what [`plain_headers`] asks of the body.
pub(super) fn modern_headers(headers: &HeaderMap, limit: usize) -> bool {
    let is = |name: &str, value: &ProtocolVersion| {
        headers
            .get(name)
            .is_some_and(|v| v.as_bytes() == value.as_str().as_bytes())
    };
    let modern = ProtocolVersion::V_2026_07_28;
    is(PROTOCOL_HEADER, &modern)
        && headers
            .get(METHOD_HEADER)
            .is_some_and(|v| v.as_bytes() == b"tools/call")
        && body_headers(headers, limit)
}

/// Whether a 2026-07-28 `tools/call` is answered here: its `Mcp-Name` names its tool, its
/// `_meta` carries what the revision requires (the version, the client's capabilities) and
/// no progress token, and it needs no input responses or request state. Anything else goes
/// to rmcp, which answers mismatches with the revision's errors.
pub(super) fn modern_call(params: &CallToolRequestParams, headers: &HeaderMap) -> bool {
    let modern = ProtocolVersion::V_2026_07_28;
    headers
        .get(NAME_HEADER)
        .is_some_and(|v| v.as_bytes() == params.name.as_bytes())
        && params.input_responses.is_none()
        && params.request_state.is_none()
        && params.meta.as_ref().is_some_and(|m| {
            m.protocol_version().as_ref() == Some(&modern)
                && m.missing_required_keys(&modern).is_empty()
                && !m.contains_key("progressToken")
        })
}

#[cfg(test)]
mod tests {
    use super::super::Message;
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_static(v));
        }
        h
    }

    const PLAIN: [(&str, &str); 4] = [
        ("accept", "application/json, text/event-stream"),
        ("content-type", "application/json"),
        ("content-length", "100"),
        ("mcp-protocol-version", "2025-06-18"),
    ];

    #[test]
    fn only_plain_requests_are_answered_directly() {
        assert!(plain_headers(&headers(&PLAIN), 1000));
        assert!(!plain_headers(&headers(&PLAIN), 99), "over the limit");
        let without = |name: &str| {
            let mut h = headers(&PLAIN);
            h.remove(name);
            h
        };
        assert!(!plain_headers(&without("content-length"), 1000), "chunked");
        assert!(!plain_headers(&without("accept"), 1000));
        assert!(plain_headers(&without("mcp-protocol-version"), 1000));
        let with = |name: &'static str, value: &'static str| {
            let mut h = headers(&PLAIN);
            h.insert(name, HeaderValue::from_static(value));
            h
        };
        assert!(!plain_headers(
            &with("mcp-protocol-version", "2026-07-28"),
            1000
        ));
        assert!(!plain_headers(
            &with("mcp-protocol-version", "1999-01-01"),
            1000
        ));
        assert!(!plain_headers(&with("accept", "application/json"), 1000));
        assert!(!plain_headers(
            &with("accept", "application/json, text/event-stream;q=0"),
            1000
        ));
        assert!(!plain_headers(&with("content-type", "text/plain"), 1000));
        // Other spellings of the usual value are parsed, not matched as bytes.
        assert!(plain_headers(
            &with("accept", "Text/Event-Stream;q=0.5,application/json"),
            1000
        ));
        let mut split = without("accept");
        split.append("accept", HeaderValue::from_static("application/json"));
        assert!(!plain_headers(&split, 1000), "one of the two");
        split.append("accept", HeaderValue::from_static("text/event-stream"));
        assert!(plain_headers(&split, 1000), "over two header lines");
    }

    /// Whether a `tools/call` with these params is answered here.
    fn call(params: &str) -> bool {
        let message =
            format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{params}}}"#);
        serde_json::from_slice::<Message<CallToolRequestParams>>(message.as_bytes())
            .ok()
            .and_then(|m| m.params)
            .is_some_and(|p| plain_call(&p))
    }

    #[test]
    fn modern_requests_need_the_revisions_headers_and_meta() {
        let modern = [
            ("accept", "application/json, text/event-stream"),
            ("content-type", "application/json"),
            ("content-length", "100"),
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "echo_say"),
        ];
        let h = headers(&modern);
        assert!(modern_headers(&h, 1000));
        assert!(!modern_headers(&h, 99));
        let mut listing = h.clone();
        listing.insert("mcp-method", HeaderValue::from_static("tools/list"));
        assert!(!modern_headers(&listing, 1000));
        let mut old = h.clone();
        old.insert(
            "mcp-protocol-version",
            HeaderValue::from_static("2025-11-25"),
        );
        assert!(!modern_headers(&old, 1000));
        let params =
            |text: &str| -> CallToolRequestParams { serde_json::from_str(text).expect("params") };
        let meta = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;
        assert!(modern_call(
            &params(&format!(r#"{{"name":"echo_say",{meta}}}"#)),
            &h
        ));
        assert!(
            !modern_call(&params(&format!(r#"{{"name":"other",{meta}}}"#)), &h),
            "Mcp-Name differs"
        );
        assert!(
            !modern_call(&params(r#"{"name":"echo_say"}"#), &h),
            "no _meta"
        );
        assert!(
            !modern_call(
                &params(
                    r#"{"name":"echo_say","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}"#
                ),
                &h
            ),
            "no client capabilities"
        );
        assert!(
            !modern_call(
                &params(
                    r#"{"name":"echo_say","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"progressToken":1}}"#
                ),
                &h
            ),
            "progress goes through rmcp"
        );
    }

    #[test]
    fn calls_that_need_rmcp_go_to_rmcp() {
        assert!(call(r#"{"name":"echo_say","arguments":{"text":"hi"}}"#));
        assert!(call(r#"{"name":"x","_meta":{"wharf/session_key":"k"}}"#));
        assert!(!call(r#"{"name":"x","_meta":{"progressToken":1}}"#));
        assert!(!call(r#"{"name":"x","requestState":"s"}"#));
        assert!(!call(r#"{"name":"x","arguments":[1]}"#));
        assert!(!call(r#"{"arguments":{}}"#));
        assert!(!call(r#"[]"#));
    }
}
