//! The console's script and stylesheet, embedded in the binary and served from its own
//! origin (the pages' `Content-Security-Policy` allows nothing else, and no inline code).
//! The script only asks before a destructive form goes and counts idle time down; the
//! pages work without it.

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

const SCRIPT: &str = r#""use strict";
// Ask before a form marked data-confirm (unload, end a session) is sent.
document.addEventListener("submit", function (event) {
  var question = event.target.getAttribute("data-confirm");
  if (question && !window.confirm(question)) {
    event.preventDefault();
  }
});
// Count the idle time left down from what the page was rendered with.
(function () {
  var rendered = Date.now();
  var spans = document.querySelectorAll("[data-left-ms]");
  function show(ms) {
    var s = Math.floor(ms / 1000);
    if (s < 60) return s + "s";
    if (s < 3600) return Math.floor(s / 60) + "m " + (s % 60) + "s";
    if (s < 86400) return Math.floor(s / 3600) + "h " + Math.floor((s % 3600) / 60) + "m";
    return Math.floor(s / 86400) + "d " + Math.floor((s % 86400) / 3600) + "h";
  }
  function tick() {
    var elapsed = Date.now() - rendered;
    spans.forEach(function (span) {
      var left = Number(span.getAttribute("data-left-ms")) - elapsed;
      span.textContent = left > 0 ? show(left) : "due";
    });
  }
  if (spans.length > 0) {
    setInterval(tick, 1000);
  }
})();
// Upload a component (admins): the file's bytes go as the body, the CSRF token in a header.
(function () {
  var form = document.getElementById("upload");
  if (!form) return;
  form.addEventListener("submit", function (event) {
    event.preventDefault();
    var out = document.getElementById("upload-result");
    var name = form.elements["name"].value;
    var file = form.elements["component"].files[0];
    if (!file) { out.textContent = "Choose a .wasm file."; return; }
    out.textContent = "Uploading " + file.name + "…";
    fetch("/console/backends/upload?name=" + encodeURIComponent(name), {
      method: "POST",
      credentials: "same-origin",
      headers: { "content-type": "application/octet-stream", "x-wharf-csrf": form.elements["csrf"].value },
      body: file
    }).then(function (r) {
      return r.text().then(function (text) {
        out.textContent = r.ok ? text : (text.indexOf("<") === 0 ? "Refused (" + r.status + ")" : text);
        out.className = r.ok ? "" : "refusal";
        if (r.ok) setTimeout(function () { location.reload(); }, 1500);
      });
    }).catch(function (e) { out.textContent = "Upload failed: " + e; out.className = "refusal"; });
  });
})();
// Pages of recent figures (Health) reload themselves every interval.
(function () {
  var every = document.querySelector("[data-refresh-s]");
  if (every) {
    setTimeout(function () { location.reload(); }, Number(every.getAttribute("data-refresh-s")) * 1000);
  }
})();
"#;

const STYLE: &str = r#"
body { font: 14px/1.45 system-ui, sans-serif; margin: 0; color: #1b1f24; background: #f6f7f9; }
header { display: flex; gap: 1.5em; align-items: center; padding: .6em 1.5em; background: #12304a; color: #fff; }
header a { color: #cfe3ff; margin-right: 1em; text-decoration: none; }
header .who { margin-left: auto; }
header form { margin: 0; }
main { padding: 1em 1.5em; max-width: 80em; }
h1 .count { color: #667; font-weight: normal; }
section.backend { background: #fff; border: 1px solid #d9dde3; border-radius: 6px; padding: .5em 1.2em 1em; margin-bottom: 1em; }
section.backend h2 .version { color: #667; font-weight: normal; font-size: .8em; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: .2em 1em; margin: .4em 0; }
dt { color: #556; }
dd { margin: 0; overflow-wrap: anywhere; }
pre { background: #f2f4f7; padding: .6em; overflow-x: auto; max-height: 20em; }
ul.tools { list-style: none; padding-left: 0; }
.pending { border: 2px solid #d98b00; background: #fff8e6; padding: .3em 1em .8em; border-radius: 6px; }
.pending .buttons { display: flex; gap: 1em; }
.last-error, .refusal { color: #a01818; }
.empty { color: #778; }
table { border-collapse: collapse; background: #fff; width: 100%; }
th, td { text-align: left; padding: .35em .6em; border-bottom: 1px solid #e3e6ea; }
th { white-space: nowrap; }
td.key, td.sandbox, td.reason { overflow-wrap: anywhere; }
form.action { display: inline; margin: .3em 0; }
button { cursor: pointer; }
form.login { display: grid; gap: .5em; max-width: 24em; }
#calls tr.failed td.code a { color: #a01818; font-weight: bold; }
#calls-filter { min-width: 24em; }
#terminal-screen { height: 30em; max-height: none; background: #101418; color: #e3e6ea; white-space: pre-wrap; }
#terminal-line { display: flex; gap: .5em; }
#terminal-input { flex: 1; font-family: monospace; }
table.health td { vertical-align: middle; }
section.upload form { display: flex; flex-wrap: wrap; gap: .5em; align-items: center; }
.chart { display: flex; align-items: center; gap: .5em; }
.chart .now { min-width: 5.5em; font-variant-numeric: tabular-nums; white-space: nowrap; }
.chart .top { color: #778; font-size: .85em; white-space: nowrap; }
"#;

/// An embedded asset's answer.
pub(super) fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [(header::CONTENT_TYPE, HeaderValue::from_static(content_type))],
        body,
    )
        .into_response()
}

/// `GET /console/app.js`.
pub async fn script() -> Response {
    asset("text/javascript; charset=utf-8", SCRIPT)
}

/// `GET /console/app.css`.
pub async fn style() -> Response {
    asset("text/css; charset=utf-8", STYLE)
}
