//! The remote sandbox provider: the fake provisioner on its own over real HTTP, then the
//! `remote-provider` component driving it through a real Wharf host.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use wharf_integration_tests::provisioner::{self, Provisioner};
use wharf_integration_tests::{bundled, start};

async fn post(url: &str, body: Value) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(url)
        .json(&body)
        .send()
        .await
        .expect("provisioner answers");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn status_of(request: reqwest::RequestBuilder) -> u16 {
    request
        .send()
        .await
        .expect("provisioner answers")
        .status()
        .as_u16()
}

async fn create(prov: &Provisioner) -> String {
    let (status, body) = post(
        &format!("{}/api/sandboxes", prov.url),
        json!({"image": null, "env": {"GREETING": "hey"}}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let id = body["id"].as_str().expect("id").to_string();
    assert_eq!(body["url"], format!("{}/api/sandboxes/{id}", prov.url));
    id
}

async fn exec(prov: &Provisioner, id: &str, body: Value) -> (u16, Value) {
    post(
        &format!("{}/api/sandboxes/{id}/v1/shell/exec", prov.url),
        body,
    )
    .await
}

fn text(body: &Value, field: &str) -> String {
    let bytes = B64
        .decode(body[field].as_str().expect("base64 field"))
        .expect("valid base64");
    String::from_utf8(bytes).expect("utf-8")
}

#[tokio::test]
async fn create_list_show_and_exec() {
    let prov = provisioner::start().await;
    let id = create(&prov).await;
    assert_eq!(prov.ids(), vec![id.clone()]);
    let dir = prov.scratch_dir(&id).expect("scratch dir");
    assert!(dir.is_dir());

    let listed: Value = reqwest::get(format!("{}/api/sandboxes", prov.url))
        .await
        .expect("list")
        .json()
        .await
        .expect("json");
    assert_eq!(listed[0]["id"], id.as_str());
    assert!(listed[0]["created_at"].is_u64());
    let shown: Value = reqwest::get(format!("{}/api/sandboxes/{id}", prov.url))
        .await
        .expect("show")
        .json()
        .await
        .expect("json");
    assert_eq!(shown, json!({"id": id, "state": "running"}));

    let (status, out) = exec(
        &prov,
        &id,
        json!({"command": "echo hi", "timeout_ms": 10_000, "max_output_bytes": 1024}),
    )
    .await;
    assert_eq!(status, 200, "{out}");
    assert_eq!(out["exit_code"], 0);
    assert_eq!(text(&out, "stdout_base64"), "hi\n");
    assert_eq!(out["timed_out"], false);
    assert_eq!(out["stdout_truncated"], false);

    // cwd and HOME are the scratch dir; the create-time env is applied; exit codes pass through.
    let (_, out) = exec(&prov, &id, json!({"command": "echo x > f; pwd; echo $HOME; echo $GREETING; echo oops >&2; exit 3", "timeout_ms": 10_000, "max_output_bytes": 4096})).await;
    assert_eq!(out["exit_code"], 3);
    let canonical = dir.canonicalize().expect("canonical").display().to_string();
    let lines: Vec<String> = text(&out, "stdout_base64")
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(
        lines,
        vec![
            canonical.clone(),
            dir.display().to_string(),
            "hey".to_string()
        ]
    );
    assert_eq!(text(&out, "stderr_base64"), "oops\n");
    assert_eq!(
        std::fs::read_to_string(dir.join("f")).expect("file written in the scratch dir"),
        "x\n"
    );
}

#[tokio::test]
async fn stdin_and_output_tail() {
    let prov = provisioner::start().await;
    let id = create(&prov).await;
    let stdin = B64.encode(b"line one\nline two\n");
    let (_, out) = exec(&prov, &id, json!({"command": "wc -l; cat >&2", "timeout_ms": 10_000, "stdin_base64": stdin, "max_output_bytes": 1024})).await;
    assert_eq!(text(&out, "stdout_base64").trim(), "2");
    assert_eq!(text(&out, "stderr_base64"), "");

    let (_, out) = exec(&prov, &id, json!({"command": "cat", "timeout_ms": 10_000, "stdin_base64": stdin, "max_output_bytes": 1024})).await;
    assert_eq!(text(&out, "stdout_base64"), "line one\nline two\n");

    // The tail of each stream is kept.
    let (_, out) = exec(
        &prov,
        &id,
        json!({"command": "seq 1 100000", "timeout_ms": 10_000, "max_output_bytes": 16}),
    )
    .await;
    assert_eq!(out["stdout_truncated"], true);
    assert_eq!(text(&out, "stdout_base64"), tail_of_seq(16));
    assert_eq!(out["exit_code"], 0);
}

fn tail_of_seq(n: usize) -> String {
    let all: String = (1..=100_000).map(|i| format!("{i}\n")).collect();
    all[all.len() - n..].to_string()
}

fn process_gone(pid: &str) -> bool {
    // Gone, or a zombie waiting for a reaper that is not `sh` any more.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

#[tokio::test]
async fn timeout_kills_the_process_group() {
    let prov = provisioner::start().await;
    let id = create(&prov).await;
    let started = Instant::now();
    let (status, out) = exec(
        &prov,
        &id,
        json!({"command": "sleep 60 & echo $! > bg.pid; echo started; sleep 60", "timeout_ms": 500, "max_output_bytes": 1024}),
    )
    .await;
    assert_eq!(status, 200, "{out}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the timeout was not enforced"
    );
    assert_eq!(out["timed_out"], true);
    assert_eq!(out["exit_code"], Value::Null);
    assert_eq!(
        text(&out, "stdout_base64"),
        "started\n",
        "output before the kill is kept"
    );
    let dir = prov.scratch_dir(&id).expect("scratch dir");
    let pid = std::fs::read_to_string(dir.join("bg.pid"))
        .expect("background pid")
        .trim()
        .to_string();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !process_gone(&pid) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        process_gone(&pid),
        "the background process {pid} survived the timeout"
    );

    // A background process holding stdout open does not hang the call past its deadline: the
    // group is killed at the deadline and the output so far is kept.
    let started = Instant::now();
    let (_, out) = exec(
        &prov,
        &id,
        json!({"command": "sleep 60 & echo done", "timeout_ms": 1_000, "max_output_bytes": 1024}),
    )
    .await;
    assert!(started.elapsed() < Duration::from_secs(20));
    assert_eq!(text(&out, "stdout_base64"), "done\n");
    assert_eq!(out["timed_out"], true);
}

#[tokio::test]
async fn unknown_ids_and_delete_twice() {
    let prov = provisioner::start().await;
    let client = reqwest::Client::new();
    let (status, _) = exec(
        &prov,
        "nope",
        json!({"command": "true", "timeout_ms": 1000, "max_output_bytes": 16}),
    )
    .await;
    assert_eq!(status, 404);
    assert_eq!(
        status_of(client.get(format!("{}/api/sandboxes/nope", prov.url))).await,
        404
    );

    let id = create(&prov).await;
    let dir = prov.scratch_dir(&id).expect("scratch dir");
    let url = format!("{}/api/sandboxes/{id}", prov.url);
    assert_eq!(status_of(client.delete(&url)).await, 204);
    assert!(!dir.exists(), "the scratch dir is removed on delete");
    assert!(prov.ids().is_empty());
    assert_eq!(status_of(client.delete(&url)).await, 404);
    assert_eq!(status_of(client.get(&url)).await, 404);
}

#[tokio::test]
async fn dropping_the_provisioner_removes_scratch_dirs() {
    let prov = provisioner::start().await;
    let id = create(&prov).await;
    let dir = prov.scratch_dir(&id).expect("scratch dir");
    drop(prov);
    assert!(!dir.exists());
}

#[tokio::test]
async fn a_token_is_required_when_set() {
    let prov = provisioner::start_with_token(Some("s3cret")).await;
    let client = reqwest::Client::new();
    let url = format!("{}/api/sandboxes", prov.url);
    assert_eq!(status_of(client.post(&url).json(&json!({}))).await, 401);
    assert_eq!(
        status_of(client.post(&url).bearer_auth("wrong").json(&json!({}))).await,
        401
    );
    assert_eq!(
        status_of(client.post(&url).bearer_auth("s3cret").json(&json!({}))).await,
        201
    );
}

#[tokio::test]
async fn remote_sandbox_through_the_host() {
    let prov = provisioner::start().await;
    let mut cfg = bundled("remote-provider");
    let mut config = toml::Table::new();
    config.insert("base_url".into(), toml::Value::String(prov.url.clone()));
    cfg.config = Some(toml::Value::Table(config));
    cfg.grants.http_hosts = vec!["127.0.0.1:*".into()];
    cfg.grants.http_private_cidrs = vec!["127.0.0.0/8".into()];
    let host = start(vec![("remote", cfg)]).await;

    let reply = host
        .post("/v1/sessions", json!({"backend": "remote", "key": "t1"}))
        .await;
    assert_eq!(reply.code(), 0, "{}", reply.body);
    let session = reply.body["data"]["id"]
        .as_str()
        .expect("session id")
        .to_string();
    assert_eq!(
        prov.ids().len(),
        1,
        "the session's sandbox is provisioned remotely"
    );

    let reply = host
        .call_in(
            &session,
            "remote:run_command",
            json!({"command": "echo hi"}),
        )
        .await;
    assert_eq!(reply.code(), 0, "{}", reply.body);
    assert_eq!(reply.body["data"]["result"]["stdout"], "hi\n");
    assert_eq!(reply.body["data"]["result"]["exit_code"], 0);

    let reply = host
        .call_in(
            &session,
            "remote:write_file",
            json!({"path": "a.txt", "content": "x"}),
        )
        .await;
    assert_eq!(reply.code(), 0, "{}", reply.body);
    let reply = host
        .call_in(&session, "remote:read_file", json!({"path": "a.txt"}))
        .await;
    assert_eq!(reply.code(), 0, "{}", reply.body);
    assert_eq!(reply.body["data"]["result"]["content"], "x");

    let reply = host.delete(&format!("/v1/sessions/{session}")).await;
    assert_eq!(reply.code(), 0, "{}", reply.body);
    assert!(
        prov.ids().is_empty(),
        "deleting the session destroys the remote sandbox"
    );
}
