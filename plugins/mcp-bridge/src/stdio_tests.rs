//! Tests of the stdio transport's pure parts: ids, message bounds, error texts, redaction
//! of the env's secrets.

use super::*;
use crate::config::BridgeSettings;

#[test]
fn ids_are_unique_within_and_across_instances() {
    let mut a = IdMaker::new();
    let mut b = IdMaker::new();
    assert_ne!(a.token(), b.token());
    let ids: std::collections::HashSet<String> =
        (0..1000).flat_map(|_| [a.next_id(), b.next_id()]).collect();
    assert_eq!(ids.len(), 2000);
    let id = a.next_id();
    assert!(id.starts_with("wharf-") && id.ends_with("-1001"), "{id}");
    let tokens: std::collections::HashSet<String> = (0..256)
        .map(|_| IdMaker::new().token().to_string())
        .collect();
    assert_eq!(tokens.len(), 256);
}

#[test]
fn a_message_over_the_write_bound_is_refused() {
    let small = jsonrpc::request("x-1", "tools/call", Some(json!({"a": 1})));
    let line = line_of(&small, "tools/call").unwrap();
    assert_eq!(line.last(), Some(&b'\n'));
    assert_eq!(line.iter().filter(|&&b| b == b'\n').count(), 1);
    let big = jsonrpc::request(
        "x-1",
        "tools/call",
        Some(json!({"a": "y\n".repeat(200_000)})),
    );
    let err = line_of(&big, "tools/call").unwrap_err();
    assert_eq!(err.code, 4000);
    assert!(err.message.contains("256 KiB"), "{}", err.message);
}

#[test]
fn an_exited_server_is_a_retryable_5012_with_its_last_words() {
    let e = exited(
        Some(3),
        "starting\nTraceback: boom\n\n",
        " during `tools/call`",
    );
    assert_eq!((e.code, e.retryable), (5012, true));
    assert_eq!(
        e.message,
        "the MCP server exited (code 3) during `tools/call`; its last output: Traceback: boom"
    );
    let e = exited(None, "", "");
    assert_eq!(
        e.message,
        "the MCP server is gone (its process or its container ended)"
    );
}

#[test]
fn the_envs_secrets_are_redacted_from_what_the_server_says() {
    let config = json!({"transport": "stdio", "image": "i", "command": ["srv"],
                        "env": {"API_KEY": "${secret:api_key}"}});
    let BridgeSettings::Stdio(settings) = BridgeSettings::from_config(config).unwrap() else {
        panic!("not stdio");
    };
    let mut redactor = Redactor::default();
    let env = settings
        .resolve_env(&mut |name| {
            let value = "sk-live-0123456789".to_string();
            redactor.remember(name, &value);
            Ok(value)
        })
        .unwrap();
    assert_eq!(env[0].1, "sk-live-0123456789");
    let echoed = json!({"content": [{"type": "text", "text": "key=sk-live-0123456789"}]});
    let out = redactor.value(echoed).to_string();
    assert!(
        !out.contains("sk-live") && out.contains("[secret:api_key]"),
        "{out}"
    );
    let e = redactor.error(exited(Some(1), "bad key sk-live-0123456789\n", ""));
    assert!(!e.message.contains("sk-live"), "{}", e.message);
}

#[test]
fn the_bridge_keeps_a_tenth_of_the_call_up_to_a_second() {
    assert_eq!(reserve(Duration::from_secs(30)), Duration::from_secs(1));
    assert_eq!(reserve(Duration::from_secs(3)), Duration::from_millis(300));
    assert_eq!(
        reserve(Duration::from_millis(1)),
        Duration::from_micros(100)
    );
}
