//! Shared helpers for the integration tests: start a real Wharf host on a free loopback
//! port with real components, and talk to it over real HTTP.

pub mod collector;
pub mod egress_destination;
pub mod http_head;
pub mod live_view;
pub mod mcp_servers;
pub mod processes;
pub mod provisioner;
pub mod python;
pub mod raw_mcp;
pub mod registry;
pub mod tenant_client;
pub mod wrk;

use serde_json::{Value, json};
use std::net::SocketAddr;
use std::sync::Arc;
use wharf::Wharf;
use wharf::config::{BackendConfig, ServerConfig};
use wharf::server::BoundServer;

/// A running host.
pub struct TestHost {
    /// The host.
    pub wharf: Arc<Wharf>,
    /// Base URL, e.g. `http://127.0.0.1:1234`.
    pub url: String,
    /// The bound address.
    pub addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    /// Kept alive for the host's lifetime.
    pub data_dir: tempfile::TempDir,
}

impl Drop for TestHost {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// A backend config for a bundled example.
pub fn bundled(name: &str) -> BackendConfig {
    BackendConfig::at(format!("bundled:{name}"))
}

/// Starts a host serving `backends` (operator name, config).
pub async fn start(backends: Vec<(&str, BackendConfig)>) -> TestHost {
    start_with(backends, |_| {}).await
}

/// Starts a host, letting the test adjust the server settings.
pub async fn start_with(
    backends: Vec<(&str, BackendConfig)>,
    tweak: impl FnOnce(&mut ServerConfig),
) -> TestHost {
    let data_dir = tempfile::tempdir().expect("temp dir");
    let mut server = ServerConfig {
        data_dir: data_dir.path().to_path_buf(),
        ..ServerConfig::default()
    };
    server.listen = "127.0.0.1:0".parse().expect("addr");
    tweak(&mut server);
    let wharf = Wharf::new(server.clone()).await.expect("host starts");
    for (name, config) in backends {
        wharf
            .load_backend(name, config)
            .await
            .expect("backend loads");
    }
    let bound = BoundServer::bind(wharf.clone(), server.listen)
        .await
        .expect("bind");
    let addr = bound.local_addr().expect("addr");
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(bound.serve(async {
        let _ = rx.await;
    }));
    TestHost {
        wharf,
        url: format!("http://{addr}"),
        addr,
        stop: Some(tx),
        data_dir,
    }
}

/// The HTTP status and JSON body of a reply.
pub struct Reply {
    /// HTTP status.
    pub status: u16,
    /// Parsed body.
    pub body: Value,
}

impl Reply {
    /// The envelope's code.
    pub fn code(&self) -> u64 {
        self.body["code"].as_u64().unwrap_or(u64::MAX)
    }
}

impl TestHost {
    /// POSTs a JSON body.
    pub async fn post(&self, path: &str, body: Value) -> Reply {
        self.send(
            reqwest::Client::new()
                .post(format!("{}{path}", self.url))
                .json(&body),
        )
        .await
    }
    /// POSTs raw bytes.
    pub async fn post_raw(&self, path: &str, body: impl Into<reqwest::Body>) -> Reply {
        self.send(
            reqwest::Client::new()
                .post(format!("{}{path}", self.url))
                .header("content-type", "application/json")
                .body(body),
        )
        .await
    }
    /// GETs a path.
    pub async fn get(&self, path: &str) -> Reply {
        self.send(reqwest::Client::new().get(format!("{}{path}", self.url)))
            .await
    }
    /// DELETEs a path.
    pub async fn delete(&self, path: &str) -> Reply {
        self.send(reqwest::Client::new().delete(format!("{}{path}", self.url)))
            .await
    }
    /// Calls a tool.
    pub async fn call(&self, tool: &str, args: Value) -> Reply {
        self.post("/v1/call", json!({ "tool": tool, "args": args }))
            .await
    }
    /// Opens a session of `backend` for `key`; its id.
    pub async fn open_session(&self, backend: &str, key: &str) -> String {
        let r = self
            .post("/v1/sessions", json!({"backend": backend, "key": key}))
            .await;
        assert_eq!(r.code(), 0, "{}", r.body);
        r.body["data"]["id"]
            .as_str()
            .expect("session id")
            .to_string()
    }
    /// The canonical names of `backend`'s tools in `/v1/tools`, sorted.
    pub async fn tool_names(&self, backend: &str) -> Vec<String> {
        let tools = self.get("/v1/tools").await.body["data"]["tools"].clone();
        let prefix = format!("{backend}:");
        let mut names: Vec<String> = tools
            .as_array()
            .expect("a tool list")
            .iter()
            .filter_map(|t| t["name"].as_str())
            .filter(|n| n.starts_with(&prefix))
            .map(str::to_string)
            .collect();
        names.sort();
        names
    }
    /// Calls a tool in a session.
    pub async fn call_in(&self, session: &str, tool: &str, args: Value) -> Reply {
        self.post(
            "/v1/call",
            json!({ "tool": tool, "args": args, "session_id": session }),
        )
        .await
    }
    async fn send(&self, request: reqwest::RequestBuilder) -> Reply {
        let response = request.send().await.expect("request reaches the host");
        let status = response.status().as_u16();
        let text = response.text().await.expect("body");
        let body =
            serde_json::from_str(&text).unwrap_or_else(|_| panic!("reply is not JSON: {text}"));
        Reply { status, body }
    }
    /// Every session listed by `/v1/sessions`.
    pub async fn sessions_listed(&self) -> Vec<Value> {
        self.get("/v1/sessions").await.body["data"]["sessions"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// The `/v1/backends` entry of one backend.
    pub async fn backend_info(&self, name: &str) -> Value {
        let reply = self.get("/v1/backends").await;
        reply.body["data"]["backends"]
            .as_array()
            .and_then(|list| list.iter().find(|b| b["name"] == name).cloned())
            .unwrap_or(Value::Null)
    }
}

/// Opens a session of `backend` with `config` (a sandbox provider's: its sandbox is made);
/// its id.
pub async fn sandbox_session(h: &TestHost, backend: &str, config: Value) -> String {
    let r = h
        .post(
            "/v1/sessions",
            serde_json::json!({"backend": backend, "config": config}),
        )
        .await;
    assert_eq!(r.code(), 0, "{config}: {}", r.body);
    r.body["data"]["id"].as_str().unwrap().to_string()
}

/// Runs `script` with `backend`'s `run_command` in the session's sandbox; its stdout
/// (stderr appended).
pub async fn run_script(h: &TestHost, backend: &str, session: &str, script: &str) -> String {
    let r = h
        .call_in(
            session,
            &format!("{backend}:run_command"),
            serde_json::json!({"command": script}),
        )
        .await;
    assert_eq!(r.code(), 0, "{script}: {}", r.body);
    command_text(&r.body["data"]["result"])
}

/// A `run_command` result's stdout with its stderr appended.
pub fn command_text(result: &Value) -> String {
    format!(
        "{}{}",
        result["stdout"].as_str().unwrap_or_default(),
        result["stderr"].as_str().unwrap_or_default()
    )
}

/// A host serving the docker provider as `backend` to `tenants` (name, token value), each
/// with the call and read scopes.
pub async fn docker_host_for(backend: &str, tenants: &[(&str, &str)]) -> TestHost {
    let tokens = tenants
        .iter()
        .map(|(name, value)| {
            token(
                name,
                value,
                &[
                    wharf::config::TokenScope::Call,
                    wharf::config::TokenScope::Read,
                ],
            )
        })
        .collect();
    start_with(vec![(backend, docker_provider())], |s| {
        s.auth.tokens = tokens
    })
    .await
}

/// The rest of the first line of `out` that starts with `name` (trimmed).
pub fn field<'a>(out: &'a str, name: &str) -> &'a str {
    out.lines()
        .find_map(|l| l.strip_prefix(name))
        .map(str::trim)
        .unwrap_or_else(|| panic!("no {name} in {out}"))
}

/// Whether a Docker engine answers. With `WHARF_REQUIRE_DOCKER=1` a missing engine fails the
/// test instead of skipping it.
pub fn docker_ready() -> bool {
    let ok = std::process::Command::new("docker")
        .args(["image", "inspect", "wharf-sandbox:test"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert!(
            std::env::var("WHARF_REQUIRE_DOCKER").as_deref() != Ok("1"),
            "Docker (with the image wharf-sandbox:test from scripts/build-test-image.sh) is required but not available"
        );
        eprintln!("skipping: no Docker engine or no wharf-sandbox:test image");
    }
    ok
}

/// The gVisor runtime the tests register with the engine (`.ci/run`, `scripts/test`).
pub const GVISOR_RUNTIME: &str = "runsc";
/// This machine's Docker engine behind a TCP relay, as `tcp://127.0.0.1:PORT`: to a host
/// given it, an engine on another machine (the relay lives as long as the runtime).
pub async fn docker_over_tcp() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut client, _)) = listener.accept().await {
            // As dockerd's own sockets (Go sets TCP_NODELAY on every connection).
            let _ = client.set_nodelay(true);
            tokio::spawn(async move {
                if let Ok(mut engine) =
                    tokio::net::UnixStream::connect("/var/run/docker.sock").await
                {
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut engine).await;
                }
            });
        }
    });
    format!("tcp://127.0.0.1:{port}")
}

/// gVisor registered without host Unix sockets (`scripts/register-gvisor.sh`): the agent
/// of its sandboxes is reached through the engine.
pub const GVISOR_WITHOUT_HOST_SOCKETS: &str = "runsc-no-host-uds";

/// Whether the Docker engine has gVisor's runtimes ([`GVISOR_RUNTIME`] and
/// [`GVISOR_WITHOUT_HOST_SOCKETS`]). With
/// `WHARF_REQUIRE_GVISOR=1` a missing runtime fails the test instead of skipping it.
pub fn gvisor_ready() -> bool {
    let out = std::process::Command::new("docker")
        .args(["info", "--format", "{{json .Runtimes}}"])
        .output();
    let ok = out.is_ok_and(|o| {
        o.status.success()
            && serde_json::from_slice::<Value>(&o.stdout).is_ok_and(|runtimes| {
                runtimes.get(GVISOR_RUNTIME).is_some()
                    && runtimes.get(GVISOR_WITHOUT_HOST_SOCKETS).is_some()
            })
    });
    if !ok {
        assert!(
            std::env::var("WHARF_REQUIRE_GVISOR").as_deref() != Ok("1"),
            "gVisor (the docker runtime `{GVISOR_RUNTIME}`) is required but not registered"
        );
        eprintln!("skipping: no `{GVISOR_RUNTIME}` runtime in the docker engine");
    }
    ok
}

/// Ids of images carrying a label `key=value`, through the Docker CLI.
pub fn images_labelled(key: &str, value: &str) -> Vec<String> {
    let out = std::process::Command::new("docker")
        .args(["images", "-q", "--filter", &format!("label={key}={value}")])
        .output()
        .expect("docker images runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// Removes every snapshot image a test left of `backend` (`wharf.snapshot.backend`).
pub fn remove_backend_snapshots(backend: &str) {
    for image in images_labelled("wharf.snapshot.backend", backend) {
        let _ = std::process::Command::new("docker")
            .args(["rmi", "-f", &image])
            .output();
    }
}

/// Ids of containers (running or not) carrying a label `key=value`, through the Docker CLI.
pub fn containers_labelled(key: &str, value: &str) -> Vec<String> {
    let out = std::process::Command::new("docker")
        .args([
            "ps",
            "-aq",
            "--no-trunc",
            "--filter",
            &format!("label={key}={value}"),
        ])
        .output()
        .expect("docker ps runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// The address of the engine's default bridge on this host (`docker0`), which a container
/// on that network reaches the host at (the engine's IPAM may not name it).
pub fn docker_bridge_gateway() -> String {
    let out = std::process::Command::new("ip")
        .args(["-4", "-o", "addr", "show", "docker0"])
        .output()
        .expect("ip addr");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let gateway = text
        .split_whitespace()
        .skip_while(|w| *w != "inet")
        .nth(1)
        .and_then(|cidr| cidr.split('/').next())
        .unwrap_or_default()
        .to_string();
    assert!(!gateway.is_empty(), "no docker0 address: {text}");
    gateway
}

/// Removes every container of `backend` (tests give each backend a name of their own).
pub fn remove_backend_containers(backend: &str) {
    for id in containers_labelled("wharf.backend", backend) {
        let _ = std::process::Command::new("docker")
            .args(["rm", "-f", &id])
            .output();
    }
}

/// A docker-provider backend config granted the test image.
pub fn docker_provider() -> BackendConfig {
    let mut cfg = bundled("docker-provider");
    cfg.grants.images = vec!["wharf-sandbox:test".into()];
    cfg.grants.networks = vec!["bridge".into()];
    cfg
}

/// [`docker_provider`] granted gVisor beside plain containers.
pub fn gvisor_docker_provider() -> BackendConfig {
    let mut cfg = docker_provider();
    cfg.grants.isolation = vec!["container".into(), "gvisor".into()];
    cfg
}

/// An admin token named `ops` whose secret is `value`.
pub fn admin_token(value: &str) -> wharf::config::TokenConfig {
    token("ops", value, &[wharf::config::TokenScope::Admin])
}

/// A static token `name` with secret `value` and `scopes`, no allowlists.
pub fn token(
    name: &str,
    value: &str,
    scopes: &[wharf::config::TokenScope],
) -> wharf::config::TokenConfig {
    wharf::config::TokenConfig::new(name, value, scopes.to_vec())
}

/// The status and JSON body (`null` when it is not JSON) of a raw HTTP/1.1 answer read
/// off a socket.
pub fn raw_http_reply(reply: &[u8]) -> (u16, Value) {
    let text = String::from_utf8_lossy(reply);
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .and_then(|(_, b)| serde_json::from_str(b).ok())
        .unwrap_or(Value::Null);
    (status, body)
}

/// Polls `check` every 100 ms until it holds; fails with `what` after `secs` seconds.
pub async fn eventually(secs: u64, what: &str, mut check: impl AsyncFnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while !check().await {
        assert!(std::time::Instant::now() < deadline, "{what}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// A loopback HTTP server (a thread) answering every request with 200 and `body`; its
/// port. For a backend's outbound call to reach something real.
pub fn loopback_upstream(body: &'static str) -> u16 {
    loopback_server(move |_| body.to_string())
}

/// A loopback HTTP server (a thread) answering every request with 200 and the body
/// `answer` makes of the request's head (what one read returns); its port.
pub fn loopback_server(answer: impl Fn(&str) -> String + Send + 'static) -> u16 {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut buf = [0u8; 8192];
            let n = stream.read(&mut buf).unwrap_or(0);
            let body = answer(&String::from_utf8_lossy(&buf[..n]));
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

/// A loopback port free at the time of asking (for a server whose own URL must be in its
/// configuration before it binds).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("port")
        .local_addr()
        .expect("addr")
        .port()
}
