//! Engine links: the sandbox agent reached through the engine where this host cannot reach
//! its socket (an engine on another machine; gVisor registered without host sockets). One
//! link per container is one long exec of `wharf-sandboxd --link` carrying yamux
//! (`wharf_sandbox_protocol::link`); each connection to the agent is one stream on it,
//! so a command costs no engine call once the link is up. A link ends with its exec (the
//! container stopped, the link process was killed) and the next connection starts another
//! (`link_exec`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

use futures::future::poll_fn;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::sync::{mpsc, oneshot};
use tokio_util::compat::FuturesAsyncReadCompatExt as _;
use wharf_sandbox_protocol::link::{LINK_OPENING, LinkStatus, MAX_LINK_STREAMS, yamux};

use super::agent_stream::{AgentFailure, AgentStream};

/// How long a new stream may take to say whether it reached the agent.
const STATUS_LIMIT: Duration = Duration::from_secs(10);
/// Links remembered at most (one per running container this host talks to through the
/// engine); past it, dead ones are dropped and then the oldest half.
const MAX_LINKS: usize = 4096;

type Opener = oneshot::Sender<Result<yamux::Stream, String>>;

/// One container's engine link.
#[derive(Debug)]
pub(crate) struct EngineLink {
    opens: mpsc::Sender<Opener>,
    driver: tokio::task::AbortHandle,
}

impl Drop for EngineLink {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

impl EngineLink {
    /// Drives `connection` (the link's yamux client) in a task of its own.
    pub(crate) fn new<T>(connection: yamux::Connection<T>, container: String) -> Self
    where
        T: futures::AsyncRead + futures::AsyncWrite + Unpin + Send + 'static,
    {
        let (opens, requests) = mpsc::channel(MAX_LINK_STREAMS);
        let driver = tokio::spawn(async move {
            if let Err(e) = drive(connection, requests).await {
                tracing::debug!(container = %container, "the engine link ended: {e}");
            }
        });
        EngineLink {
            opens,
            driver: driver.abort_handle(),
        }
    }

    /// Whether the link's exec still runs and the link is trusted to answer.
    pub(crate) fn is_alive(&self) -> bool {
        !self.opens.is_closed() && !self.driver.is_finished()
    }

    /// Ends a link that stopped answering (its exec ends with the connection): whatever
    /// was written into it — a process in a gVisor sandbox can write into the link's
    /// output, docs/security.md — costs the next connection a new link, not an answer.
    pub(crate) fn end(&self) {
        self.driver.abort();
    }

    /// One connection to the agent, checked by the link as the host checks a socket (the
    /// listener is the container's PID 1).
    pub(crate) async fn open(&self) -> Result<AgentStream, AgentFailure> {
        let ended = || {
            AgentFailure::Unreachable(std::io::Error::new(
                std::io::ErrorKind::NotConnected,
                "the engine link ended",
            ))
        };
        let (opener, opened) = oneshot::channel();
        self.opens.send(opener).await.map_err(|_| ended())?;
        let stream = opened.await.map_err(|_| ended())?.map_err(|e| {
            AgentFailure::Broken(format!("opening a stream on the engine link: {e}"))
        })?;
        let mut stream = stream.compat();
        let mut status = [0u8; 1];
        let answered = async {
            stream.write_all(&[LINK_OPENING]).await?;
            stream.read_exact(&mut status).await
        };
        match tokio::time::timeout(STATUS_LIMIT, answered).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                self.end();
                return Err(AgentFailure::Broken(format!("the engine link: {e}")));
            }
            Err(_) => {
                self.end();
                return Err(AgentFailure::Broken(
                    "the engine link did not answer within 10 s".into(),
                ));
            }
        }
        match LinkStatus::from_byte(status[0]) {
            Some(LinkStatus::Connected) => Ok(Box::new(stream)),
            Some(LinkStatus::NotListening) => Err(AgentFailure::Unreachable(std::io::Error::new(
                std::io::ErrorKind::ConnectionRefused,
                "nothing listens on the agent's socket",
            ))),
            Some(LinkStatus::Impostor) => Err(AgentFailure::Impostor(None)),
            None => {
                self.end();
                Err(AgentFailure::Broken(format!(
                    "the engine link answered {:#04x}, not a status",
                    status[0]
                )))
            }
        }
    }
}

/// The engine links of the containers a Docker client talks to through the engine.
#[derive(Debug, Default)]
pub(crate) struct EngineLinks {
    by_id: Mutex<HashMap<String, Arc<EngineLink>>>,
    /// Held while a link is started, so callers that find none at once start one exec,
    /// not one each (links start once per container, or after one ended).
    starting: tokio::sync::Mutex<()>,
}

impl EngineLinks {
    /// The turn to start a link; whoever takes it looks for a live one again first.
    pub(crate) async fn start_turn(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.starting.lock().await
    }

    /// The live link of container `id`, if any.
    pub(crate) fn alive(&self, id: &str) -> Option<Arc<EngineLink>> {
        let links = self.by_id.lock().ok()?;
        links.get(id).filter(|link| link.is_alive()).cloned()
    }

    /// Keeps container `id`'s new link.
    pub(crate) fn keep(&self, id: &str, link: Arc<EngineLink>) {
        if let Ok(mut links) = self.by_id.lock() {
            if links.len() >= MAX_LINKS {
                links.retain(|_, link| link.is_alive());
            }
            if links.len() >= MAX_LINKS {
                // Dropping a link's last handle ends its exec: a container asked again
                // gets a new one.
                let drop: Vec<String> = links.keys().take(MAX_LINKS / 2).cloned().collect();
                for id in drop {
                    links.remove(&id);
                }
            }
            links.insert(id.to_string(), link);
        }
    }

    /// Forgets a container's link (removed): its exec ends with the last handle.
    pub(crate) fn forget(&self, id: &str) {
        if let Ok(mut links) = self.by_id.lock() {
            links.remove(id);
        }
    }
}

/// Drives a link's yamux connection: opens the streams asked for, refuses any the link
/// opens (it has no business to), and ends when the exec's streams end, when yamux finds
/// the other side broke the protocol, or when nobody holds the link any more.
async fn drive<T>(
    mut connection: yamux::Connection<T>,
    mut requests: mpsc::Receiver<Opener>,
) -> Result<(), yamux::ConnectionError>
where
    T: futures::AsyncRead + futures::AsyncWrite + Unpin,
{
    let mut waiting: Option<Opener> = None;
    let mut held = true;
    poll_fn(|cx| {
        loop {
            match connection.poll_next_inbound(cx) {
                Poll::Ready(Some(Ok(refused))) => {
                    drop(refused);
                    continue;
                }
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Err(e)),
                Poll::Ready(None) => return Poll::Ready(Ok(())),
                Poll::Pending => {}
            }
            if waiting.is_none() && held {
                match requests.poll_recv(cx) {
                    Poll::Ready(Some(opener)) => waiting = Some(opener),
                    Poll::Ready(None) => held = false,
                    Poll::Pending => {}
                }
            }
            if !held {
                return connection.poll_close(cx);
            }
            if let Some(opener) = waiting.take() {
                match connection.poll_new_outbound(cx) {
                    Poll::Ready(opened) => {
                        let _ = opener.send(opened.map_err(|e| e.to_string()));
                        continue;
                    }
                    Poll::Pending => waiting = Some(opener),
                }
            }
            return Poll::Pending;
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio_util::compat::TokioAsyncReadCompatExt as _;
    use wharf_sandbox_protocol::link::link_config;

    /// A link's far end in this process: answers each stream with `status`, then echoes.
    fn far_end(io: tokio::io::DuplexStream, status: u8) {
        tokio::spawn(async move {
            let mut connection =
                yamux::Connection::new(io.compat(), link_config(), yamux::Mode::Server);
            while let Some(Ok(stream)) = poll_fn(|cx| connection.poll_next_inbound(cx)).await {
                tokio::spawn(async move {
                    let mut stream = stream.compat();
                    let mut opening = [0u8; 1];
                    if stream.read_exact(&mut opening).await.is_err() || opening[0] != LINK_OPENING
                    {
                        return;
                    }
                    let _ = stream.write_all(&[status]).await;
                    let mut buf = [0u8; 5];
                    if stream.read_exact(&mut buf).await.is_ok() {
                        let _ = stream.write_all(&buf).await;
                    }
                    let _ = stream.shutdown().await;
                });
            }
        });
    }

    fn link_to(status: u8) -> EngineLink {
        let (near, far) = tokio::io::duplex(1 << 16);
        far_end(far, status);
        let connection = yamux::Connection::new(near.compat(), link_config(), yamux::Mode::Client);
        EngineLink::new(connection, "test".into())
    }

    #[tokio::test]
    async fn streams_carry_bytes_after_the_status() {
        let link = link_to(LinkStatus::Connected as u8);
        let mut streams = Vec::new();
        for _ in 0..20 {
            streams.push(link.open().await.unwrap());
        }
        for (i, stream) in streams.iter_mut().enumerate() {
            let word = format!("hi {i:02}");
            stream.write_all(word.as_bytes()).await.unwrap();
            let mut back = [0u8; 5];
            stream.read_exact(&mut back).await.unwrap();
            assert_eq!(&back, word.as_bytes());
        }
        assert!(link.is_alive());
    }

    #[tokio::test]
    async fn statuses_become_the_failures_a_socket_gives() {
        let err = link_to(LinkStatus::NotListening as u8).open().await.err();
        assert!(matches!(err, Some(AgentFailure::Unreachable(_))), "{err:?}");
        let err = link_to(LinkStatus::Impostor as u8).open().await.err();
        assert!(matches!(err, Some(AgentFailure::Impostor(None))), "{err:?}");
        let garbled = link_to(0x7f);
        let err = garbled.open().await.err();
        assert!(matches!(err, Some(AgentFailure::Broken(_))), "{err:?}");
        tokio::task::yield_now().await;
        assert!(!garbled.is_alive(), "a link that answers garbage is ended");
    }

    #[tokio::test]
    async fn a_far_end_that_speaks_garbage_ends_the_link() {
        let (near, mut far) = tokio::io::duplex(1 << 16);
        let connection = yamux::Connection::new(near.compat(), link_config(), yamux::Mode::Client);
        let link = EngineLink::new(connection, "test".into());
        far.write_all(&[0xff; 64]).await.unwrap();
        let started = std::time::Instant::now();
        while link.is_alive() {
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "the driver ends"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let err = link.open().await.err();
        assert!(matches!(err, Some(AgentFailure::Unreachable(_))), "{err:?}");
    }
}
