//! The console's live calls (`/console/calls`): tool calls as they end, streamed to the
//! page as server-sent events (`/console/calls/stream`) from the front door's live view —
//! tool, tenant, session, code and duration, never arguments. A `read` viewer sees its own
//! tenant's calls, an admin every tenant's, each only of backends its token may use. Codes
//! link to the code table (`/console/codes`).

use super::pages::{html, layout};
use super::{Console, NoViewer, Viewer};
use crate::error_code::Code;
use crate::live_calls::LiveCall;
use crate::tenant::Tenant;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt as _;
use maud::html;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast::error::{RecvError, TryRecvError};

/// How often a watching page's console session is checked again (a logout, an expired or
/// withdrawn token ends its stream).
const RECHECK_EVERY: Duration = Duration::from_secs(30);

/// `GET /console/calls`.
pub async fn page(viewer: Viewer) -> Response {
    let body = html! {
        h1 { "Live calls" }
        p { "Tool calls as they end: "
            @if viewer.admin() { "every tenant's" } @else { "your tenant's" }
            ", newest first (the last 200). Arguments are never shown." }
        p { input #calls-filter type="search" placeholder="Filter: tool, tenant, session, code" aria-label="Filter";
            " " span #calls-status { "Connecting…" } }
        table #calls {
            thead { tr {
                th { "Ended" } th { "Tool" } th { "Tenant" } th { "Session" } th { "Code" } th { "Duration" }
            } }
            tbody {}
        }
        script src="/console/calls.js" defer {}
    };
    html(StatusCode::OK, layout("Live calls", Some(&viewer), body))
}

/// `GET /console/codes`: the code table the calls link to.
pub async fn codes(viewer: Viewer) -> Response {
    let body = html! {
        h1 { "Codes" }
        table.codes {
            thead { tr { th { "Code" } th { "HTTP" } th { "Meaning" } } }
            tbody {
                @for code in Code::all() {
                    tr id={ "code-" (code.as_u32()) } {
                        td { (code.as_u32()) } td { (code.http_status()) } td { (code.summary()) }
                    }
                }
            }
        }
    };
    html(StatusCode::OK, layout("Codes", Some(&viewer), body))
}

/// Calls gathered into one event: after a call arrives the stream waits this long and
/// sends every call that ended meanwhile, so a page costs a busy host a few events a
/// second, not one wake-up and one write per call (issue 39's callgrind bound).
const BATCH_WINDOW: Duration = Duration::from_millis(250);

/// One event of the stream: the calls the viewer may see, oldest first, and how many calls
/// it skipped since the last event because it fell behind.
#[derive(serde::Serialize)]
struct Batch<'a> {
    calls: Vec<&'a LiveCall>,
    skipped: u64,
}

/// `GET /console/calls/stream`: `calls` events, each a [`Batch`] as JSON.
pub async fn stream(State(console): State<Arc<Console>>, headers: HeaderMap) -> Response {
    let viewer = match console.viewer(&headers).await {
        Ok(v) => v,
        Err(NoViewer::SignedOut) => return StatusCode::UNAUTHORIZED.into_response(),
        Err(NoViewer::Closed) => return StatusCode::FORBIDDEN.into_response(),
    };
    let Some(watch) = console.wharf.watch_calls() else {
        let mut busy = StatusCode::TOO_MANY_REQUESTS.into_response();
        busy.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("10"));
        return busy;
    };
    let tenant = viewer.caller.session_tenant().clone();
    let stop = console.wharf.shutdown_token().clone();
    struct Watching {
        console: Arc<Console>,
        headers: HeaderMap,
        watch: crate::live_calls::LiveWatch,
        checked: tokio::time::Instant,
    }
    let state = Watching {
        console: console.clone(),
        headers,
        watch,
        checked: tokio::time::Instant::now(),
    };
    let viewer = Arc::new(viewer);
    let events = futures::stream::unfold(state, move |mut state| {
        let (tenant, viewer) = (tenant.clone(), viewer.clone());
        async move {
            loop {
                if state.checked.elapsed() >= RECHECK_EVERY {
                    state.console.viewer(&state.headers).await.ok()?;
                    state.checked = tokio::time::Instant::now();
                }
                let mut calls = Vec::new();
                let mut skipped = 0;
                match tokio::time::timeout(RECHECK_EVERY, state.watch.calls.recv()).await {
                    Err(_) => continue,
                    Ok(Ok(call)) => calls.push(call),
                    Ok(Err(RecvError::Lagged(missed))) => skipped += missed,
                    Ok(Err(RecvError::Closed)) => return None,
                }
                tokio::time::sleep(BATCH_WINDOW).await;
                loop {
                    match state.watch.calls.try_recv() {
                        Ok(call) => calls.push(call),
                        Err(TryRecvError::Lagged(missed)) => skipped += missed,
                        Err(TryRecvError::Empty | TryRecvError::Closed) => break,
                    }
                }
                let batch = Batch {
                    calls: calls
                        .iter()
                        .map(|c| &**c)
                        .filter(|c| visible(c, &tenant, &viewer.caller))
                        .collect(),
                    skipped,
                };
                if batch.calls.is_empty() && skipped == 0 {
                    continue;
                }
                // Serialised once into one string: `json_data` writes through the event's
                // line scanner piece by piece, which cost more than the rest of the watch.
                let data = serde_json::to_string(&batch).ok()?;
                let event = Event::default().event("calls").data(data);
                return Some((Ok::<_, std::convert::Infallible>(event), state));
            }
        }
    })
    .take_until(async move { stop.cancelled().await });
    Sse::new(events)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}

/// Whether a viewer of `tenant` whose token is `caller` may see `call`.
fn visible(call: &LiveCall, tenant: &Tenant, caller: &crate::api::auth::Caller) -> bool {
    let own = tenant.only().is_none_or(|t| t == call.tenant);
    own && (call.backend == "-" || caller.may_use(&call.backend, None))
}

const SCRIPT: &str = r#""use strict";
(function () {
  var table = document.getElementById("calls");
  if (!table) return;
  var body = table.querySelector("tbody");
  var filter = document.getElementById("calls-filter");
  var status = document.getElementById("calls-status");
  var kept = 200;
  function matches(tr) {
    var f = filter.value.trim().toLowerCase();
    return !f || tr.getAttribute("data-text").indexOf(f) >= 0;
  }
  function cell(tr, name, text) {
    var td = document.createElement("td");
    td.className = name;
    td.textContent = text;
    tr.appendChild(td);
    return td;
  }
  function add(c) {
    var tr = document.createElement("tr");
    tr.setAttribute("data-text", [c.tool, c.tenant, c.session, c.backend, String(c.code)].join(" ").toLowerCase());
    if (c.code !== 0) tr.className = "failed";
    cell(tr, "at", new Date(c.at_ms).toLocaleTimeString());
    cell(tr, "tool", c.tool);
    cell(tr, "tenant", c.tenant);
    cell(tr, "session", c.session);
    var link = document.createElement("a");
    link.href = "/console/codes#code-" + Number(c.code);
    link.textContent = String(c.code);
    cell(tr, "code", "").appendChild(link);
    cell(tr, "duration", c.duration_ms + " ms");
    tr.hidden = !matches(tr);
    body.insertBefore(tr, body.firstChild);
    while (body.children.length > kept) body.removeChild(body.lastChild);
  }
  filter.addEventListener("input", function () {
    Array.prototype.forEach.call(body.children, function (tr) { tr.hidden = !matches(tr); });
  });
  var source = new EventSource("/console/calls/stream");
  source.addEventListener("open", function () { status.textContent = "Live"; });
  var skipped = 0;
  source.addEventListener("calls", function (m) {
    var batch = JSON.parse(m.data);
    batch.calls.forEach(add);
    if (batch.skipped > 0) {
      skipped += Number(batch.skipped);
      status.textContent = "Live (" + skipped + " calls skipped: too many at once)";
    }
  });
  source.addEventListener("error", function () { status.textContent = "Reconnecting…"; });
})();
"#;

/// `GET /console/calls.js`.
pub async fn script() -> Response {
    super::assets::asset("text/javascript; charset=utf-8", SCRIPT)
}
