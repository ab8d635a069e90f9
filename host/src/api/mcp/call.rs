//! `tools/call` over MCP: translate the call into a front-door `Invocation` (the session
//! key's session is acquired when the tool needs one), run it while sending progress about
//! once a second and each piece of output the call streams (a command's stdout and stderr,
//! as the progress message), and drop it the moment the client cancels.
//!
//! The session key is, in order: the `X-Wharf-Session-Key` HTTP header, the call's
//! `_meta["wharf/session_key"]`, the MCP session id. Acquiring is idempotent per key, so a
//! client that reconnects with the same key gets the same session (and sandbox) back.

use crate::api::auth::Caller;
use crate::call_output::{OutputPiece, OutputSink};
use crate::config::TokenScope;
use crate::error_code::{Code, WharfError};
use crate::front_door::{CallOutcome, Invocation, SessionChoice, Wharf, WhenMissing};
use crate::tool::Attachment;
use base64::Engine as _;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ContentBlock, ErrorCode, MetaObject,
    ProgressNotificationParam, ProgressToken, ResourceContents,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

/// The HTTP header naming the session key.
pub const SESSION_KEY_HEADER: &str = "x-wharf-session-key";
/// The `_meta` entry of a call naming the session key.
pub const SESSION_KEY_META: &str = "wharf/session_key";
/// The HTTP header carrying the MCP session id.
pub const MCP_SESSION_HEADER: &str = "mcp-session-id";
/// How often a running call reports progress (the first report comes after this long).
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// Runs one `tools/call` that came through rmcp's session worker. Tool failures come back
/// as results with `isError`; a tool that does not resolve is a JSON-RPC invalid-params
/// error.
pub async fn call_tool(
    wharf: &Arc<Wharf>,
    request: CallToolRequestParams,
    context: RequestContext<RoleServer>,
) -> Result<CallToolResult, ErrorData> {
    let parts = context.extensions.get::<http::request::Parts>();
    let caller = caller_of(parts);
    let key = session_key(parts, &context.meta);
    let progress = context.meta.get_progress_token().map(|token| Progress {
        token,
        peer: &context.peer,
    });
    // rmcp sends nothing for a request the client cancelled; this error is never seen.
    run(wharf, caller, key, request, &context.ct, progress)
        .await
        .unwrap_or_else(|| {
            Err(ErrorData::new(
                ErrorCode::INTERNAL_ERROR,
                "the call was cancelled",
                None,
            ))
        })
}

/// Where a running call reports progress: the client's token and the MCP session's peer.
pub struct Progress<'a> {
    /// The token the client sent in `_meta.progressToken`.
    pub token: ProgressToken,
    /// The MCP session the reports go to.
    pub peer: &'a rmcp::Peer<RoleServer>,
}

/// Runs one `tools/call` for `caller` under the session `key`, until it ends or `cancel`
/// fires (then `None`: the call is dropped, which discards its Wasm instance and kills its
/// exec), reporting `progress` about once a second when there is a token to report to.
pub async fn run(
    wharf: &Arc<Wharf>,
    caller: Result<Caller, WharfError>,
    key: Option<String>,
    request: CallToolRequestParams,
    cancel: &CancellationToken,
    progress: Option<Progress<'_>>,
) -> Option<Result<CallToolResult, ErrorData>> {
    let caller = match caller.and_then(|c| c.require(TokenScope::Call).map(|()| c)) {
        Ok(c) => c,
        Err(e) => return Some(Ok(failure(&e))),
    };
    let (span, trace_id) = crate::telemetry::request_span("mcp.tools/call", &caller.name);
    // Output pieces go out as progress, so only a client that sent a token gets them.
    let (output, pieces) = match progress {
        Some(_) => {
            let (sink, pieces) = OutputSink::channel();
            (Some(sink), Some(pieces))
        }
        None => (None, None),
    };
    let invocation = Invocation {
        session: key.map_or(SessionChoice::None, |key| SessionChoice::Key {
            key,
            missing: WhenMissing::Create,
        }),
        trace_id: Some(trace_id),
        output,
        ..Invocation::new(
            caller.principal(),
            request.name.to_string(),
            Value::Object(request.arguments.unwrap_or_default()),
            missing_session,
        )
    };
    // Boxed: the front door's future is about 4 KB, and an async fn keeps both its argument
    // and the pinned local, so inline it would be copied into every future up the stack.
    let work = Box::pin(wharf.invoke(invocation).instrument(span));
    let outcome = drive(work, cancel, progress, pieces).await?;
    Some(match outcome {
        Ok(outcome) => Ok(success(outcome)),
        // A name that resolves to no tool is the request's fault, not the tool's.
        Err((e, place)) if place.tool.is_none() && e.code == Code::InvalidRequest => {
            Err(ErrorData::invalid_params(e.message, e.data))
        }
        Err((e, _)) => Ok(failure(&e)),
    })
}

/// The refusal of a tool that needs a session when the call names none.
fn missing_session(tool: &str) -> WharfError {
    WharfError::session_not_found(format!(
        "`{tool}` needs a session and this request has none (no MCP session: the 2026-07-28 revision is stateless): \
         name one with the X-Wharf-Session-Key header or `_meta[\"{SESSION_KEY_META}\"]`; the same key gives the same session"
    ))
}

/// Who is calling: the [`Caller`] the auth middleware put into the HTTP request.
pub fn caller_of(parts: Option<&http::request::Parts>) -> Result<Caller, WharfError> {
    match parts {
        Some(parts) => crate::api::auth::caller_in(&parts.extensions),
        None => Err(WharfError::new(
            crate::error_code::Code::Unauthorized,
            "the request was not authenticated",
        )),
    }
}

/// The caller's session key: header, then `_meta`, then the MCP session id.
pub fn session_key(parts: Option<&http::request::Parts>, meta: &MetaObject) -> Option<String> {
    let header = |name: &str| {
        parts
            .and_then(|p| p.headers.get(name))
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_string)
    };
    let meta = || {
        meta.get(SESSION_KEY_META)
            .and_then(Value::as_str)
            .filter(|v| !v.is_empty())
            .map(str::to_string)
    };
    header(SESSION_KEY_HEADER)
        .or_else(meta)
        .or_else(|| header(MCP_SESSION_HEADER))
}

/// Polls `work` to the end, sending `notifications/progress` about once a second while it
/// runs and one per piece of output it streams (when the client asked with a progress
/// token). Progress counts the notifications sent, so it only grows. `None` when `cancel`
/// fired: `work` is dropped on the spot.
async fn drive<T>(
    work: impl Future<Output = T>,
    cancel: &CancellationToken,
    progress: Option<Progress<'_>>,
    mut pieces: Option<tokio::sync::mpsc::Receiver<OutputPiece>>,
) -> Option<T> {
    let mut work = std::pin::pin!(work);
    let started = tokio::time::Instant::now();
    let mut ticks = tokio::time::interval_at(started + PROGRESS_EVERY, PROGRESS_EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut sent = 0u64;
    loop {
        let message = tokio::select! {
            biased;
            _ = cancel.cancelled() => return None,
            Some(piece) = async { pieces.as_mut()?.recv().await }, if pieces.is_some() => {
                String::from_utf8_lossy(&piece.data).into_owned()
            }
            out = &mut work => return Some(out),
            _ = ticks.tick(), if progress.is_some() => {
                format!("running for {} s", started.elapsed().as_secs())
            }
        };
        if let Some(Progress { token, peer }) = &progress {
            sent += 1;
            let report =
                ProgressNotificationParam::new(token.clone(), sent as f64).with_message(message);
            // Boxed: rmcp's send future is KBs, and inline it would be part of every
            // call's future, progress or not.
            if let Err(e) = Box::pin(peer.notify_progress(report)).await {
                tracing::debug!("progress notification not sent: {e}");
            }
        }
    }
}

/// A successful call: the result as structured content and as JSON text, attachments as
/// images or embedded blobs, and where it ran in `_meta`.
fn success(outcome: CallOutcome) -> CallToolResult {
    let result = outcome.result;
    let text = serde_json::to_string(&result.content).unwrap_or_else(|_| "null".into());
    let mut content = vec![ContentBlock::text(text)];
    content.extend(result.attachments.iter().map(attachment));
    let mut reply = CallToolResult::success(content);
    reply.structured_content = Some(super::tool_list::structured(result.content));
    let mut meta = json!({ "wharf/tool": outcome.tool, "wharf/backend": outcome.backend, "wharf/session_id": outcome.session_id });
    if outcome.resumed {
        meta["wharf/resumed"] = Value::Bool(true);
    }
    if let Value::Object(meta) = meta {
        reply.meta = Some(MetaObject(meta));
    }
    reply
}

/// An attachment as MCP content: `image/*` as an image, anything else as a blob resource.
fn attachment(a: &Attachment) -> ContentBlock {
    let data = base64::engine::general_purpose::STANDARD.encode(&a.data);
    if a.mime_type.starts_with("image/") {
        ContentBlock::image(data, a.mime_type.clone())
    } else {
        ContentBlock::resource(
            ResourceContents::blob(data, format!("attachment:{}", a.name))
                .with_mime_type(a.mime_type.clone()),
        )
    }
}

/// A failed call: `isError` with `"<code>: <message>"`.
fn failure(e: &WharfError) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(format!(
        "{}: {}",
        e.code.as_u32(),
        e.message
    ))])
}
