//! Tests of the config: parsing, clamping, `${secret:NAME}` substitution without leaks.

use super::*;
use wharf_sdk::{ToolError, json};

const TOKEN: &str = "s3cr3t-t0ken-value";

fn lookup(name: &str) -> Result<String, ToolError> {
    match name {
        "mcp_token" => Ok(TOKEN.to_string()),
        "multi" => Ok("line\r\nInjected: yes".to_string()),
        _ => Err(ToolError::forbidden(format!(
            "the secret `{name}` is not granted to this backend"
        ))),
    }
}

fn settings(config: wharf_sdk::Value) -> Result<Settings, ToolError> {
    match BridgeSettings::from_config(config)? {
        BridgeSettings::Http(s) => Ok(s),
        BridgeSettings::Stdio(_) => panic!("an http config read as stdio"),
    }
}

#[test]
fn a_full_config_is_read_and_secrets_substituted() {
    let s = settings(json!({
        "transport": "http", "url": "http://127.0.0.1:8931/mcp",
        "headers": {"Authorization": "Bearer ${secret:mcp_token}", "X-Plain": "a ${b} c"},
        "timeout_ms": 1500
    }))
    .unwrap();
    assert_eq!(s.url, "http://127.0.0.1:8931/mcp");
    assert_eq!(s.timeout, Duration::from_millis(1500));
    assert_eq!(
        secret_names(s.headers.iter().map(|h| h.pieces.as_slice())),
        vec!["mcp_token"]
    );
    let headers = s.resolve_headers(&mut lookup).unwrap();
    assert!(headers.contains(&("authorization".into(), format!("Bearer {TOKEN}"))));
    assert!(headers.contains(&("x-plain".into(), "a ${b} c".into())));
}

#[test]
fn timeout_defaults_and_clamps() {
    let base = json!({"transport": "http", "url": "https://example.com/mcp"});
    assert_eq!(settings(base.clone()).unwrap().timeout.as_millis(), 30_000);
    let mut zero = base.clone();
    zero["timeout_ms"] = json!(0);
    assert_eq!(settings(zero).unwrap().timeout.as_millis(), 1);
    let mut huge = base;
    huge["timeout_ms"] = json!(u64::MAX);
    assert_eq!(settings(huge).unwrap().timeout.as_millis(), 300_000);
}

#[test]
fn bad_configs_are_4000() {
    for bad in [
        json!(null),
        json!({"transport": "stdio", "url": "http://x/mcp"}),
        json!({"transport": "http", "url": "ftp://x/mcp"}),
        json!({"transport": "http"}),
        json!({"transport": "http", "url": "http://x/mcp", "extra": 1}),
        json!({"transport": "http", "url": "http://x/mcp", "headers": {"Accept": "x"}}),
        json!({"transport": "http", "url": "http://x/mcp", "headers": {"Mcp-Session-Id": "x"}}),
        json!({"transport": "http", "url": "http://x/mcp", "headers": {"bad name": "x"}}),
        json!({"transport": "http", "url": "http://x/mcp", "headers": {"X": "a\nb"}}),
        json!({"transport": "http", "url": "http://x/mcp", "headers": {"X": "${secret:open"}}),
        json!({"transport": "http", "url": "http://x/mcp", "headers": {"X": "${secret:a/b}"}}),
        json!({"transport": "http", "url": "http://x/mcp", "headers": {"X": "${secret:}"}}),
        json!({"transport": "http", "url": "http://x/mcp", "image": "i"}),
        json!({"transport": "http", "url": "http://x/mcp", "command": ["a"]}),
        json!({"transport": "http", "url": "http://x/mcp", "env": {}}),
        json!({"transport": "http", "url": "http://x/mcp", "network": "none"}),
        json!({"transport": "http", "url": "http://x/mcp", "memory_mb": 1}),
        json!({"transport": "ftp", "url": "http://x/mcp"}),
    ] {
        let err = settings(bad.clone()).unwrap_err();
        assert_eq!(err.code, 4000, "{bad}: {err:?}");
    }
}

#[test]
fn errors_name_the_header_and_secret_never_the_value() {
    let s = settings(json!({
        "transport": "http", "url": "http://x/mcp",
        "headers": {"Authorization": "Bearer ${secret:missing}"}
    }))
    .unwrap();
    let err = s.resolve_headers(&mut lookup).unwrap_err();
    assert_eq!(err.code, 4030);
    assert!(err.message.contains("authorization") && err.message.contains("`missing`"));

    let s = settings(json!({
        "transport": "http", "url": "http://x/mcp",
        "headers": {"X-Multi": "${secret:multi}", "Authorization": "${secret:mcp_token}"}
    }))
    .unwrap();
    let err = s.resolve_headers(&mut lookup).unwrap_err();
    assert_eq!(err.code, 4000);
    assert!(err.message.contains("x-multi") && err.message.contains("`multi`"));
    assert!(!err.message.contains("Injected"), "{}", err.message);
    assert!(!format!("{err:?}").contains(TOKEN));
}

#[test]
fn a_secret_value_is_not_expanded_again() {
    let h = parse_header("X", "${secret:inner}").unwrap();
    let (_, value) = resolve(&h, &mut |_| Ok("${secret:mcp_token}".to_string())).unwrap();
    assert_eq!(value, "${secret:mcp_token}");
}
