//! Terminals over WebSocket (docs/agents.md, "Terminals"): `GET
//! /v1/sessions/{id}/terminal` upgrades to a WebSocket on a shell (or `command`) on a
//! pseudo-terminal in the session's sandbox, or on a terminal process it already runs
//! (`pid`). Bytes both ways, as xterm.js's attach add-on and `websocat` expect: binary
//! messages from the host are the terminal's output; a client's binary or text message is
//! typed, except a text message that is exactly a resize (`{"type":"resize","cols":C,
//! "rows":R}`). The host's text messages say what happened (`opened`, `dropped`, `exit`,
//! `error`). A browser, whose WebSocket sends no `Authorization`, presents a single-use
//! `ticket` minted by `POST /v1/sessions/{id}/terminal/tickets`.

use crate::api::auth::caller_in;
use crate::api::envelope::{Envelope, Meta};
use crate::api::route_answer::PathRoute;
use crate::api::session_access::permitted_session;
use crate::config::TokenScope;
use crate::error_code::{Code, WharfError};
use crate::front_door::{Terminal, TerminalAccess, TerminalTarget, Wharf};
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{FromRequestParts as _, Path, Query, Request, State};
use axum::response::{IntoResponse, Response};
use futures::{SinkExt as _, StreamExt as _};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;
use wharf_sandbox_protocol::{MAX_CHUNK_BYTES, TerminalSize};

/// The largest message a client may send (larger input is typed in pieces of the agent's
/// largest write).
const MAX_CLIENT_MESSAGE_BYTES: usize = 1024 * 1024;
/// How long one read of the terminal's output waits for some.
const OUTPUT_WAIT_MS: u32 = 15_000;
/// A ping after this long without output, so a vanished client is noticed.
const PING_AFTER: Duration = Duration::from_secs(30);

/// Where and how big.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TerminalQuery {
    /// A ticket from `POST /v1/sessions/{id}/terminal/tickets` (instead of a token).
    pub ticket: Option<String>,
    /// Columns (1–1000, default 80).
    pub cols: Option<u16>,
    /// Rows (1–1000, default 24).
    pub rows: Option<u16>,
    /// A terminal process of the session's to attach to, instead of a new shell.
    pub pid: Option<u32>,
    /// A command line to run on the new terminal instead of the shell.
    pub command: Option<String>,
}

/// A minted ticket.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct TicketReply {
    /// Present it once as `?ticket=`.
    pub ticket: String,
    /// The terminal's path with the ticket in its query (relative to this host).
    pub path: String,
    /// When it stops working, Unix seconds (30 s after it was minted).
    pub expires_at: u64,
}

/// A control message from the client.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
enum ClientControl {
    Resize { cols: u16, rows: u16 },
}

/// What the host says besides the output.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum HostEvent {
    /// The terminal is open: its process (attach to it again with `?pid=`).
    Opened { pid: u32 },
    /// Output older than what was read was dropped from the agent's buffer (a slow reader).
    Dropped { bytes: u64 },
    /// The process ended; the socket closes next.
    Exit { exit_code: Option<i32> },
    /// The terminal failed; the socket closes next.
    Error { code: u32, message: String },
}

fn event_message(event: &HostEvent) -> Message {
    Message::Text(serde_json::to_string(event).unwrap_or_default().into())
}

/// `POST /v1/sessions/{id}/terminal/tickets`.
pub async fn mint_ticket(r: PathRoute) -> Envelope {
    r.answer_on_session(TokenScope::Call, async {
        let minted = r.wharf.terminal_ticket(r.session_tenant(), &r.id).await?;
        Ok(TicketReply {
            path: format!("/v1/sessions/{}/terminal?ticket={}", r.id, minted.ticket),
            ticket: minted.ticket,
            expires_at: minted.expires_at_s,
        })
    })
    .await
}

/// `GET /v1/sessions/{id}/terminal`.
pub async fn open(
    State(wharf): State<Arc<Wharf>>,
    Path(id): Path<String>,
    request: Request,
) -> Response {
    match upgrade(&wharf, &id, request).await {
        Ok(response) => response,
        Err(e) => Envelope::error(e, Meta::default()).into_response(),
    }
}

async fn upgrade(wharf: &Arc<Wharf>, id: &str, request: Request) -> Result<Response, WharfError> {
    let (mut parts, _) = request.into_parts();
    let Query(query) = Query::<TerminalQuery>::try_from_uri(&parts.uri)
        .map_err(|e| WharfError::new(Code::InvalidInput, e.body_text()))?;
    // A caller the request authenticates (a token, or anyone on an open host) needs no
    // ticket; one that does not must bring a ticket.
    let caller = match (caller_in(&parts.extensions), &query.ticket) {
        (Ok(caller), _) => {
            caller.require(TokenScope::Call)?;
            permitted_session(wharf, &caller, id).await?;
            Some(caller)
        }
        (Err(_), Some(ticket)) => {
            wharf.check_terminal_ticket(id, ticket).await?;
            None
        }
        (Err(refused), None) => return Err(refused),
    };
    let ws = WebSocketUpgrade::from_request_parts(&mut parts, &())
        .await
        .map_err(|e| {
            WharfError::new(
                Code::InvalidRequest,
                format!("this route opens a WebSocket: {}", e.body_text()),
            )
        })?;
    let access = match (&caller, query.ticket.as_deref()) {
        (Some(caller), _) => TerminalAccess::Tenant(caller.session_tenant()),
        // Without a caller the request has a ticket (checked above); "" never verifies.
        (None, ticket) => TerminalAccess::Ticket(ticket.unwrap_or_default()),
    };
    let target = match query.pid {
        Some(pid) if query.command.is_none() => TerminalTarget::Attach { pid },
        Some(_) => {
            return Err(WharfError::new(
                Code::InvalidInput,
                "name a process to attach to (`pid`) or a command to start, not both",
            ));
        }
        None => TerminalTarget::New {
            command: query.command.clone(),
        },
    };
    let size = TerminalSize {
        cols: query.cols.unwrap_or(80),
        rows: query.rows.unwrap_or(24),
    };
    let terminal = wharf.open_terminal(access, id, target, size).await?;
    tracing::info!(target: "wharf::audit", event = "terminal_open", session = %id, pid = terminal.pid, ticket = caller.is_none());
    let stop = wharf.shutdown_token().clone();
    Ok(ws
        .max_message_size(MAX_CLIENT_MESSAGE_BYTES)
        .on_upgrade(move |socket| serve(socket, terminal, stop)))
}

/// Relays until the process ends, the client goes, or the host stops; then hangs up a
/// terminal this connection started.
async fn serve(socket: WebSocket, terminal: Terminal, stop: tokio_util::sync::CancellationToken) {
    let (mut to_client, mut from_client) = socket.split();
    let terminal = &terminal;
    let output = async move {
        let reason = relay_output(terminal, &mut to_client).await;
        let close = CloseFrame {
            code: 1000,
            reason: reason.into(),
        };
        let _ = to_client.send(Message::Close(Some(close))).await;
    };
    let input = async {
        while let Some(Ok(message)) = from_client.next().await {
            let typed = match message {
                Message::Binary(bytes) => bytes.to_vec(),
                Message::Text(text) => match serde_json::from_str::<ClientControl>(&text) {
                    Ok(ClientControl::Resize { cols, rows }) => {
                        if let Err(e) = terminal.resize(TerminalSize { cols, rows }).await {
                            tracing::debug!(pid = terminal.pid, "terminal resize: {e}");
                        }
                        continue;
                    }
                    Err(_) => text.as_bytes().to_vec(),
                },
                Message::Close(_) => break,
                Message::Ping(_) | Message::Pong(_) => continue,
            };
            for piece in typed.chunks(MAX_CHUNK_BYTES as usize) {
                if let Err(e) = terminal.write(piece.to_vec()).await {
                    tracing::debug!(pid = terminal.pid, "terminal input: {e}");
                }
            }
        }
    };
    tokio::select! {
        _ = output => {}
        _ = input => {}
        _ = stop.cancelled() => {}
    }
    terminal.hang_up().await;
    tracing::info!(target: "wharf::audit", event = "terminal_close", pid = terminal.pid);
}

/// Sends the terminal's output until it ends; why it stopped (the close frame's reason).
async fn relay_output(
    terminal: &Terminal,
    to_client: &mut futures::stream::SplitSink<WebSocket, Message>,
) -> &'static str {
    if to_client
        .send(event_message(&HostEvent::Opened { pid: terminal.pid }))
        .await
        .is_err()
    {
        return "client gone";
    }
    let mut offset = terminal.first_offset;
    let mut quiet_since = tokio::time::Instant::now();
    loop {
        let chunk = match terminal.read(offset, MAX_CHUNK_BYTES, OUTPUT_WAIT_MS).await {
            Ok(chunk) => chunk,
            Err(e) => {
                let event = HostEvent::Error {
                    code: e.code.as_u32(),
                    message: e.message.clone(),
                };
                let _ = to_client.send(event_message(&event)).await;
                return "terminal failed";
            }
        };
        if chunk.dropped > 0 {
            let event = HostEvent::Dropped {
                bytes: chunk.dropped,
            };
            if to_client.send(event_message(&event)).await.is_err() {
                return "client gone";
            }
        }
        offset = chunk.offset.saturating_add(chunk.data.len() as u64);
        let sent = if chunk.data.is_empty() {
            if quiet_since.elapsed() < PING_AFTER {
                Ok(())
            } else {
                quiet_since = tokio::time::Instant::now();
                to_client.send(Message::Ping(Default::default())).await
            }
        } else {
            quiet_since = tokio::time::Instant::now();
            to_client.send(Message::Binary(chunk.data.into())).await
        };
        if sent.is_err() {
            return "client gone";
        }
        if !chunk.process.running && offset >= chunk.process.output_bytes {
            let event = HostEvent::Exit {
                exit_code: chunk.process.exit_code,
            };
            let _ = to_client.send(event_message(&event)).await;
            return "exited";
        }
    }
}
