//! File operations through a container's sandbox agent (the engine's `file_operation`):
//! one connection per operation, pumped by a task of its own that sends the input, then
//! hands each output chunk on when the consumer takes it. The agent is inside the sandbox,
//! so what it sends is held to the protocol: a reply out of turn, a chunk past the frame
//! limit or a connection that ends without `Done` is a failure, never a success.

use std::time::Duration;

use bytes::Bytes;
use futures::{SinkExt as _, StreamExt as _};
use tokio::sync::mpsc;
use tokio_util::codec::{Framed, LengthDelimitedCodec};
use wharf_sandbox_protocol::{FilesRequest, MAX_CHUNK_BYTES, Reply, Request, Stream, decode};

use crate::engines::sandbox_files::{FileInput, FileOp, FileOutput};

use super::agent_calls::agent_error;
use super::agent_client::open_framed;
use super::agent_stream::{AgentFailure, AgentStream};
use super::client::Docker;
use super::error::DockerError;
use super::labels::shorten;
use super::types::Owner;

/// Chunks in flight between the pump and its consumer.
const CHANNEL_CHUNKS: usize = 2;
/// How long a refusal is waited for after the input could not be sent.
const REASON_WAIT: Duration = Duration::from_secs(1);

impl Docker {
    /// Runs `op` in an owned container through its agent.
    pub async fn file_operation(
        &self,
        owner: &Owner,
        id: &str,
        op: FileOp,
        input: Option<FileInput>,
        stall: Duration,
    ) -> Result<FileOutput, DockerError> {
        if !wharf_sandbox_protocol::valid_path(op.path()) {
            return Err(DockerError::Invalid(format!(
                "a path is 1 to {} bytes, without NUL",
                wharf_sandbox_protocol::MAX_PATH_BYTES
            )));
        }
        let Some(endpoint) = self.agent_of(owner, id).await? else {
            return Err(DockerError::Refused(format!(
                "container {} runs no sandbox agent: its files cannot be reached through one",
                shorten(id)
            )));
        };
        let takes_input = op.takes_input();
        let request = Request::Files(FilesRequest { op, user: None });
        let framed = open_framed(&endpoint, &request).await.map_err(|failure| {
            if !matches!(failure, AgentFailure::Refused(_)) {
                self.known_agents().forget(id);
            }
            agent_error(failure)
        })?;
        let (tx, rx) = mpsc::channel(CHANNEL_CHUNKS);
        let input = if takes_input { input } else { None };
        tokio::spawn(pump(framed, input, tx, stall));
        Ok(rx)
    }
}

type AgentConnection = Framed<AgentStream, LengthDelimitedCodec>;

async fn pump(
    mut framed: AgentConnection,
    input: Option<FileInput>,
    tx: mpsc::Sender<Result<Bytes, DockerError>>,
    stall: Duration,
) {
    if let Some(input) = input
        && let Err(failure) = send_input(&mut framed, input).await
    {
        // An agent that refused at once (no such user, say) closed without reading: its
        // reason, if it sent one, says more than the broken pipe.
        let reason = match tokio::time::timeout(REASON_WAIT, framed.next()).await {
            Ok(Some(Ok(frame))) => match decode::<Reply>(&frame) {
                Ok(Reply::Error(e)) => agent_error(AgentFailure::Refused(e)),
                _ => failure,
            },
            _ => failure,
        };
        let _ = tx.send_timeout(Err(reason), stall).await;
        return;
    }
    loop {
        let next = tokio::select! {
            next = framed.next() => next,
            // The consumer left: dropping the connection abandons the operation.
            () = tx.closed() => return,
        };
        let reply = match next {
            Some(Ok(frame)) => decode::<Reply>(&frame).map_err(|e| broken(e.to_string())),
            Some(Err(e)) => Err(broken(format!("reading: {e}"))),
            None => Err(broken("the agent closed the connection before the end")),
        };
        let item = match reply {
            Ok(Reply::Chunk {
                stream: Stream::Stdout,
                data,
            }) if data.len() <= MAX_CHUNK_BYTES as usize => Ok(Bytes::from(data)),
            Ok(Reply::Done) => return,
            Ok(Reply::Error(e)) if predates_files(&e) => Err(DockerError::Refused(
                "this sandbox's agent is older than file operations (no sandbox agent serves \
                 its files): they go through commands until the sandbox is made again"
                    .into(),
            )),
            Ok(Reply::Error(e)) => Err(agent_error(AgentFailure::Refused(e))),
            Ok(_) => Err(broken("the agent answered a file operation out of turn")),
            Err(failure) => Err(failure),
        };
        let failed = item.is_err();
        if tx.send_timeout(item, stall).await.is_err() || failed {
            return;
        }
    }
}

async fn send_input(framed: &mut AgentConnection, mut input: FileInput) -> Result<(), DockerError> {
    let send_failed = |e: std::io::Error| broken(format!("sending: {e}"));
    while let Some(chunk) = input.recv().await {
        for piece in chunk.chunks(MAX_CHUNK_BYTES as usize) {
            framed
                .send(chunk.slice_ref(piece))
                .await
                .map_err(send_failed)?;
        }
    }
    framed.send(Bytes::new()).await.map_err(send_failed)
}

/// Whether the agent refused the request itself as one it cannot decode: an agent from
/// before file operations (a sandbox made by an earlier host and adopted after an upgrade)
/// answers `Files` so. Refused (4030) then, like a sandbox without an agent, so callers
/// fall back to commands.
fn predates_files(error: &wharf_sandbox_protocol::AgentError) -> bool {
    error.kind == wharf_sandbox_protocol::ErrorKind::Invalid
        && error.message.starts_with("malformed agent message")
}

fn broken(message: impl Into<String>) -> DockerError {
    agent_error(AgentFailure::Broken(message.into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use wharf_sandbox_protocol::{AgentError, ErrorKind, encode};

    /// An agent on the other end of a socket pair that answers with `replies`.
    async fn answered(replies: Vec<Reply>) -> Vec<Result<Bytes, DockerError>> {
        let (ours, theirs) = tokio::net::UnixStream::pair().unwrap();
        tokio::spawn(async move {
            let mut agent = Framed::new(theirs, LengthDelimitedCodec::new());
            for reply in replies {
                let _ = agent.send(Bytes::from(encode(&reply))).await;
            }
            // Then it closes: a stream without `Done` is cut.
        });
        let (tx, mut rx) = mpsc::channel(4);
        let framed = Framed::new(Box::new(ours) as AgentStream, LengthDelimitedCodec::new());
        tokio::spawn(pump(framed, None, tx, Duration::from_secs(5)));
        let mut got = Vec::new();
        while let Some(item) = rx.recv().await {
            got.push(item);
        }
        got
    }

    #[tokio::test]
    async fn chunks_then_done_and_what_the_agent_must_not_send() {
        let chunk = |data: &[u8]| Reply::Chunk {
            stream: Stream::Stdout,
            data: data.to_vec(),
        };
        let got = answered(vec![chunk(b"ab"), chunk(b"c"), Reply::Done]).await;
        let bytes: Vec<u8> = got.into_iter().flat_map(|c| c.unwrap().to_vec()).collect();
        assert_eq!(bytes, b"abc");
        // Stderr, a reply out of turn, or an end without `Done` is a failure, never a success.
        for replies in [
            vec![Reply::Chunk {
                stream: Stream::Stderr,
                data: b"x".to_vec(),
            }],
            vec![Reply::Connected],
            vec![chunk(b"cut")],
        ] {
            let got = answered(replies).await;
            assert!(got.last().unwrap().is_err(), "{got:?}");
        }
    }

    #[tokio::test]
    async fn an_agent_older_than_file_operations_is_refused_like_no_agent() {
        let old = Reply::Error(AgentError {
            kind: ErrorKind::Invalid,
            message: "malformed agent message: Found an enum discriminant that was > u32::MAX"
                .into(),
        });
        let got = answered(vec![old]).await;
        match got.last() {
            Some(Err(DockerError::Refused(m))) => assert!(m.contains("no sandbox agent"), "{m}"),
            other => panic!("{other:?}"),
        }
        let bad_path = Reply::Error(AgentError {
            kind: ErrorKind::Invalid,
            message: "a file operation's path must be 1 to 4096 bytes".into(),
        });
        assert!(matches!(
            answered(vec![bad_path]).await.last(),
            Some(Err(DockerError::Invalid(_)))
        ));
    }
}
