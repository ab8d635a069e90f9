//! MCP servers the bridge tests put behind Wharf: the official Python SDK's FastMCP
//! serving `tests/fixtures/mcp_servers/demo_server.py` over streamable HTTP, and a
//! stdlib server that misbehaves on purpose (`hostile_server.py --mode M`, one mode of which checks a bearer token and echoes it back); both run from
//! the venv of `scripts/mcp-sdk-venv.sh`, on a free loopback port, killed when dropped.
//! Also the backend configs that bridge one of them: over HTTP, or over stdio inside a
//! container of the image `scripts/build-mcp-server-image.sh` builds.

use crate::processes::answers_http;
use crate::python::{mcp_sdk, repo_root};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use wharf::config::BackendConfig;

/// A running MCP server.
pub struct McpServer {
    child: Child,
    /// Its port on 127.0.0.1.
    pub port: u16,
}

impl Drop for McpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl McpServer {
    /// The demo server (FastMCP, streamable HTTP at `/mcp`).
    pub async fn demo() -> Self {
        Self::spawn("demo_server.py", &[], &[]).await
    }

    /// The hostile server in `mode` (`malformed`, `silent`, `hostile-names`,
    /// `huge-schema`, `flood`, `many-tools`).
    pub async fn hostile(mode: &str) -> Self {
        Self::spawn("hostile_server.py", &["--mode", mode], &[]).await
    }

    /// The hostile server in `mode`, with `env` set for it.
    pub async fn hostile_with(mode: &str, env: &[(&str, &str)]) -> Self {
        Self::spawn("hostile_server.py", &["--mode", mode], env).await
    }

    async fn spawn(script: &str, args: &[&str], env: &[(&str, &str)]) -> Self {
        let venv = tokio::task::spawn_blocking(mcp_sdk).await.expect("join");
        let port = crate::free_port();
        let child = Command::new(venv.join("bin/python"))
            .arg(repo_root().join("tests/fixtures/mcp_servers").join(script))
            .args(args)
            .args(["--port", &port.to_string()])
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{script} does not start: {e}"));
        let server = Self { child, port };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !tokio::task::spawn_blocking(move || answers_http(port))
            .await
            .expect("join")
        {
            assert!(
                Instant::now() < deadline,
                "{script} did not listen on {port}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        server
    }

    /// Its MCP endpoint.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }
}

/// The bundled `mcp-bridge` bridging `server`, granted its loopback port only and asked
/// for its tools every second.
pub fn bridge(server: &McpServer) -> BackendConfig {
    let mut config = BackendConfig::at("bundled:mcp-bridge");
    config.config = Some(
        toml::from_str(&format!(
            "transport = \"http\"\nurl = \"{}\"\ntimeout_ms = 5000\n",
            server.url()
        ))
        .expect("bridge config"),
    );
    config.grants.http_hosts = vec![format!("127.0.0.1:{}", server.port)];
    config.grants.http_private_cidrs = vec!["127.0.0.0/8".into()];
    config.tools.poll_seconds = 1;
    config
}

/// The image with the MCP SDK and the servers under `/srv`, built on first use.
pub const MCP_IMAGE: &str = "wharf-mcp-servers:test";

/// Builds [`MCP_IMAGE`] (quick when it is up to date).
pub fn mcp_server_image() {
    static BUILT: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    BUILT.get_or_init(|| {
        let status = Command::new(repo_root().join("scripts/build-mcp-server-image.sh"))
            .status()
            .expect("build-mcp-server-image.sh runs");
        assert!(status.success(), "build-mcp-server-image.sh failed");
    });
}

/// The bundled `mcp-bridge` running `argv` over stdio in a container of [`MCP_IMAGE`]
/// (network `none` unless `extra` says otherwise), granted that image only, asked for its
/// tools every second. `extra` is more of the bridge's config, as TOML lines.
pub fn stdio_bridge(argv: &[&str], extra: &str) -> BackendConfig {
    let mut config = BackendConfig::at("bundled:mcp-bridge");
    let argv: Vec<String> = argv.iter().map(|a| format!("{a:?}")).collect();
    config.config = Some(
        toml::from_str(&format!(
            "transport = \"stdio\"\nimage = \"{MCP_IMAGE}\"\ncommand = [{}]\n{extra}\n",
            argv.join(", ")
        ))
        .expect("stdio bridge config"),
    );
    config.grants.images = vec![MCP_IMAGE.into()];
    config.tools.poll_seconds = 1;
    config
}

/// A bridged tool's numeric answer, whether the server returned it as structured content
/// (`{"result": n}`, the Python SDK's wrapping of a plain return value) or as the value.
pub fn number(v: &serde_json::Value) -> i64 {
    v.get("result")
        .unwrap_or(v)
        .as_i64()
        .unwrap_or_else(|| panic!("not a number: {v}"))
}

/// Counts `notifications/tools/list_changed` an MCP client hears, and keeps the progress
/// notifications it hears.
#[derive(Clone, Default)]
pub struct ListChanged {
    /// Notified once per notification.
    pub heard: std::sync::Arc<tokio::sync::Notify>,
    /// Every `notifications/progress`, in order.
    pub progress: std::sync::Arc<std::sync::Mutex<Vec<rmcp::model::ProgressNotificationParam>>>,
}

impl rmcp::ClientHandler for ListChanged {
    async fn on_tool_list_changed(
        &self,
        _context: rmcp::service::NotificationContext<rmcp::RoleClient>,
    ) {
        self.heard.notify_one();
    }

    async fn on_progress(
        &self,
        params: rmcp::model::ProgressNotificationParam,
        _context: rmcp::service::NotificationContext<rmcp::RoleClient>,
    ) {
        self.progress.lock().expect("progress").push(params);
    }
}

/// An MCP client (rmcp, streamable HTTP) of `h`, and what it hears of tool changes.
pub async fn mcp_client(
    h: &crate::TestHost,
) -> (
    rmcp::service::RunningService<rmcp::RoleClient, ListChanged>,
    ListChanged,
) {
    use rmcp::ServiceExt;
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let config = StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", h.url));
    let heard = ListChanged::default();
    let client = heard
        .clone()
        .serve(StreamableHttpClientTransport::from_config(config))
        .await
        .expect("an MCP client connects");
    (client, heard)
}

/// Docker and [`MCP_IMAGE`] (built on first use), or a skip (a failure with
/// `WHARF_REQUIRE_DOCKER=1`): what a stdio bridge test needs.
pub async fn docker_and_mcp_image() -> bool {
    if !crate::docker_ready() {
        return false;
    }
    tokio::task::spawn_blocking(mcp_server_image)
        .await
        .expect("join");
    true
}

/// Removes a backend's containers when dropped, whether its test passed or not.
pub struct ContainersCleanup(pub &'static str);

impl Drop for ContainersCleanup {
    fn drop(&mut self) {
        crate::remove_backend_containers(self.0);
    }
}
