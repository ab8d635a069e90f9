//! Terminals over WebSocket (docs/agents.md, "Terminals"), against a real host, real Docker
//! and a shell on a pseudo-terminal in a docker-provider sandbox, through the sandbox
//! agent: a client types, reads and resizes; a second connection attaches to the same
//! terminal; a single-use ticket opens it without a token; another tenant, a used, foreign,
//! tampered or absent ticket, and hostile sizes and commands are refused.

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use std::time::Duration;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::{self, Message};
use wharf_integration_tests::{TestHost, docker_host_for, docker_ready, remove_backend_containers};

const ALICE: &str = "alice-token";
const BOB: &str = "bob-token";

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn host(backend: &str) -> TestHost {
    docker_host_for(backend, &[("alice", ALICE), ("bob", BOB)]).await
}

async fn api(
    h: &TestHost,
    bearer: &str,
    method: reqwest::Method,
    path: &str,
    body: Value,
) -> Value {
    reqwest::Client::new()
        .request(method, format!("{}{path}", h.url))
        .bearer_auth(bearer)
        .json(&body)
        .send()
        .await
        .expect("the API answers")
        .json()
        .await
        .expect("JSON")
}

async fn new_session(h: &TestHost, backend: &str) -> String {
    let created = api(
        h,
        ALICE,
        reqwest::Method::POST,
        "/v1/sessions",
        json!({"backend": backend}),
    )
    .await;
    assert_eq!(created["code"], 0, "{created}");
    created["data"]["id"].as_str().expect("an id").to_string()
}

async fn call(h: &TestHost, session: &str, tool: &str, args: Value) -> Value {
    let reply = api(
        h,
        ALICE,
        reqwest::Method::POST,
        "/v1/call",
        json!({"tool": tool, "args": args, "session_id": session}),
    )
    .await;
    assert_eq!(reply["code"], 0, "{tool}: {reply}");
    reply["data"]["result"].clone()
}

/// Opens `path_and_query` as a WebSocket, with a bearer token when given; the refusal's
/// HTTP status and envelope otherwise.
async fn connect(
    h: &TestHost,
    path_and_query: &str,
    bearer: Option<&str>,
) -> Result<Socket, (u16, Value)> {
    let url = format!("{}{path_and_query}", h.url.replacen("http://", "ws://", 1));
    let mut request = url.into_client_request().expect("a request");
    if let Some(bearer) = bearer {
        request.headers_mut().insert(
            "authorization",
            format!("Bearer {bearer}").parse().expect("a header"),
        );
    }
    match tokio_tungstenite::connect_async(request).await {
        Ok((socket, _)) => Ok(socket),
        Err(tungstenite::Error::Http(response)) => {
            let status = response.status().as_u16();
            let body = response.body().clone().unwrap_or_default();
            Err((status, serde_json::from_slice(&body).unwrap_or(Value::Null)))
        }
        Err(other) => panic!("the handshake failed: {other}"),
    }
}

/// What a terminal said so far: its output (as text) and its events.
#[derive(Default)]
struct Transcript {
    output: String,
    events: Vec<Value>,
    closed: bool,
}

/// Reads until `done` holds of what was read (or 20 s pass: a failure).
async fn read_until(
    socket: &mut Socket,
    seen: &mut Transcript,
    done: impl Fn(&Transcript) -> bool,
) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !done(seen) {
        let next = tokio::time::timeout_at(deadline, socket.next())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "timed out; output so far: {:?}, events: {:?}",
                    seen.output, seen.events
                )
            });
        match next {
            Some(Ok(Message::Binary(bytes))) => {
                seen.output.push_str(&String::from_utf8_lossy(&bytes))
            }
            Some(Ok(Message::Text(text))) => seen
                .events
                .push(serde_json::from_str(&text).expect("a JSON event")),
            Some(Ok(Message::Close(_))) | None => {
                seen.closed = true;
                assert!(
                    done(seen),
                    "closed early; output: {:?}, events: {:?}",
                    seen.output,
                    seen.events
                );
                return;
            }
            Some(Ok(_)) => {}
            Some(Err(e)) => panic!("the socket failed: {e}"),
        }
    }
}

fn opened_pid(seen: &Transcript) -> Option<u64> {
    seen.events
        .iter()
        .find(|e| e["type"] == "opened")
        .and_then(|e| e["pid"].as_u64())
}

async fn type_line(socket: &mut Socket, line: &str) {
    socket
        .send(Message::Text(format!("{line}\n").into()))
        .await
        .expect("typed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminal_runs_a_shell_that_is_typed_to_read_and_resized() {
    if !docker_ready() {
        return;
    }
    remove_backend_containers("term-shell");
    let h = host("term-shell").await;
    let session = new_session(&h, "term-shell").await;
    let path = format!("/v1/sessions/{session}/terminal?cols=100&rows=30");
    let mut socket = connect(&h, &path, Some(ALICE)).await.expect("opened");
    let mut seen = Transcript::default();
    read_until(&mut socket, &mut seen, |s| opened_pid(s).is_some()).await;

    // Typed as text, as xterm.js's attach add-on sends keys; the echo shows `$((6*7))`.
    type_line(&mut socket, "echo term-$((6*7)) && stty size").await;
    read_until(&mut socket, &mut seen, |s| s.output.contains("term-42")).await;
    read_until(&mut socket, &mut seen, |s| s.output.contains("30 100")).await;

    socket
        .send(Message::Text(
            json!({"type": "resize", "cols": 132, "rows": 43})
                .to_string()
                .into(),
        ))
        .await
        .expect("resized");
    // Binary input is typed as well.
    socket
        .send(Message::Binary(b"stty size\n".to_vec().into()))
        .await
        .expect("typed");
    read_until(&mut socket, &mut seen, |s| s.output.contains("43 132")).await;

    // A text message that is JSON but not a resize is typed, as any other.
    for piece in ["echo ", r#"{"type":"typed-json"}"#, "\n"] {
        socket
            .send(Message::Text(piece.to_string().into()))
            .await
            .expect("typed");
    }
    read_until(&mut socket, &mut seen, |s| {
        s.output.contains("{type:typed-json}")
    })
    .await;

    type_line(&mut socket, "exit 3").await;
    read_until(&mut socket, &mut seen, |s| s.closed).await;
    let exit = seen
        .events
        .iter()
        .find(|e| e["type"] == "exit")
        .expect("an exit event");
    assert_eq!(exit["exit_code"], 3, "{:?}", seen.events);
    remove_backend_containers("term-shell");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_connection_attaches_and_a_hang_up_ends_only_what_it_started() {
    if !docker_ready() {
        return;
    }
    remove_backend_containers("term-attach");
    let h = host("term-attach").await;
    let session = new_session(&h, "term-attach").await;
    let base = format!("/v1/sessions/{session}/terminal");
    let mut first = connect(&h, &base, Some(ALICE)).await.expect("opened");
    let mut seen = Transcript::default();
    read_until(&mut first, &mut seen, |s| opened_pid(s).is_some()).await;
    let pid = opened_pid(&seen).expect("a pid");
    type_line(&mut first, "echo marker-$((1+1))").await;
    read_until(&mut first, &mut seen, |s| s.output.contains("marker-2")).await;

    // The second sees what was written before it came (the replay), then what follows.
    let mut second = connect(&h, &format!("{base}?pid={pid}"), Some(ALICE))
        .await
        .expect("attached");
    let mut also = Transcript::default();
    read_until(&mut second, &mut also, |s| s.output.contains("marker-2")).await;
    type_line(&mut second, "echo from-$((2+1))").await;
    read_until(&mut first, &mut seen, |s| s.output.contains("from-3")).await;
    second.close(None).await.expect("closed");
    drop(second);

    // Closing the attached connection left the shell running.
    type_line(&mut first, "echo still-$((3+1))").await;
    read_until(&mut first, &mut seen, |s| s.output.contains("still-4")).await;

    // A process that is not on a terminal cannot be attached to.
    let plain = call(
        &h,
        &session,
        "term-attach:start_process",
        json!({"command": "sleep 300"}),
    )
    .await;
    let plain_pid = plain["pid"].as_u64().expect("a pid");
    let (status, refusal) = connect(&h, &format!("{base}?pid={plain_pid}"), Some(ALICE))
        .await
        .expect_err("refused");
    assert_eq!(
        (status, refusal["code"].clone()),
        (400, json!(4002)),
        "{refusal}"
    );
    let (_, refusal) = connect(&h, &format!("{base}?pid=999999"), Some(ALICE))
        .await
        .expect_err("refused");
    assert_eq!(refusal["code"], 4002, "{refusal}");

    // Closing the connection that started the shell hangs it up.
    first.close(None).await.expect("closed");
    drop(first);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let listed = call(&h, &session, "term-attach:list_processes", json!({})).await;
        let shell = listed["processes"]
            .as_array()
            .or(listed.as_array())
            .and_then(|all| all.iter().find(|p| p["pid"].as_u64() == Some(pid)).cloned())
            .unwrap_or_else(|| panic!("the shell is listed: {listed}"));
        if shell["running"] == false {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the shell still runs: {shell}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    remove_backend_containers("term-attach");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ticket_opens_its_session_terminal_once_and_other_tenants_are_refused() {
    if !docker_ready() {
        return;
    }
    remove_backend_containers("term-ticket");
    let h = host("term-ticket").await;
    let session = new_session(&h, "term-ticket").await;
    let other = new_session(&h, "term-ticket").await;
    assert_ne!(session, other);
    let tickets = format!("/v1/sessions/{session}/terminal/tickets");
    let post = reqwest::Method::POST;

    // Another tenant can neither mint a ticket nor open the terminal.
    let refused = api(&h, BOB, post.clone(), &tickets, json!({})).await;
    assert_eq!(refused["code"], 4007, "{refused}");
    let base = format!("/v1/sessions/{session}/terminal");
    let (status, refusal) = connect(&h, &base, Some(BOB)).await.expect_err("refused");
    assert_eq!((status, refusal["code"].clone()), (404, json!(4007)));
    // No token and no ticket; a token that is no one's.
    let (status, _) = connect(&h, &base, None).await.expect_err("refused");
    assert_eq!(status, 401);
    let (status, _) = connect(&h, &base, Some("nobody"))
        .await
        .expect_err("refused");
    assert_eq!(status, 401);

    let minted = api(&h, ALICE, post.clone(), &tickets, json!({})).await;
    assert_eq!(minted["code"], 0, "{minted}");
    let ticket = minted["data"]["ticket"]
        .as_str()
        .expect("a ticket")
        .to_string();
    let path = minted["data"]["path"].as_str().expect("a path").to_string();
    assert_eq!(path, format!("{base}?ticket={ticket}"));

    // The ticket is for this session only, and a tampered one is nobody's.
    let foreign = format!("/v1/sessions/{other}/terminal?ticket={ticket}");
    let (status, refusal) = connect(&h, &foreign, None).await.expect_err("refused");
    assert_eq!(
        (status, refusal["code"].clone()),
        (401, json!(4010)),
        "{refusal}"
    );
    let last = ticket.chars().last().expect("a character");
    let flipped = format!(
        "{}{}",
        &ticket[..ticket.len() - 1],
        if last == '0' { '1' } else { '0' }
    );
    let (status, _) = connect(&h, &format!("{base}?ticket={flipped}"), None)
        .await
        .expect_err("refused");
    assert_eq!(status, 401);

    // With no token at all, the ticket opens the terminal, once.
    let mut socket = connect(&h, &path, None).await.expect("the ticket opens it");
    let mut seen = Transcript::default();
    type_line(&mut socket, "echo ticket-$((5*5))").await;
    read_until(&mut socket, &mut seen, |s| s.output.contains("ticket-25")).await;
    let (status, refusal) = connect(&h, &path, None).await.expect_err("used");
    assert_eq!(status, 401, "a used ticket: {refusal}");
    assert!(
        refusal["message"]
            .as_str()
            .unwrap_or("")
            .contains("already used"),
        "{refusal}"
    );
    drop(socket);
    remove_backend_containers("term-ticket");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_terminal_requests_get_clear_refusals() {
    if !docker_ready() {
        return;
    }
    remove_backend_containers("term-hostile");
    let h = host("term-hostile").await;
    let session = new_session(&h, "term-hostile").await;
    let base = format!("/v1/sessions/{session}/terminal");
    let long = "x".repeat(5000);
    for (query, code) in [
        ("?cols=0", 4000),
        ("?rows=1001", 4000),
        ("?cols=70000", 4000),
        ("?cols=-1", 4000),
        ("?pid=1&command=sh", 4000),
        ("?unknown=1", 4000),
        (&format!("?command={long}") as &str, 4000),
    ] {
        let (_, refusal) = connect(&h, &format!("{base}{query}"), Some(ALICE))
            .await
            .err()
            .unwrap_or_else(|| panic!("{query} opened a terminal"));
        assert_eq!(refusal["code"], code, "{query}: {refusal}");
    }
    // Without a token, a ticket that is not one.
    for query in ["?ticket=", "?ticket=1.2.3", "?ticket=a.b.c.d"] {
        let (status, refusal) = connect(&h, &format!("{base}{query}"), None)
            .await
            .err()
            .unwrap_or_else(|| panic!("{query} opened a terminal"));
        assert_eq!(
            (status, refusal["code"].clone()),
            (401, json!(4010)),
            "{query}: {refusal}"
        );
    }
    // A plain GET (no upgrade) is told this is a WebSocket.
    let plain = reqwest::Client::new()
        .get(format!("{}{base}", h.url))
        .bearer_auth(ALICE)
        .send()
        .await
        .expect("answered");
    assert_eq!(plain.status().as_u16(), 400);
    let body: Value = plain.json().await.expect("JSON");
    assert_eq!(body["code"], 4002, "{body}");
    assert!(
        body["message"].as_str().unwrap_or("").contains("WebSocket"),
        "{body}"
    );
    // An unknown session.
    let (status, _) = connect(&h, "/v1/sessions/ses_nope/terminal", Some(ALICE))
        .await
        .expect_err("refused");
    assert_eq!(status, 404);
    remove_backend_containers("term-hostile");
}
