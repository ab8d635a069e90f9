//! End to end: the engine link (`wharf-sandboxd --link`) in front of a built agent, driven
//! over its standard input and output with yamux as the host drives an exec's streams.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "support/harness.rs"]
mod support;

use std::os::fd::OwnedFd;
use std::process::{Child, Command as StdCommand, Stdio};
use std::task::Poll;
use std::time::Duration;

use futures::future::poll_fn;
use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::pipe;
use tokio::sync::{mpsc, oneshot};
use tokio_util::bytes::Bytes;
use tokio_util::codec::Framed;
use tokio_util::compat::{FuturesAsyncReadCompatExt, TokioAsyncReadCompatExt};
use wharf_sandbox_protocol::link::{LINK_OPENING, LinkStatus, link_config, yamux};
use wharf_sandbox_protocol::{
    Command, ProcessSetup, Reply, Request, RunRequest, VERSION, decode, encode,
};

use support::{Agent, BINARY, codec};

type Opener = oneshot::Sender<yamux::Stream>;

/// The link process and the host's end of it: a channel that opens streams.
struct Link {
    child: Child,
    opens: mpsc::Sender<Opener>,
    /// Resolves when the host's side of the link has ended.
    _ended: oneshot::Receiver<()>,
}

impl Drop for Link {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_link(args: &[String]) -> Link {
    let mut child = StdCommand::new(BINARY)
        .arg("--link")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let input = pipe::Sender::from_owned_fd(OwnedFd::from(child.stdin.take().unwrap())).unwrap();
    let output =
        pipe::Receiver::from_owned_fd(OwnedFd::from(child.stdout.take().unwrap())).unwrap();
    let io = tokio::io::join(output, input).compat();
    let mut connection = yamux::Connection::new(io, link_config(), yamux::Mode::Client);
    let (opens, mut requests) = mpsc::channel::<Opener>(16);
    let (end, ended) = oneshot::channel();
    tokio::spawn(async move {
        let mut waiting: Option<Opener> = None;
        poll_fn(|cx| {
            loop {
                match connection.poll_next_inbound(cx) {
                    Poll::Ready(Some(Ok(_))) => continue,
                    Poll::Ready(_) => return Poll::Ready(()),
                    Poll::Pending => {}
                }
                if waiting.is_none() {
                    match requests.poll_recv(cx) {
                        Poll::Ready(Some(opener)) => waiting = Some(opener),
                        // The host leaves: the connection is dropped, the link's input ends.
                        Poll::Ready(None) => return Poll::Ready(()),
                        Poll::Pending => {}
                    }
                }
                if let Some(opener) = waiting.take() {
                    match connection.poll_new_outbound(cx) {
                        Poll::Ready(Ok(stream)) => {
                            let _ = opener.send(stream);
                            continue;
                        }
                        Poll::Ready(Err(_)) => return Poll::Ready(()),
                        Poll::Pending => waiting = Some(opener),
                    }
                }
                return Poll::Pending;
            }
        })
        .await;
        let _ = end.send(());
    });
    Link {
        child,
        opens,
        _ended: ended,
    }
}

impl Link {
    /// A new stream and the link's status byte on it.
    async fn open(
        &self,
    ) -> (
        tokio_util::compat::Compat<yamux::Stream>,
        Option<LinkStatus>,
    ) {
        let (opener, opened) = oneshot::channel();
        self.opens.send(opener).await.unwrap();
        let mut stream = opened.await.unwrap().compat();
        stream.write_all(&[LINK_OPENING]).await.unwrap();
        let mut status = [0u8; 1];
        tokio::time::timeout(Duration::from_secs(10), stream.read_exact(&mut status))
            .await
            .unwrap()
            .unwrap();
        (stream, LinkStatus::from_byte(status[0]))
    }
}

async fn ask(
    stream: tokio_util::compat::Compat<yamux::Stream>,
    request: &Request,
) -> Option<Reply> {
    let mut framed = Framed::new(stream, codec());
    framed.send(Bytes::from(encode(request))).await.ok()?;
    let frame = tokio::time::timeout(Duration::from_secs(10), framed.next())
        .await
        .ok()??
        .ok()?;
    decode::<Reply>(&frame).ok()
}

#[tokio::test]
async fn streams_on_the_link_are_connections_to_the_agent() {
    let agent = Agent::start();
    let link = start_link(&[
        agent.socket.to_string_lossy().into_owned(),
        agent.child.id().to_string(),
    ]);
    let (stream, status) = link.open().await;
    assert_eq!(status, Some(LinkStatus::Connected));
    match ask(stream, &Request::Hello).await {
        Some(Reply::Hello { version, .. }) => assert_eq!(version, VERSION),
        other => panic!("no hello: {other:?}"),
    }

    // Many at once, each its own command, each answered with its own output.
    let mut runs = Vec::new();
    for i in 0..40 {
        let (stream, status) = link.open().await;
        assert_eq!(status, Some(LinkStatus::Connected));
        runs.push(tokio::spawn(async move {
            let request = Request::Run(RunRequest {
                command: Command::Shell(format!("sleep 0.2; echo run-{i}")),
                timeout_ms: 10_000,
                max_output_bytes: 1024,
                stdin: None,
                setup: ProcessSetup::default(),
                stream: false,
            });
            (i, ask(stream, &request).await)
        }));
    }
    for run in runs {
        let (i, reply) = run.await.unwrap();
        match reply {
            Some(Reply::Ran(out)) => {
                assert_eq!(out.stdout, format!("run-{i}\n").into_bytes());
                assert_eq!(out.exit_code, Some(0));
            }
            other => panic!("run {i}: {other:?}"),
        }
    }

    // A stream the host drops before the answer: the agent kills the command, as for a
    // socket client that hung up.
    let (stream, _) = link.open().await;
    let mut framed = Framed::new(stream, codec());
    let marker = support::temp_dir("sbd-link-marker");
    let request = Request::Run(RunRequest {
        command: Command::Shell(format!("sleep 2; touch {}", marker.display())),
        timeout_ms: 10_000,
        max_output_bytes: 1024,
        stdin: None,
        setup: ProcessSetup::default(),
        stream: false,
    });
    framed.send(Bytes::from(encode(&request))).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    drop(framed);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!marker.exists(), "the abandoned command was killed");
}

#[tokio::test]
async fn the_link_checks_the_socket_holder_and_says_when_nothing_listens() {
    let agent = Agent::start();
    let impostor = start_link(&[
        agent.socket.to_string_lossy().into_owned(),
        (agent.child.id() + 1).to_string(),
    ]);
    let (stream, status) = impostor.open().await;
    assert_eq!(status, Some(LinkStatus::Impostor));
    let mut stream = stream;
    let mut rest = Vec::new();
    stream.read_to_end(&mut rest).await.unwrap();
    assert!(rest.is_empty(), "nothing of the agent's reaches the host");

    let nobody = start_link(&["/nonexistent/agent.sock".to_string()]);
    let (_, status) = nobody.open().await;
    assert_eq!(status, Some(LinkStatus::NotListening));
}

#[tokio::test]
async fn garbage_on_the_links_input_ends_it() {
    let mut child = StdCommand::new(BINARY)
        .args(["--link", "/nonexistent/agent.sock"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut input =
        pipe::Sender::from_owned_fd(OwnedFd::from(child.stdin.take().unwrap())).unwrap();
    input.write_all(&[0xff; 64]).await.unwrap();
    let started = std::time::Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(!status.success());
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "still running");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Bad arguments are refused before anything is served.
    let status = StdCommand::new(BINARY)
        .args(["--link", "/s", "not-a-pid"])
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(2));
}

#[tokio::test]
async fn the_link_ends_when_the_host_leaves() {
    let link = start_link(&["/nonexistent/agent.sock".to_string()]);
    let mut link = link;
    let (gone, _) = mpsc::channel(1);
    drop(std::mem::replace(&mut link.opens, gone));
    let started = std::time::Instant::now();
    loop {
        if let Some(status) = link.child.try_wait().unwrap() {
            assert!(status.success(), "{status}");
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "still running");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
