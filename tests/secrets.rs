//! The `secrets` import (contract 0.3.0) in a real host: a backend gets the values the
//! operator granted it by name, read from their source on each call (a rotated file is seen
//! at once), and nothing else — a name it was not granted, a malformed name, a source that
//! is missing, too large, not UTF-8 or a FIFO each get their own answer, none of which shows
//! the guest where the operator keeps the value. A backend built with the 0.3.0 SDK that
//! asks for a secret is a 0.3.0 component; one that does not stays 0.2.0.

use serde_json::json;
use wharf::config::BackendConfig;
use wharf_integration_tests::{Reply, TestHost, bundled, start};

fn probe_with(secrets: &[(&str, String)]) -> BackendConfig {
    let mut config = bundled("probe");
    let table: toml::Table = secrets
        .iter()
        .map(|(name, source)| (name.to_string(), toml::Value::String(source.clone())))
        .collect();
    config.grants.secrets = toml::Value::Table(table).try_into().expect("secret grants");
    config
}

async fn secret(h: &TestHost, backend: &str, name: &str) -> Reply {
    h.call(&format!("{backend}:secret"), json!({ "name": name }))
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_reads_what_it_was_granted_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("db-password");
    std::fs::write(&file, "first").unwrap();
    let large = dir.path().join("large");
    std::fs::write(&large, "x".repeat(64 * 1024 + 1)).unwrap();
    let binary = dir.path().join("binary");
    std::fs::write(&binary, [0xff, 0xfe, 0x00]).unwrap();
    let fifo = dir.path().join("fifo");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let missing = dir.path().join("missing");
    let path_value = std::env::var("PATH").expect("PATH is set");
    let source = |p: &std::path::Path| format!("file:{}", p.display());
    let h = start(vec![
        (
            "vault",
            probe_with(&[
                ("db.password", source(&file)),
                ("path", "env:PATH".to_string()),
                ("unset", "env:WHARF_TEST_SECRET_NEVER_SET".to_string()),
                ("large", source(&large)),
                ("binary", source(&binary)),
                ("fifo", source(&fifo)),
                ("missing", source(&missing)),
            ]),
        ),
        ("bare", bundled("probe")),
        ("echo", bundled("echo")),
    ])
    .await;

    // What the SDK built: the probe asks for secrets (0.3.0), echo does not (0.2.0).
    assert_eq!(h.backend_info("vault").await["contract"], "0.3.0");
    assert_eq!(h.backend_info("vault").await["wit"], "wharf:plugin@0.3.0");
    assert_eq!(h.backend_info("echo").await["contract"], "0.2.0");

    let got = secret(&h, "vault", "db.password").await;
    assert_eq!(got.code(), 0, "{}", got.body);
    assert_eq!(got.body["data"]["result"]["value"], "first");
    assert_eq!(
        got.body["data"]["result"]["names"],
        json!([
            "binary",
            "db.password",
            "fifo",
            "large",
            "missing",
            "path",
            "unset"
        ])
    );
    // Read when asked: the rotated file is the next answer.
    std::fs::write(&file, "second").unwrap();
    let got = secret(&h, "vault", "db.password").await;
    assert_eq!(
        got.body["data"]["result"]["value"], "second",
        "{}",
        got.body
    );
    let got = secret(&h, "vault", "path").await;
    assert_eq!(got.body["data"]["result"]["value"], path_value.as_str());

    // Not granted: to this backend, or to any.
    for (backend, name) in [("vault", "api_key"), ("bare", "db.password")] {
        let refused = secret(&h, backend, name).await;
        assert_eq!(refused.code(), 4030, "{}", refused.body);
        let message = refused.body["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("secret `{name}` is not granted")),
            "{message}"
        );
        assert!(message.contains("grants.secrets"), "{message}");
    }
    let none = secret(&h, "bare", "anything").await;
    assert_eq!(
        none.body["message"]
            .as_str()
            .map(|m| m.contains("not granted")),
        Some(true)
    );

    // Malformed names never reach a lookup, and are not echoed.
    for name in [
        "../db.password",
        "",
        "a b",
        &"n".repeat(65),
        "db.password\n",
    ] {
        let refused = secret(&h, "vault", name).await;
        assert_eq!(refused.code(), 4000, "{name:?}: {}", refused.body);
        assert!(
            refused.body["message"]
                .as_str()
                .unwrap()
                .starts_with("a secret name is"),
            "{}",
            refused.body
        );
    }

    // Granted but unservable: 5012, and the guest learns nothing of where it is kept.
    let started = std::time::Instant::now();
    for name in ["unset", "large", "binary", "fifo", "missing"] {
        let failed = secret(&h, "vault", name).await;
        assert_eq!(failed.code(), 5012, "{name}: {}", failed.body);
        let body = failed.body.to_string();
        assert!(body.contains("source is unavailable"), "{body}");
        for hidden in [
            dir.path().to_str().unwrap(),
            "WHARF_TEST_SECRET_NEVER_SET",
            "No such file",
        ] {
            assert!(!body.contains(hidden), "{name} leaks {hidden}: {body}");
        }
    }
    // A FIFO with no writer is refused, not waited on.
    assert!(started.elapsed() < std::time::Duration::from_secs(10));

    // The host keeps serving the backend after all of that.
    let got = secret(&h, "vault", "db.password").await;
    assert_eq!(
        got.body["data"]["result"]["value"], "second",
        "{}",
        got.body
    );
}

#[test]
fn hostile_grants_are_refused_when_the_config_is_read() {
    for (source, why) in [
        ("relative/path", "a source is"),
        ("file:relative", "absolute path"),
        ("env:NOT-A-NAME", "environment variable"),
        ("vault:x", "a source is"),
    ] {
        let text = format!(
            "[backends.p]\npath = \"bundled:probe\"\n[backends.p.grants.secrets]\nk = \"{source}\"\n"
        );
        let err = wharf::config::WharfConfig::parse(&text, |_| None).unwrap_err();
        assert!(format!("{err:#}").contains(why), "{source}: {err:#}");
    }
    let text = "[backends.p]\npath = \"bundled:probe\"\n[backends.p.grants.secrets]\n\"a/b\" = \"env:X\"\n";
    let err = wharf::config::WharfConfig::parse(text, |_| None).unwrap_err();
    assert!(format!("{err:#}").contains("a secret name is"), "{err:#}");
}
