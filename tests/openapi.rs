//! `/openapi.json` is an OpenAPI 3.1 document that parses, and lists every route: each
//! documented operation is served (not the fallback), and every path the router registers
//! in the source is documented.

use serde_json::Value;
use std::collections::BTreeSet;
use wharf::config::{TokenConfig, TokenScope};
use wharf_integration_tests::{bundled, start_with};

fn registered_paths() -> BTreeSet<String> {
    let api = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../host/src/api");
    let mut files = vec![api.join("rest.rs")];
    for dir in [api.clone(), api.join("compat")] {
        for entry in std::fs::read_dir(dir).unwrap() {
            files.push(entry.unwrap().path());
        }
    }
    let mut paths = BTreeSet::new();
    for file in files
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "rs"))
    {
        let text = std::fs::read_to_string(file).unwrap();
        let squashed: String = text.split_whitespace().collect::<Vec<_>>().join("");
        for marker in [".route(\"", ".route_service(\""] {
            for piece in squashed.split(marker).skip(1) {
                if let Some(path) = piece.split('"').next() {
                    paths.insert(path.to_string());
                }
            }
        }
    }
    paths
}

#[tokio::test]
async fn the_document_parses_as_openapi_3_1_and_lists_every_route() {
    let h = start_with(vec![("echo", bundled("echo"))], |s| {
        s.auth.tokens = vec![TokenConfig {
            name: "ops".into(),
            value: Some("ops-token".into()),
            value_file: None,
            scopes: vec![TokenScope::Admin],
            backends: None,
            tools: None,
        }];
    })
    .await;
    let doc: Value = reqwest::get(format!("{}/openapi.json", h.url))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(doc["openapi"], "3.1.0");
    let parsed = oas3::from_json(doc.to_string()).expect("a valid OpenAPI 3.1 document");
    assert_eq!(parsed.info.title, "Wharf");

    let documented: BTreeSet<String> = doc["paths"].as_object().unwrap().keys().cloned().collect();
    let registered = registered_paths();
    assert!(registered.len() >= 20, "found only {registered:?}");
    let missing: Vec<&String> = registered.difference(&documented).collect();
    assert!(
        missing.is_empty(),
        "routes without documentation: {missing:?}"
    );

    for (method, path) in wharf::api::openapi::operations() {
        let url = format!(
            "{}{}",
            h.url,
            path.replace("{id}", "ses_none").replace("{name}", "echo")
        );
        let client = reqwest::Client::new();
        let request = match method {
            "get" => client.get(url),
            "post" => client.post(url).json(&serde_json::json!({})),
            "put" => client.put(url).body(Vec::<u8>::new()),
            _ => client.delete(url),
        };
        let reply = request
            .bearer_auth("ops-token")
            .header("accept", "application/json, text/event-stream")
            .send()
            .await
            .unwrap();
        let text = reply.text().await.unwrap_or_default();
        assert!(
            !text.contains("no route"),
            "{method} {path} is documented but not served: {text}"
        );
        let operation = &doc["paths"][path][method];
        assert!(
            operation["summary"].is_string() && operation["responses"]["default"].is_object(),
            "{method} {path}"
        );
    }
    let call =
        &doc["paths"]["/v1/call"]["post"]["requestBody"]["content"]["application/json"]["schema"];
    assert!(call["properties"]["tool"].is_object(), "{call}");
    assert_eq!(
        doc["paths"]["/v1/sessions/{id}"]["get"]["parameters"][0]["name"],
        "id"
    );
}
