//! Tests of the stdio config: required and refused fields, defaults, bounds, secrets in
//! the environment without leaks, the fingerprint.

use super::*;
use crate::config::BridgeSettings;
use wharf_sdk::json;

const TOKEN: &str = "s3cr3t-env-value";

fn stdio(config: wharf_sdk::Value) -> Result<StdioSettings, ToolError> {
    match BridgeSettings::from_config(config)? {
        BridgeSettings::Stdio(s) => Ok(s),
        BridgeSettings::Http(_) => panic!("a stdio config read as http"),
    }
}

fn base() -> wharf_sdk::Value {
    json!({"transport": "stdio", "image": "wharf-mcp-servers:test",
           "command": ["/usr/bin/python3", "/srv/demo_server.py", "--stdio"]})
}

fn with(field: &str, value: wharf_sdk::Value) -> wharf_sdk::Value {
    let mut config = base();
    config[field] = value;
    config
}

fn lookup(name: &str) -> Result<String, ToolError> {
    match name {
        "api_key" => Ok(TOKEN.to_string()),
        "nul" => Ok(format!("a\0{TOKEN}")),
        _ => Err(ToolError::forbidden(format!(
            "the secret `{name}` is not granted to this backend"
        ))),
    }
}

#[test]
fn a_full_config_is_read_with_its_defaults() {
    let s = stdio(base()).unwrap();
    assert_eq!(s.image, "wharf-mcp-servers:test");
    assert_eq!(s.command.len(), 3);
    assert_eq!(s.network, NetworkConfig::None);
    assert_eq!(s.keep_alive_command, None);
    assert_eq!(s.memory_bytes, 512 << 20);
    assert_eq!((s.cpu_millis, s.pids_limit), (1000, 128));
    assert_eq!(s.timeout.as_millis(), 30_000);
    assert!(s.env.is_empty());

    let mut full = base();
    full["env"] = json!({"API_KEY": "k=${secret:api_key}", "PLAIN": "x\ny"});
    full["network"] = json!({"named": "mcp-net"});
    full["keep_alive_command"] = json!(null);
    full["memory_mb"] = json!(256);
    full["cpu_millis"] = json!(500);
    full["pids_limit"] = json!(32);
    full["timeout_ms"] = json!(5000);
    let s = stdio(full).unwrap();
    assert_eq!(s.network, NetworkConfig::Named("mcp-net".into()));
    assert!(matches!(s.network.to_spec(), Network::Named(n) if n == "mcp-net"));
    assert_eq!(
        (s.memory_bytes, s.cpu_millis, s.pids_limit),
        (256 << 20, 500, 32)
    );
    let env = s.resolve_env(&mut lookup).unwrap();
    assert_eq!(
        env,
        vec![
            ("API_KEY".to_string(), format!("k={TOKEN}")),
            ("PLAIN".to_string(), "x\ny".to_string())
        ]
    );
    let s = stdio(with("network", json!("bridge"))).unwrap();
    assert!(matches!(s.network.to_spec(), Network::Bridge));
    let s = stdio(with(
        "keep_alive_command",
        json!(["/bin/sleep", "infinity"]),
    ))
    .unwrap();
    assert_eq!(s.keep_alive_command.unwrap()[1], "infinity");
}

#[test]
fn bad_stdio_configs_are_4000_and_say_why() {
    let many: Vec<String> = (0..65).map(|i| i.to_string()).collect();
    for (bad, says) in [
        (
            json!({"transport": "stdio", "command": ["x"]}),
            "needs `image`",
        ),
        (
            json!({"transport": "stdio", "image": "i"}),
            "needs `command`",
        ),
        (with("url", json!("http://x/mcp")), "`url` does not apply"),
        (with("headers", json!({})), "`headers` does not apply"),
        (with("command", json!([])), "1 to 64"),
        (with("command", json!(many)), "1 to 64"),
        (with("command", json!([""])), "empty"),
        (with("command", json!(["a", "b\u{0}c"])), "NUL"),
        (with("keep_alive_command", json!([])), "keep_alive_command"),
        (with("image", json!("has space")), "image"),
        (with("env", json!({"A=B": "x"})), "not a variable name"),
        (with("env", json!({"1A": "x"})), "not a variable name"),
        (with("env", json!({"A": "x\u{0}"})), "NUL"),
        (with("env", json!({"A": "${secret:open"})), "env `A`"),
        (with("network", json!("host")), "invalid MCP bridge config"),
        (with("network", json!({"named": ""})), "network"),
        (with("memory_mb", json!(0)), "memory_mb"),
        (with("pids_limit", json!(0)), "pids_limit"),
        (with("cpu_millis", json!(-1)), "invalid MCP bridge config"),
        (with("extra", json!(1)), "unknown field"),
    ] {
        let err = stdio(bad.clone()).unwrap_err();
        assert_eq!(err.code, 4000, "{bad}: {err:?}");
        assert!(err.message.contains(says), "{bad}: {}", err.message);
    }
    let err = BridgeSettings::from_config(json!({"transport": "http", "url": "http://x/mcp",
        "keep_alive_command": ["a"]}))
    .unwrap_err();
    assert!(
        err.message
            .contains("`keep_alive_command` does not apply to `\"transport\": \"http\"`")
    );
}

#[test]
fn env_errors_name_the_variable_and_secret_never_the_value() {
    let s = stdio(with("env", json!({"KEY": "${secret:missing}"}))).unwrap();
    let err = s.resolve_env(&mut lookup).unwrap_err();
    assert_eq!(err.code, 4030);
    assert!(err.message.contains("env `KEY`") && err.message.contains("`missing`"));
    let s = stdio(with(
        "env",
        json!({"A": "${secret:api_key}", "B": "${secret:nul}"}),
    ))
    .unwrap();
    let err = s.resolve_env(&mut lookup).unwrap_err();
    assert_eq!(err.code, 4000);
    assert!(err.message.contains("env `B`") && err.message.contains("NUL"));
    assert!(!format!("{err:?}").contains(TOKEN));
}

#[test]
fn the_fingerprint_follows_the_server_not_the_secret_values_or_timeout() {
    let a = stdio(with("env", json!({"K": "${secret:api_key}"}))).unwrap();
    let mut b = with("env", json!({"K": "${secret:api_key}"}));
    b["timeout_ms"] = json!(1000);
    let b = stdio(b).unwrap();
    assert_eq!(a.fingerprint(), b.fingerprint());
    assert_eq!(a.fingerprint().len(), 16);
    let c = stdio(with("env", json!({"K": "${secret:other}"}))).unwrap();
    assert_ne!(a.fingerprint(), c.fingerprint());
    let d = stdio(with("network", json!("bridge"))).unwrap();
    assert_ne!(stdio(base()).unwrap().fingerprint(), d.fingerprint());
    assert!(!a.fingerprint().contains(TOKEN));
}

#[test]
fn sessions_default_to_shared_and_are_refused_for_http() {
    assert_eq!(stdio(base()).unwrap().sessions, SessionsMode::Shared);
    let s = stdio(with("sessions", json!("shared"))).unwrap();
    assert_eq!(s.sessions, SessionsMode::Shared);
    let s = stdio(with("sessions", json!("per_session"))).unwrap();
    assert_eq!(s.sessions, SessionsMode::PerSession);
    // The same server either way: the shared one (for the listing) is found again.
    assert_eq!(s.fingerprint(), stdio(base()).unwrap().fingerprint());
    for bad in [
        json!("per-session"),
        json!("PerSession"),
        json!(1),
        json!(null),
    ] {
        let result = stdio(with("sessions", bad.clone()));
        if bad.is_null() {
            assert_eq!(result.unwrap().sessions, SessionsMode::Shared);
            continue;
        }
        let err = result.unwrap_err();
        assert_eq!(err.code, 4000, "{bad}: {err:?}");
        assert!(
            err.message.contains("invalid MCP bridge config"),
            "{}",
            err.message
        );
    }
    for mode in ["shared", "per_session"] {
        let err = BridgeSettings::from_config(json!({"transport": "http", "url": "http://x/mcp",
            "sessions": mode}))
        .unwrap_err();
        assert_eq!(err.code, 4000);
        assert!(
            err.message
                .contains("`sessions` does not apply to `\"transport\": \"http\"`"),
            "{}",
            err.message
        );
    }
}

#[test]
fn sandbox_options_are_read_bounded_and_fingerprinted() {
    assert!(stdio(base()).unwrap().sandbox.is_none());
    let asked = stdio(with("allow_egress_to", json!(["pypi.org", "*.test:8080"]))).unwrap();
    let options = asked.sandbox.clone().unwrap();
    assert_eq!(options.allow_egress_to, vec!["pypi.org", "*.test:8080"]);
    assert!(options.isolation.is_none() && options.allow_egress_to_cidrs.is_empty());
    assert_ne!(asked.fingerprint(), stdio(base()).unwrap().fingerprint());
    let mut config = with("user", json!("1000:1000"));
    config["isolation"] = json!("gvisor");
    let s = stdio(config).unwrap().sandbox.unwrap();
    assert_eq!(
        (s.user.as_deref(), s.isolation.as_deref()),
        (Some("1000:1000"), Some("gvisor"))
    );

    let refused = |config| stdio(config).unwrap_err().message;
    let mut config = with("allow_egress_to", json!(["pypi.org"]));
    config["network"] = json!("bridge");
    assert!(refused(config).contains("must be \"none\""));
    let too_many: Vec<String> = (0..=MAX_EGRESS_ENTRIES)
        .map(|i| format!("h{i}.test"))
        .collect();
    assert!(refused(with("allow_egress_to", json!(too_many))).contains("at most 64"));
    assert!(refused(with("allow_egress_to_cidrs", json!(["10.0.0.0/8\n"]))).contains("control"));
    assert!(refused(with("user", json!("x".repeat(300)))).contains("`user`"));
    // Fields of the stdio transport are refused for HTTP.
    let http = json!({"transport": "http", "url": "http://127.0.0.1:1/mcp", "allow_egress_to": ["a.test"]});
    assert!(BridgeSettings::from_config(http).is_err());
}
