//! A session's terminal in the console (admins): a page whose script mints a terminal
//! ticket with the console session's CSRF token (`POST /console/sessions/terminal-ticket`),
//! then opens the API's terminal WebSocket with it — a browser's WebSocket cannot send the
//! token, and the console's cookie is for `/console` only. The script shows the output as
//! text (control sequences dropped: no terminal emulator reaches these machines) and sends
//! a line at a time, or Ctrl-C.

use super::pages::{html, layout, refusal};
use super::sandbox_access::SessionQuery;
use super::{Console, Viewer};
use crate::api::session_access::permitted_session;
use crate::error_code::WharfError;
use axum::Json;
use axum::extract::rejection::{FormRejection, QueryRejection};
use axum::extract::{Form, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use maud::html;
use serde::Deserialize;
use serde_json::json;
use std::sync::Arc;

/// The ticket form: the session and the console session's CSRF token.
#[derive(Deserialize)]
pub struct TicketForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    id: String,
}

fn admins_only() -> Response {
    refusal(
        StatusCode::FORBIDDEN,
        "Admins only",
        "A terminal runs commands: this token has no `admin` scope.",
    )
}

/// `GET /console/sessions/terminal?id=`.
pub async fn page(
    State(console): State<Arc<Console>>,
    viewer: Viewer,
    query: Result<Query<SessionQuery>, QueryRejection>,
) -> Response {
    let Some(query) = query.ok().map(|Query(q)| q).filter(|q| !q.id.is_empty()) else {
        return refusal(
            StatusCode::BAD_REQUEST,
            "Bad request",
            "Name a session: ?id=",
        );
    };
    let Some(csrf) = viewer.csrf.clone().filter(|_| viewer.admin()) else {
        return admins_only();
    };
    let record = match permitted_session(&console.wharf, &viewer.caller, &query.id).await {
        Ok(record) => record,
        Err(e) => return refusal(StatusCode::NOT_FOUND, "No such session", &e.message),
    };
    let body = html! {
        h1 { "Terminal " span.count { (record.id) } }
        p { "Backend " strong { (record.backend) } ", tenant " strong { (record.tenant) }
            ". Closing this page hangs the shell up." }
        div #terminal data-session=(record.id) data-csrf=(csrf) {
            pre #terminal-screen {}
            form #terminal-line autocomplete="off" {
                input #terminal-input type="text" aria-label="Command line" disabled;
                button type="submit" { "Send" }
                button #terminal-interrupt type="button" { "Ctrl-C" }
            }
            p #terminal-status { "Connecting…" }
        }
        script src="/console/terminal.js" defer {}
    };
    html(StatusCode::OK, layout("Terminal", Some(&viewer), body))
}

fn json_refusal(status: StatusCode, e: &WharfError) -> Response {
    (
        status,
        Json(json!({"code": e.code.as_u32(), "message": e.message})),
    )
        .into_response()
}

/// `POST /console/sessions/terminal-ticket` (`csrf`, `id`): `{path}` of the terminal with a
/// fresh ticket, for the page's script.
pub async fn ticket(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    form: Result<Form<TicketForm>, FormRejection>,
) -> Response {
    let Ok(Form(form)) = form else {
        return refusal(StatusCode::BAD_REQUEST, "Bad form", "Send csrf and id.");
    };
    let viewer: Viewer = match console.form_viewer(&headers, &form.csrf).await {
        Ok(v) => v,
        Err(refused) => return refused,
    };
    if !viewer.admin() {
        return admins_only();
    }
    let minted = async {
        permitted_session(&console.wharf, &viewer.caller, &form.id).await?;
        console
            .wharf
            .terminal_ticket(viewer.caller.session_tenant(), &form.id)
            .await
    }
    .await;
    match minted {
        Ok(minted) => Json(json!({
            "path": format!("/v1/sessions/{}/terminal?ticket={}", form.id, minted.ticket),
        }))
        .into_response(),
        Err(e) => json_refusal(super::pages::status_of(&e), &e),
    }
}

const SCRIPT: &str = r#""use strict";
(function () {
  var box = document.getElementById("terminal");
  if (!box) return;
  var screen = document.getElementById("terminal-screen");
  var status = document.getElementById("terminal-status");
  var input = document.getElementById("terminal-input");
  var decoder = new TextDecoder();
  var kept = 200000;
  var socket = null;
  var ended = false;
  function say(text) { status.textContent = text; }
  // Output as text: escape sequences (colours, cursor moves, titles) dropped, carriage
  // returns folded, backspaces applied. textContent never parses markup.
  function show(text) {
    var clean = text
      .replace(/\x1b\][^\x07\x1b]*(\x07|\x1b\\)/g, "")
      .replace(/\x1b\[[0-9;?]*[ -\/]*[@-~]/g, "")
      .replace(/\x1b[()][0-9A-Za-z]/g, "")
      .replace(/\x1b[=>78DMEc]/g, "")
      .replace(/\r+\n/g, "\n")
      .replace(/\r/g, "");
    var out = screen.textContent;
    for (var i = 0; i < clean.length; i++) {
      var c = clean.charAt(i);
      if (c === "\b") { out = out.slice(0, -1); } else if (c !== "\x07") { out += c; }
    }
    screen.textContent = out.slice(-kept);
    screen.scrollTop = screen.scrollHeight;
  }
  function event(e) {
    if (e.type === "opened") { say("Connected: process " + e.pid); input.disabled = false; input.focus(); }
    else if (e.type === "exit") { ended = true; say("The shell exited (" + e.exit_code + ")"); }
    else if (e.type === "error") { ended = true; say("Error " + e.code + ": " + e.message); }
    else if (e.type === "dropped") { show("\n[" + e.bytes + " bytes of output dropped]\n"); }
  }
  var form = new URLSearchParams();
  form.set("csrf", box.getAttribute("data-csrf"));
  form.set("id", box.getAttribute("data-session"));
  fetch("/console/sessions/terminal-ticket", { method: "POST", body: form, credentials: "same-origin" })
    .then(function (r) { return r.json().then(function (j) { return { ok: r.ok, j: j }; }); })
    .then(function (a) {
      if (!a.ok) { say("Refused: " + a.j.message); return; }
      var scheme = location.protocol === "https:" ? "wss://" : "ws://";
      socket = new WebSocket(scheme + location.host + a.j.path + "&cols=120&rows=32");
      socket.binaryType = "arraybuffer";
      socket.onmessage = function (m) {
        if (typeof m.data === "string") { event(JSON.parse(m.data)); }
        else { show(decoder.decode(new Uint8Array(m.data), { stream: true })); }
      };
      socket.onclose = function () { input.disabled = true; if (!ended) say("Disconnected"); };
    })
    .catch(function (e) { say("Failed: " + e); });
  document.getElementById("terminal-line").addEventListener("submit", function (ev) {
    ev.preventDefault();
    if (socket && socket.readyState === 1) { socket.send(input.value + "\n"); input.value = ""; }
  });
  document.getElementById("terminal-interrupt").addEventListener("click", function () {
    if (socket && socket.readyState === 1) socket.send("\x03");
  });
})();
"#;

/// `GET /console/terminal.js`.
pub async fn script() -> Response {
    super::assets::asset("text/javascript; charset=utf-8", SCRIPT)
}
