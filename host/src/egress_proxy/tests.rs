//! The proxy over an in-memory connection from "the sandbox", to real TCP destinations on
//! this host's loopback.

use super::*;
use crate::policy::{EgressAsk, Grants};
use std::collections::BTreeMap;
use tokio::io::AsyncReadExt as _;
use tokio::net::{TcpListener, TcpStream};

/// A request's head as a destination reads it: byte by byte up to the empty line, so
/// nothing after it is taken.
async fn request_head_of(socket: &mut TcpStream) -> Vec<u8> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && socket.read(&mut byte).await.unwrap_or(0) == 1 {
        head.push(byte[0]);
    }
    head
}

/// A destination answering every request with `body`, then closing.
async fn destination(body: &'static [u8]) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                request_head_of(&mut socket).await;
                let answer = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = socket.write_all(answer.as_bytes()).await;
                let _ = socket.write_all(body).await;
            });
        }
    });
    port
}

fn session(port: u16, max_bytes: u64) -> Arc<EgressSession> {
    let grants = Grants {
        egress_to: vec!["*.test:*".into()],
        egress_cidrs: vec!["127.0.0.1/32".into()],
        max_egress_bytes_per_session: max_bytes,
        ..Grants::default()
    };
    let rule = grants
        .egress_rule(&EgressAsk {
            hosts: vec![
                format!("allowed.test:{port}"),
                format!("rebind.test:{port}"),
            ],
            cidrs: vec!["127.0.0.1/32".into()],
        })
        .unwrap();
    let fixed = BTreeMap::from([
        (
            "allowed.test".to_string(),
            vec!["127.0.0.1".parse().unwrap()],
        ),
        (
            "rebind.test".to_string(),
            vec!["169.254.169.254".parse().unwrap()],
        ),
    ]);
    Arc::new(EgressSession {
        meter: Arc::new(Meter::new(rule.max_bytes)),
        rule,
        backend: "b".into(),
        session: "s".into(),
        container: "c".into(),
        resolver: Arc::new(Resolver::new(&fixed)),
    })
}

/// How a program's connection reaches the proxy: relayed by the agent, or its own socket
/// handed over (then spliced).
#[derive(Debug, Clone, Copy)]
enum Path {
    Relayed,
    Socket,
}

const PATHS: [Path; 2] = [Path::Relayed, Path::Socket];

/// Sends `request` through a fresh proxy connection on `path`; everything the proxy sends
/// back until it closes (or is quiet for two seconds).
async fn through(path: Path, session: Arc<EgressSession>, request: String) -> String {
    let mut sandbox: crate::engines::container_types::PortStream = match path {
        Path::Relayed => {
            let (sandbox, proxy_side) = tokio::io::duplex(1 << 20);
            tokio::spawn(serve(
                ProgramConnection::Relayed(Box::new(proxy_side)),
                session,
            ));
            Box::new(sandbox)
        }
        Path::Socket => {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let program = TcpStream::connect(listener.local_addr().unwrap())
                .await
                .unwrap();
            let (accepted, _) = listener.accept().await.unwrap();
            tokio::spawn(serve(ProgramConnection::Socket(accepted), session));
            Box::new(program)
        }
    };
    sandbox.write_all(request.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    while let Ok(Ok(n)) =
        tokio::time::timeout(Duration::from_secs(2), sandbox.read(&mut chunk)).await
    {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&chunk[..n]);
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test]
async fn connect_and_absolute_urls_reach_allowed_names_only() {
    let port = destination(b"hello-egress").await;
    for path in PATHS {
        reaches_allowed_names_only(path, port).await;
    }
}

async fn reaches_allowed_names_only(path: Path, port: u16) {
    let s = session(port, 1 << 20);
    let tunnel = through(
        path,
        s.clone(),
        format!("CONNECT allowed.test:{port} HTTP/1.1\r\nHost: allowed.test:{port}\r\n\r\nGET / HTTP/1.0\r\n\r\n"),
    )
    .await;
    assert!(tunnel.starts_with("HTTP/1.1 200"), "{tunnel}");
    assert!(tunnel.ends_with("hello-egress"), "{tunnel}");

    let plain = through(
        path,
        s.clone(),
        format!("GET http://allowed.test:{port}/x HTTP/1.1\r\nHost: allowed.test:{port}\r\nConnection: close\r\n\r\n"),
    )
    .await;
    assert!(
        plain.starts_with("HTTP/1.1 200") && plain.ends_with("hello-egress"),
        "{plain}"
    );
    assert!(s.meter.used() > 0);

    for (target, why) in [
        (format!("other.test:{port}"), "allowlist"),
        (format!("127.0.0.2:{port}"), "allowlist"),
        (
            format!("allowed.test:{}", port.wrapping_add(1).max(1)),
            "allowlist",
        ),
        (format!("rebind.test:{port}"), "169.254.169.254"),
    ] {
        let refused = through(
            path,
            s.clone(),
            format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n"),
        )
        .await;
        assert!(refused.starts_with("HTTP/1.1 403"), "{target}: {refused}");
        assert!(refused.contains(why), "{target}: {refused}");
    }
    let https = through(
        path,
        s.clone(),
        format!("GET https://allowed.test:{port}/ HTTP/1.1\r\nHost: x\r\n\r\n"),
    )
    .await;
    assert!(https.starts_with("HTTP/1.1 400"), "{https}");
    let garbage = through(path, s, "\u{1}\u{2} nonsense\r\n\r\n".into()).await;
    assert!(
        garbage.starts_with("HTTP/1.1 400") || garbage.is_empty(),
        "{garbage}"
    );
}

#[tokio::test]
async fn a_spent_budget_ends_the_transfer_and_refuses_the_next() {
    static BIG: [u8; 256 * 1024] = [b'x'; 256 * 1024];
    let port = destination(&BIG).await;
    for path in PATHS {
        budget_ends_the_transfer(path, port).await;
    }
}

async fn budget_ends_the_transfer(path: Path, port: u16) {
    let s = session(port, 64 * 1024);
    let cut = through(
        path,
        s.clone(),
        format!("CONNECT allowed.test:{port} HTTP/1.1\r\n\r\nGET / HTTP/1.0\r\n\r\n"),
    )
    .await;
    assert!(cut.len() < 128 * 1024, "got {} bytes", cut.len());
    assert!(s.meter.spent());
    let refused = through(
        path,
        s,
        format!("CONNECT allowed.test:{port} HTTP/1.1\r\n\r\n"),
    )
    .await;
    assert!(
        refused.starts_with("HTTP/1.1 403") && refused.contains("budget"),
        "{refused}"
    );
}

/// A destination answering with the request it received (head and a `Content-Length`
/// body) as its body, then closing.
async fn mirror() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut seen = request_head_of(&mut socket).await;
                let length = String::from_utf8_lossy(&seen)
                    .lines()
                    .find_map(|l| l.strip_prefix("Content-Length: ")?.parse::<usize>().ok())
                    .unwrap_or(0);
                let mut body = vec![0u8; length];
                socket.read_exact(&mut body).await.unwrap();
                seen.extend_from_slice(&body);
                let answer = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    seen.len()
                );
                let _ = socket.write_all(answer.as_bytes()).await;
                let _ = socket.write_all(&seen).await;
            });
        }
    });
    port
}

#[tokio::test]
async fn a_forwarded_request_arrives_in_origin_form_with_its_body_and_without_proxy_fields() {
    let port = mirror().await;
    let body = "x".repeat(300 * 1024);
    for path in PATHS {
        let s = session(port, 1 << 30);
        let got = through(
            path,
            s.clone(),
            format!(
                "POST http://allowed.test:{port}/up?x=1 HTTP/1.1\r\nHost: allowed.test:{port}\r\nProxy-Authorization: Basic c2VjcmV0\r\nProxy-Connection: keep-alive\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            ),
        )
        .await;
        let (_, received) = got.split_once("\r\n\r\n").expect("an answer");
        let expected = format!(
            "POST /up?x=1 HTTP/1.1\r\nHost: allowed.test:{port}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        assert!(
            received == expected,
            "{path:?}: {}",
            &received[..200.min(received.len())]
        );
        // Both ways, charged to the session: the request with its body and the answer.
        assert!(s.meter.used() > 2 * body.len() as u64, "{path:?}");
    }
}
