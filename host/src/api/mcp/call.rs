//! `tools/call` over MCP: translate the call into a front-door `Invocation` (the session
//! key's session is acquired when the tool needs one), run it while sending progress about
//! once a second, each piece of output the call streams (a command's stdout and stderr,
//! as the progress message) and each progress report of the backend's, and drop it when the
//! client cancels (after telling it, and a grace of a second for a backend that waits in
//! an import).
//!
//! The session key is, in order: the `X-Wharf-Session-Key` HTTP header, the call's
//! `_meta["wharf/session_key"]`, the MCP session id. Acquiring is idempotent per key, so a
//! client that reconnects with the same key gets the same session (and sandbox) back.

use crate::api::auth::Caller;
use crate::call_output::{CallEvent, OutputSink, ProgressReport};
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
/// How long a cancelled call may go on, so a backend waiting in an import can tell what it
/// waits on (the bridge's MCP server gets `notifications/cancelled`); then it is dropped.
const CANCEL_GRACE: Duration = Duration::from_secs(1);

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
/// fires (then `None`: the call is told, and dropped a moment later, which discards its
/// Wasm instance and kills its exec), reporting `progress` about once a second when there is a token to report to.
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
    let gave_up = CancellationToken::new();
    // Output pieces go out as progress, so only a client that sent a token gets them.
    let (output, events) = match progress {
        Some(_) => {
            let (sink, events) = OutputSink::channel();
            (Some(sink), Some(events))
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
        cancel: Some(gave_up.clone()),
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
    let outcome = drive(work, cancel, &gave_up, progress, events).await?;
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
/// runs, one per piece of output it streams and one per report of the backend's own (when
/// the client asked with a progress token). See [`ProgressValues`] for the numbers. `None`
/// when `cancel` fired: `gave_up` tells the call, which gets [`CANCEL_GRACE`] to end
/// before `work` is dropped.
async fn drive<T>(
    work: impl Future<Output = T>,
    cancel: &CancellationToken,
    gave_up: &CancellationToken,
    progress: Option<Progress<'_>>,
    mut events: Option<tokio::sync::mpsc::Receiver<CallEvent>>,
) -> Option<T> {
    let mut work = std::pin::pin!(work);
    let started = tokio::time::Instant::now();
    let mut ticks = tokio::time::interval_at(started + PROGRESS_EVERY, PROGRESS_EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut values = ProgressValues::default();
    loop {
        let (value, total, message) = tokio::select! {
            biased;
            _ = cancel.cancelled() => {
                gave_up.cancel();
                let _ = tokio::time::timeout(CANCEL_GRACE, &mut work).await;
                return None;
            }
            Some(event) = async { events.as_mut()?.recv().await }, if events.is_some() => {
                match event {
                    CallEvent::Output(piece) => {
                        (values.host_event(), None, Some(String::from_utf8_lossy(&piece.data).into_owned()))
                    }
                    CallEvent::Progress(report) => {
                        let (value, total) = values.backend_report(&report);
                        (value, total, report.message)
                    }
                }
            }
            out = &mut work => return Some(out),
            _ = ticks.tick(), if progress.is_some() && !values.backend_reports() => {
                (values.host_event(), None, Some(format!("running for {} s", started.elapsed().as_secs())))
            }
        };
        if let Some(Progress { token, peer }) = &progress {
            let mut report = ProgressNotificationParam::new(token.clone(), value);
            report.total = total;
            report.message = message;
            // Boxed: rmcp's send future is KBs, and inline it would be part of every
            // call's future, progress or not.
            if let Err(e) = Box::pin(peer.notify_progress(report)).await {
                tracing::debug!("progress notification not sent: {e}");
            }
        }
    }
}

/// The numbers of a call's progress notifications, which MCP wants to grow with each one.
/// The host's own (the once-a-second tick, a piece of output) count up by one; once the
/// backend reports its own progress, its numbers are sent shifted by the count so far
/// (`total` too, so the last report still reads as done), and the tick stops: the
/// backend's reports are then what says the call is alive.
#[derive(Debug, Default)]
struct ProgressValues {
    /// Notifications the host made up itself.
    host: f64,
    /// The backend's last report, once it has made one.
    backend: Option<f64>,
}

impl ProgressValues {
    /// Whether the backend reports its own progress.
    fn backend_reports(&self) -> bool {
        self.backend.is_some()
    }

    /// The value of a notification the host makes up.
    fn host_event(&mut self) -> f64 {
        self.host += 1.0;
        self.host + self.backend.unwrap_or(0.0)
    }

    /// The value and total of the backend's `report` (the import keeps its numbers growing).
    fn backend_report(&mut self, report: &ProgressReport) -> (f64, Option<f64>) {
        if self.backend.is_none() {
            // A first report of 0 must still say more than the host's last notification.
            self.host += 1.0;
        }
        self.backend = Some(report.progress);
        (
            self.host + report.progress,
            report.total.map(|t| self.host + t),
        )
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

#[cfg(test)]
mod tests {
    use super::*;

    fn report(progress: f64, total: Option<f64>) -> ProgressReport {
        ProgressReport {
            progress,
            total,
            message: None,
        }
    }

    #[test]
    fn progress_values_grow_whoever_sends_them_and_the_last_report_reads_done() {
        let mut v = ProgressValues::default();
        let mut sent = vec![v.host_event(), v.host_event()];
        assert!(!v.backend_reports());
        let (first, total) = v.backend_report(&report(0.0, Some(3.0)));
        assert_eq!(total, Some(6.0));
        assert!(v.backend_reports());
        sent.push(first);
        sent.push(v.host_event());
        let (last, total) = v.backend_report(&report(3.0, Some(3.0)));
        sent.push(last);
        assert!(sent.windows(2).all(|w| w[1] > w[0]), "{sent:?}");
        assert_eq!(Some(last), total);
    }
}
