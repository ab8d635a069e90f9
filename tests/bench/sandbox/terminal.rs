//! The terminal rows: a keystroke's round trip on a session's terminal (one byte typed over
//! the WebSocket, its echo by the sandbox's pseudo-terminal read back), beside a
//! `run_command "true"` through the same agent, in the same run.

use super::{Cleanup, Client, ms, p50};
use futures::{SinkExt, StreamExt};
use std::time::{Duration, Instant};
use tokio_tungstenite::tungstenite::Message;
use wharf_integration_tests::{docker_provider, start_with};

/// Keystrokes and commands timed.
const ROUNDS: usize = 300;

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Reads the terminal's output until `needle` shows.
async fn read_until(socket: &mut Socket, needle: &[u8]) {
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !seen.windows(needle.len()).any(|w| w == needle) {
        assert!(Instant::now() < deadline, "no {needle:?} in {seen:?}");
        if let Some(Ok(Message::Binary(bytes))) = socket.next().await {
            seen.extend_from_slice(&bytes);
        }
    }
}

/// The terminal rows.
pub(super) async fn rows(cleanup: &mut Cleanup) -> Vec<(String, String)> {
    let host = start_with(vec![("docker", docker_provider())], |_| {}).await;
    let client = Client::new(&host);
    let session = client.create_session("bench-terminal").await;
    cleanup.sessions.push(session.clone());
    let url = format!(
        "{}/v1/sessions/{session}/terminal",
        host.url.replacen("http://", "ws://", 1)
    );
    let (mut socket, _) = tokio_tungstenite::connect_async(url.as_str())
        .await
        .expect("the terminal opens");
    // Wait for the shell's prompt, then type `cat` so each key is echoed and nothing runs.
    read_until(&mut socket, b"# ").await;
    socket
        .send(Message::Binary(b"cat\n".to_vec().into()))
        .await
        .expect("typed");
    read_until(&mut socket, b"cat\r\n").await;
    let mut keys = Vec::with_capacity(ROUNDS);
    for i in 0..ROUNDS + 20 {
        let key = b'a' + (i % 26) as u8;
        let t = Instant::now();
        socket
            .send(Message::Binary(vec![key].into()))
            .await
            .expect("typed");
        read_until(&mut socket, &[key]).await;
        if i >= 20 {
            keys.push(ms(t.elapsed()));
        }
    }
    drop(socket);
    let mut commands = Vec::with_capacity(ROUNDS);
    for i in 0..ROUNDS + 20 {
        let t = Instant::now();
        client.run(&session, "true").await;
        if i >= 20 {
            commands.push(ms(t.elapsed()));
        }
    }
    let (key_p50, command_p50) = (p50(&mut keys), p50(&mut commands));
    client.delete_all(&[session], cleanup).await;
    drop(host);
    vec![
        (
            format!("terminal: a keystroke's echo over the WebSocket, {ROUNDS} in a row"),
            format!("p50 {key_p50:.2} ms"),
        ),
        (
            format!("terminal: `run_command \"true\"` in the same session, {ROUNDS} in a row"),
            format!("p50 {command_p50:.2} ms"),
        ),
        (
            "ratio keystroke / command, p50".into(),
            format!("{:.2}x", key_p50 / command_p50),
        ),
    ]
}
