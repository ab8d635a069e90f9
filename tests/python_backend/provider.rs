//! A sandbox provider written in Python (`tests/fixtures/python/pyshell.py`): built with
//! `wharf-py build`, served as the standard sandbox toolset.

use super::*;
use wharf_integration_tests::python::{build_module, repo_root};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_sandbox_provider_serves_the_standard_toolset() {
    let fixture = repo_root().join("tests/fixtures/python/pyshell.py");
    let out = workbench_wasm().with_file_name("pyshell.wasm");
    let wasm = tokio::task::spawn_blocking(move || build_module(&fixture, &out))
        .await
        .expect("join");
    let h = start_with(
        vec![("pyshell", BackendConfig::at(wasm.display().to_string()))],
        |_| {},
    )
    .await;
    let info = h.backend_info("pyshell").await;
    assert_eq!(info["world"], "sandbox-provider", "{info}");

    let r = h
        .post(
            "/v1/sessions",
            json!({"backend": "pyshell", "key": "egress", "config": {"network": {"block_network": false, "allow_egress_to": ["example.com"]}}}),
        )
        .await;
    assert_eq!(
        r.code(),
        4030,
        "a provider's refusal keeps its code: {}",
        r.body
    );

    let session = h
        .post("/v1/sessions", json!({"backend": "pyshell", "key": "k"}))
        .await;
    assert_eq!(session.code(), 0, "{}", session.body);
    let id = session.body["data"]["id"].as_str().expect("id").to_string();
    let r = h
        .call_in(&id, "pyshell:run_command", json!({"command": "uname -a"}))
        .await;
    assert_eq!(r.code(), 0, "{}", r.body);
    let result = &r.body["data"]["result"];
    assert_eq!(result["exit_code"], 0, "{result}");
    assert!(
        result["stdout"]
            .as_str()
            .unwrap_or("")
            .ends_with("$ uname -a\n"),
        "{result}"
    );
    let r = h
        .call_in(&id, "pyshell:run_command", json!({"command": "fail"}))
        .await;
    assert_eq!(
        (
            &r.body["data"]["result"]["exit_code"],
            &r.body["data"]["result"]["stderr"]
        ),
        (&json!(3), &json!("failed on purpose")),
        "{}",
        r.body
    );
    let r = h
        .call_in(&id, "pyshell:run_command", json!({"command": "raise"}))
        .await;
    assert_eq!(r.code(), 5000, "{}", r.body);
    assert!(
        r.body["message"]
            .as_str()
            .unwrap_or("")
            .contains("the provider broke"),
        "{}",
        r.body
    );
    let r = h.delete(&format!("/v1/sessions/{id}")).await;
    assert_eq!(r.code(), 0, "{}", r.body);
}
