//! End to end: the egress listener (`--egress-port`, `EgressWait`). A host connection
//! waits; a program in the sandbox connects to the listener; the two are relayed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "support/harness.rs"]
mod support;

use std::net::Ipv4Addr;
use std::process::{Command as StdCommand, Stdio};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use wharf_sandbox_protocol::{
    Command, ErrorKind, MAX_EGRESS_RELAYS, ProcessSetup, Reply, Request, RunRequest,
};

use support::{
    Agent, BINARY, echoed, error_kind, handed_over, open_raw, read_reply, send_raw, tcp_of,
    temp_dir,
};

/// A loopback port that was free a moment ago.
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    listener.local_addr().unwrap().port()
}

/// An agent with an egress listener, and its port.
fn egress_agent() -> (Agent, u16) {
    let port = free_port();
    (
        Agent::start_with(&["--egress-port", &port.to_string()], &[]),
        port,
    )
}

/// A program in the sandbox reaching the egress listener.
async fn program(port: u16) -> TcpStream {
    TcpStream::connect((Ipv4Addr::LOCALHOST, port))
        .await
        .unwrap()
}

/// Echoes a program's connection: its bytes back and, after the relay's end of stream,
/// `bye` and the end of stream.
fn echo(mut tcp: TcpStream) {
    tokio::spawn(async move {
        let (mut read, mut write) = tcp.split();
        if tokio::io::copy(&mut read, &mut write).await.is_ok() {
            let _ = write.write_all(b"bye").await;
            let _ = write.shutdown().await;
        }
    });
}

/// Reads exactly `n` bytes within 10 s.
async fn read_n(stream: &mut (impl AsyncReadExt + Unpin), n: usize) -> Vec<u8> {
    let mut bytes = vec![0; n];
    tokio::time::timeout(Duration::from_secs(10), stream.read_exact(&mut bytes))
        .await
        .expect("nothing to read")
        .unwrap();
    bytes
}

/// Reads to the end of stream within 10 s.
async fn read_rest(stream: &mut (impl AsyncReadExt + Unpin)) -> Vec<u8> {
    let mut rest = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut rest))
        .await
        .expect("no end of stream")
        .unwrap();
    rest
}

#[tokio::test]
async fn egress_relays_a_program_both_ways() {
    let (agent, port) = egress_agent();
    // Bytes the host sends behind its request reach the program first.
    let socket = agent.socket.clone();
    let host =
        tokio::spawn(async move { open_raw(&socket, &Request::EgressWait, b"early ").await });
    let mut tcp = program(port).await;
    let (mut host, reply) = host.await.unwrap();
    assert_eq!(reply, Reply::Connected);
    assert_eq!(read_n(&mut tcp, 6).await, b"early ");
    // The program speaks first, as to a proxy; the host answers.
    tcp.write_all(b"CONNECT example.com:443 HTTP/1.1\r\n\r\n")
        .await
        .unwrap();
    assert_eq!(
        read_n(&mut host, 36).await,
        b"CONNECT example.com:443 HTTP/1.1\r\n\r\n"
    );
    host.write_all(b"HTTP/1.1 200 OK\r\n\r\n").await.unwrap();
    assert_eq!(read_n(&mut tcp, 19).await, b"HTTP/1.1 200 OK\r\n\r\n");
    // Many times a socket buffer, both ways at once.
    echo(tcp);
    let big: Vec<u8> = (0..4_000_000u32).map(|i| (i % 251) as u8).collect();
    assert!(echoed(&mut host, &big).await == big);
    // The host's half-close reaches the program, which still answers before its own.
    host.shutdown().await.unwrap();
    assert_eq!(read_rest(&mut host).await, b"bye");
    assert!(matches!(
        agent.call(&Request::Hello).await,
        Reply::Hello { .. }
    ));
}

#[tokio::test]
async fn egress_bytes_sent_while_waiting_reach_the_program() {
    let (agent, port) = egress_agent();
    let mut host = send_raw(&agent.socket, &Request::EgressWait, b"").await;
    // Long after the request was read: the agent is waiting for a program by now.
    tokio::time::sleep(Duration::from_millis(300)).await;
    host.write_all(b"late").await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut tcp = program(port).await;
    let reply = tokio::time::timeout(Duration::from_secs(10), read_reply(&mut host))
        .await
        .expect("no reply to EgressWait");
    assert_eq!(reply, Reply::Connected);
    assert_eq!(read_n(&mut tcp, 4).await, b"late");
}

#[tokio::test]
async fn egress_half_close_from_the_program() {
    let (agent, port) = egress_agent();
    let socket = agent.socket.clone();
    let host = tokio::spawn(async move { open_raw(&socket, &Request::EgressWait, b"").await });
    let mut tcp = program(port).await;
    let (mut host, reply) = host.await.unwrap();
    assert_eq!(reply, Reply::Connected);
    tcp.write_all(b"request").await.unwrap();
    tcp.shutdown().await.unwrap();
    assert_eq!(read_rest(&mut host).await, b"request");
    host.write_all(b"response").await.unwrap();
    host.shutdown().await.unwrap();
    assert_eq!(read_rest(&mut tcp).await, b"response");
}

#[tokio::test]
async fn egress_each_wait_gets_its_own_program() {
    let (agent, port) = egress_agent();
    let mut hosts = Vec::new();
    for _ in 0..2 {
        let socket = agent.socket.clone();
        hosts.push(tokio::spawn(async move {
            open_raw(&socket, &Request::EgressWait, b"").await
        }));
    }
    let mut programs = Vec::new();
    for name in [b'a', b'b'] {
        let mut tcp = program(port).await;
        tcp.write_all(&[name]).await.unwrap();
        programs.push(tcp);
    }
    // Each host answers whichever program it got; each program hears its own answer.
    let mut seen = Vec::new();
    let mut relays = Vec::new();
    for host in hosts {
        let (mut host, reply) = host.await.unwrap();
        assert_eq!(reply, Reply::Connected);
        let name = read_n(&mut host, 1).await[0];
        host.write_all(&[name.to_ascii_uppercase()]).await.unwrap();
        seen.push(name);
        relays.push(host);
    }
    seen.sort();
    assert_eq!(seen, b"ab");
    for (tcp, answer) in programs.iter_mut().zip([b'A', b'B']) {
        assert_eq!(read_n(tcp, 1).await, [answer]);
    }
}

#[tokio::test]
async fn egress_limit_and_a_closed_wait_frees_its_slot() {
    let (agent, port) = egress_agent();
    let mut waits = Vec::new();
    for _ in 0..MAX_EGRESS_RELAYS {
        waits.push(send_raw(&agent.socket, &Request::EgressWait, b"").await);
    }
    let (_, reply) = open_raw(&agent.socket, &Request::EgressWait, b"").await;
    match reply {
        Reply::Error(error) => {
            assert_eq!(error.kind, ErrorKind::Limit);
            assert_eq!(error.message, "at most 32 egress connections at once");
        }
        other => panic!("{other:?}"),
    }
    // Commands still have connection slots of their own.
    assert!(matches!(
        agent.call(&Request::Hello).await,
        Reply::Hello { .. }
    ));
    // Closing a waiting host frees its slot (once the agent has seen the close).
    drop(waits.remove(0));
    let started = Instant::now();
    let waiting = loop {
        let mut wait = send_raw(&agent.socket, &Request::EgressWait, b"").await;
        match tokio::time::timeout(Duration::from_millis(300), read_reply(&mut wait)).await {
            Err(_) => break wait,
            Ok(reply) => assert_eq!(error_kind(&reply), ErrorKind::Limit),
        }
        assert!(started.elapsed() < Duration::from_secs(5), "no slot freed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    waits.push(waiting);
    // One program per live wait: every one of them, the new one too, gets its own (the
    // closed wait took none).
    let mut programs = Vec::new();
    for i in 0..MAX_EGRESS_RELAYS {
        let mut tcp = program(port).await;
        tcp.write_all(&[i as u8]).await.unwrap();
        programs.push(tcp);
    }
    let mut seen = Vec::new();
    for wait in &mut waits {
        let reply = tokio::time::timeout(Duration::from_secs(10), read_reply(wait))
            .await
            .expect("a wait got no program");
        assert_eq!(reply, Reply::Connected);
        let name = read_n(wait, 1).await[0];
        wait.write_all(&[name]).await.unwrap();
        seen.push(name);
    }
    seen.sort();
    assert_eq!(seen, (0..MAX_EGRESS_RELAYS as u8).collect::<Vec<_>>());
    for (i, tcp) in programs.iter_mut().enumerate() {
        assert_eq!(read_n(tcp, 1).await, [i as u8]);
    }
}

#[tokio::test]
async fn egress_without_a_listener() {
    let agent = Agent::start();
    match agent.call(&Request::EgressWait).await {
        Reply::Error(error) => {
            assert_eq!(error.kind, ErrorKind::NotFound);
            assert_eq!(error.message, "this sandbox has no egress listener");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn commands_inherit_the_agents_environment() {
    let proxy = "http://127.0.0.1:3128";
    let agent = Agent::start_with(&[], &[("HTTP_PROXY", proxy), ("HTTPS_PROXY", proxy)]);
    let request = Request::Run(RunRequest {
        command: Command::Shell("printf '%s %s' \"$HTTP_PROXY\" \"$HTTPS_PROXY\"".into()),
        setup: ProcessSetup::default(),
        stdin: None,
        timeout_ms: 10_000,
        max_output_bytes: 1024,
        stream: false,
    });
    match agent.call(&request).await {
        Reply::Ran(output) => assert_eq!(output.stdout, format!("{proxy} {proxy}").as_bytes()),
        other => panic!("{other:?}"),
    }
}

/// The agent's exit code when started with `args`; it must exit within 10 s.
fn exit_code(args: &[&str]) -> Option<i32> {
    let dir = temp_dir("sbd-egress");
    let socket = dir.join("agent.sock");
    let mut child = StdCommand::new(BINARY)
        .arg("--socket")
        .arg(&socket)
        .args(args)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the agent did not exit: {args:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    // Refused before the socket was made: a host never sees an agent without its egress.
    assert!(!socket.exists(), "{args:?}");
    let _ = std::fs::remove_dir_all(&dir);
    status.code()
}

#[test]
fn egress_port_is_checked_at_start() {
    for bad in [
        &["--egress-port", "0"][..],
        &["--egress-port", "x"],
        &["--egress-port", "65536"],
        &["--egress-port"],
        &["--egress-port="],
    ] {
        assert_eq!(exit_code(bad), Some(2), "{bad:?}");
    }
    // A port already taken: the sandbox must not start without its egress.
    let taken = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    assert_eq!(exit_code(&["--egress-port", &port, "--", "true"]), Some(1));
    assert_eq!(exit_code(&[&format!("--egress-port={port}")]), Some(1));
}

#[tokio::test]
async fn egress_hand_over_gives_the_host_the_programs_connection() {
    let (agent, port) = egress_agent();
    // More than the agent's relay slots: a handed-over connection holds none.
    let mut kept = Vec::new();
    for round in 0..MAX_EGRESS_RELAYS + 2 {
        let host = send_raw(&agent.socket, &Request::EgressHandOver, b"").await;
        let mut tcp = program(port).await;
        let (reply, fd) =
            tokio::task::spawn_blocking(move || handed_over(&host.into_std().unwrap()))
                .await
                .unwrap();
        assert_eq!(reply, Reply::Connected, "round {round}");
        let fd = fd.unwrap_or_else(|| panic!("round {round}: no descriptor came"));
        let mut handed = tcp_of(fd);
        // The host now talks to the program itself, both ways.
        tcp.write_all(b"GET http://x/ HTTP/1.1\r\n\r\n")
            .await
            .unwrap();
        assert_eq!(
            read_n(&mut handed, 26).await,
            b"GET http://x/ HTTP/1.1\r\n\r\n"
        );
        handed.write_all(b"HTTP/1.1 200 OK\r\n\r\n").await.unwrap();
        assert_eq!(read_n(&mut tcp, 19).await, b"HTTP/1.1 200 OK\r\n\r\n");
        kept.push((tcp, handed));
    }
    // The agent kept no copy: the host's end of stream reaches the program.
    let (mut tcp, handed) = kept.pop().unwrap();
    drop(handed);
    assert_eq!(read_rest(&mut tcp).await, b"");
    assert!(matches!(
        agent.call(&Request::Hello).await,
        Reply::Hello { .. }
    ));
}
