//! Tests of the JSON-RPC messages and the SSE scanner, hostile inputs included.

use super::*;

fn scan_all(body: &[u8], id: u64) -> Result<Reply, ToolError> {
    let mut scanner = SseScanner::new(id);
    if let Some(reply) = scanner.feed(body)? {
        return Ok(reply);
    }
    scanner.finish()
}

fn scan_bytewise(body: &[u8], id: u64) -> Result<Reply, ToolError> {
    let mut scanner = SseScanner::new(id);
    for b in body {
        if let Some(reply) = scanner.feed(std::slice::from_ref(b))? {
            return Ok(reply);
        }
    }
    scanner.finish()
}

#[test]
fn messages_are_json_rpc() {
    assert_eq!(
        request(7, "tools/list", None),
        json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list"})
    );
    assert_eq!(
        request(1, "x", Some(json!({"a": 1})))["params"],
        json!({"a": 1})
    );
    assert!(
        notification("notifications/initialized")
            .get("id")
            .is_none()
    );
}

#[test]
fn sse_finds_the_reply_after_notifications_and_joins_data_lines() {
    let body = b": a comment\r\n\
event: message\r\n\
data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\r\n\r\n\
id: ev-1\n\
data:\n\n\
data: {\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{\"x\":1}}\n\n\
data: {\"jsonrpc\":\"2.0\",\n\
data:  \"id\":3,\n\
data: \"result\":{\"ok\":true}}\n\n\
data: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":\"second\"}\n\n";
    for reply in [scan_all(body, 3), scan_bytewise(body, 3)] {
        assert_eq!(reply.unwrap(), Reply::Result(json!({"ok": true})));
    }
}

#[test]
fn the_last_event_needs_no_blank_line() {
    let body = b"data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":5}";
    assert_eq!(scan_all(body, 1).unwrap(), Reply::Result(json!(5)));
}

#[test]
fn errors_are_replies_and_map_to_codes() {
    let body =
        b"data: {\"jsonrpc\":\"2.0\",\"id\":2,\"error\":{\"code\":-32602,\"message\":\"bad\"}}\n\n";
    let reply = scan_all(body, 2).unwrap();
    assert_eq!(reply.clone().into_result().unwrap_err().code, 4004);
    let other = Reply::Error {
        code: -32000,
        message: "x".repeat(2000),
    };
    let err = other.into_result().unwrap_err();
    assert_eq!(err.code, 5000);
    assert!(err.message.starts_with("the MCP server refused: xxx"));
    assert!(err.message.chars().count() < 600);
    let missing = Reply::Error {
        code: -32601,
        message: "Method not found".into(),
    };
    assert_eq!(missing.into_result().unwrap_err().code, 4000);
}

#[test]
fn no_reply_malformed_and_non_utf8_are_5000() {
    let cases: [&[u8]; 6] = [
        b"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\"}\n\n",
        b"data: {\"jsonrpc\": \"2.0\", \"id\": ",
        b"data: {\"jsonrpc\":\"2.0\",\"id\":1}\n\n",
        b"data: \xff\xfe\n\n",
        b"data: [1, 2]\n\n",
        b"",
    ];
    for body in cases {
        let err = scan_all(body, 1).unwrap_err();
        assert_eq!(err.code, 5000, "{:?}", String::from_utf8_lossy(body));
        assert!(
            err.message.starts_with("the MCP server sent"),
            "{}",
            err.message
        );
    }
}

#[test]
fn a_flood_of_events_stops_at_the_bound() {
    let note = b"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\"}\n\n";
    let mut scanner = SseScanner::new(1);
    let mut fed = 0;
    let err = loop {
        match scanner.feed(note) {
            Ok(None) => fed += 1,
            Ok(Some(r)) => panic!("unexpected reply {r:?}"),
            Err(e) => break e,
        }
        assert!(fed <= MAX_SSE_EVENTS, "no bound");
    };
    assert_eq!(fed, MAX_SSE_EVENTS);
    assert!(err.message.contains("4096 events"), "{}", err.message);
}

#[test]
fn an_endless_line_stops_at_the_byte_bound() {
    let mut scanner = SseScanner::new(1);
    assert!(scanner.feed(b"data: ").unwrap().is_none());
    let chunk = vec![b'x'; 1 << 20];
    let mut fed = 0usize;
    let err = loop {
        match scanner.feed(&chunk) {
            Ok(None) => fed += chunk.len(),
            Ok(Some(_)) => panic!("no reply expected"),
            Err(e) => break e,
        }
    };
    assert!(fed <= MAX_BODY_BYTES);
    assert_eq!(err.code, 5000);
}

#[test]
fn json_bodies() {
    let ok = br#"{"jsonrpc":"2.0","id":4,"result":{"tools":[]}}"#;
    assert_eq!(
        reply_in_json(ok, 4).unwrap(),
        Reply::Result(json!({"tools": []}))
    );
    let bad: [&[u8]; 4] = [
        br#"{"jsonrpc":"2.0","id":5,"result":1}"#,
        b"{\"jsonrpc\": \"2.0\", \"id\": ",
        b"\xc3\x28",
        br#"{"jsonrpc":"2.0","id":4,"error":"nope"}"#,
    ];
    for bad in bad {
        assert_eq!(reply_in_json(bad, 4).unwrap_err().code, 5000);
    }
}

#[test]
fn truncate_counts_characters() {
    assert_eq!(truncate("héllo", 2), "hé…");
    assert_eq!(truncate("hi", 2), "hi");
}
