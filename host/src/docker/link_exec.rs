//! Starting a container's engine link (`agent_link`): `wharf-sandboxd --link` as a long
//! exec with its streams attached, as root (the agent's socket is root's), yamux over them.

use std::sync::Arc;

use bollard::container::LogOutput;
use bollard::exec::CreateExecOptions;
use futures::StreamExt as _;
use tokio_util::compat::TokioAsyncReadCompatExt as _;
use tokio_util::io::StreamReader;
use wharf_sandbox_protocol::BINARY_PATH;
use wharf_sandbox_protocol::link::{link_config, yamux};

use super::agent_link::EngineLink;
use super::client::{Docker, OP_TIMEOUT};
use super::error::DockerError;
use super::labels::shorten;

/// What the host gathers of a link's outgoing frames before each write.
const LINK_WRITE_BUFFER: usize = 64 * 1024;

impl Docker {
    /// The engine link of a running container that runs the agent: the live one, or a new
    /// exec.
    pub(crate) async fn engine_link(&self, id: &str) -> Result<Arc<EngineLink>, DockerError> {
        if let Some(link) = self.engine_links().alive(id) {
            return Ok(link);
        }
        let _turn = self.engine_links().start_turn().await;
        if let Some(link) = self.engine_links().alive(id) {
            return Ok(link);
        }
        let link = Arc::new(self.start_link(id).await?);
        self.engine_links().keep(id, link.clone());
        Ok(link)
    }

    async fn start_link(&self, id: &str) -> Result<EngineLink, DockerError> {
        let api = self.api().await?;
        let options = CreateExecOptions {
            attach_stdin: Some(true),
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            tty: Some(false),
            // The link connects to the agent's socket, which only root may open.
            user: Some("0:0".to_string()),
            cmd: Some(vec![BINARY_PATH.to_string(), "--link".to_string()]),
            ..Default::default()
        };
        let created = self
            .run("create link exec", OP_TIMEOUT, api.create_exec(id, options))
            .await?;
        let (output, input) = self.start_attached(&api, &created.id).await?;
        // What the link prints on stderr is a diagnosis, never protocol: dropped.
        let stdout = output.filter_map(|item| async move {
            match item {
                Ok(LogOutput::StdOut { message }) => Some(Ok(message)),
                Ok(_) => None,
                Err(e) => Some(Err(std::io::Error::other(e))),
            }
        });
        // yamux writes a frame's header and body apart: buffered, a frame leaves as one
        // write (over TCP, one segment), flushed whenever yamux has nothing more to send.
        let input = tokio::io::BufWriter::with_capacity(LINK_WRITE_BUFFER, input);
        let io = tokio::io::join(StreamReader::new(Box::pin(stdout)), input).compat();
        let connection = yamux::Connection::new(io, link_config(), yamux::Mode::Client);
        Ok(EngineLink::new(connection, shorten(id)))
    }
}
