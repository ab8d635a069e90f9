//! The console's Backends page: each loaded backend the viewer may use (version,
//! contract, tools with their schemas, what it declares, the operator's grants for admins,
//! its pool, its last refused component), a pending upgrade with what it adds (declared,
//! and granted, the latter for admins) and the admin's Approve / Reject, Unload; then
//! refused loads of names that are not loaded.

use super::pages::{action_form, html, layout, span, text};
use super::{Console, Viewer};
use crate::backend_status::{PendingUpgrade, Rejection};
use crate::clock::now_ms;
use crate::front_door::{BackendSummary, Wharf};
use crate::requires::Requires;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use maud::{Markup, html};
use serde_json::Value;
use std::sync::Arc;

/// `GET /console`: the Backends page.
pub async fn backends(State(console): State<Arc<Console>>, viewer: Viewer) -> Response {
    let body = page(&console.wharf, &viewer);
    html(StatusCode::OK, layout("Backends", Some(&viewer), body))
}

fn page(wharf: &Wharf, viewer: &Viewer) -> Markup {
    let caller = &viewer.caller;
    let mut list: Vec<BackendSummary> = wharf
        .backends()
        .into_iter()
        .filter(|b| caller.may_use(&b.name, None))
        .collect();
    list.sort_by(|a, b| a.name.cmp(&b.name));
    let rejected: Vec<(String, Rejection)> = wharf
        .rejected_backends()
        .into_iter()
        .filter(|(name, _)| caller.may_use(name, None))
        .collect();
    let now = now_ms();
    html! {
        h1 { "Backends " span.count { "(" (list.len()) ")" } }
        @if list.is_empty() { p.empty { "No backend is loaded." } }
        @for b in &list { (backend(wharf, viewer, b, now)) }
        (upload_form(viewer))
        @if !rejected.is_empty() {
            h2 #rejected { "Refused loads" }
            table.rejected {
                thead { tr { th { "Name" } th { "Reason" } th { "sha256" } th { "When" } } }
                tbody {
                    @for (name, r) in &rejected {
                        tr data-backend=(name) {
                            td { (name) } td.reason { (r.reason) }
                            td { code { (short(&r.sha256)) } }
                            td { (span(now.saturating_sub(r.at_ms))) " ago" }
                        }
                    }
                }
            }
        }
    }
}

/// The admin's upload of a component: a new backend, or a new version of a loaded one
/// (kept in the data dir, as `PUT /v1/admin/backends/{name}` does). The page's script
/// sends the file as the body; without a script nothing is sent.
fn upload_form(viewer: &Viewer) -> Markup {
    html! {
        @if let (true, Some(csrf)) = (viewer.admin(), &viewer.csrf) {
            section.upload {
                h2 { "Upload a component" }
                form #upload method="post" action="/console/backends/upload" {
                    input type="hidden" name="csrf" value=(csrf);
                    label for="upload-name" { "Backend name" }
                    input #upload-name type="text" name="name" required maxlength="64";
                    label for="upload-file" { "Component (.wasm)" }
                    input #upload-file type="file" name="component" accept=".wasm,application/wasm" required;
                    button type="submit" #upload-button { "Upload" }
                }
                p #upload-result role="status" {}
                noscript { p { "Uploading needs the page's script; or use " code { "PUT /v1/admin/backends/{name}" } "." } }
            }
        }
    }
}

fn backend(wharf: &Wharf, viewer: &Viewer, b: &BackendSummary, now: u64) -> Markup {
    let (error, pending) = wharf.backend_status(&b.name);
    let name = b.name.as_str();
    html! {
        section.backend data-backend=(name) {
            h2 { (name) " " span.version { (b.version) } }
            p.description { (b.description) }
            dl.facts {
                dt { "Component" } dd.declared { (b.declared_name) " " (b.version) }
                dt { "Contract" } dd { (b.wit) " (" (text(&b.contract)) ")" }
                dt { "World" } dd { (text(&b.world)) }
                dt { "sha256" } dd { code { (short(&b.sha256)) } }
                dt { "Status" } dd.status {
                    @if pending.is_some() { "ready; an upgrade waits for approval" }
                    @else if error.is_some() { "ready; the last component was refused" }
                    @else { "ready" }
                }
                dt { "Pool" } dd.pool { (pool(&b.instances)) " (min " (b.limits.pool_min)
                    ", max " (b.limits.pool_max) ")" }
                dt { "Limits" } dd { (b.limits.memory_bytes >> 20) " MiB a call, "
                    (b.limits.call_timeout_ms) " ms deadline" }
                @if !b.isolation.is_empty() {
                    dt { "Isolation" } dd { (b.isolation.join(", ")) }
                }
            }
            @if let Some(error) = &error {
                p.last-error { "Last refused component (" (span(now.saturating_sub(error.at_ms)))
                    " ago, " code { (short(&error.sha256)) } "): " (error.reason) }
            }
            @if let Some(pending) = &pending { (upgrade(viewer, name, pending, now)) }
            h3 { "Declares" }
            (requires(&b.requires))
            h3 { "Grants" }
            @if viewer.caller.has(crate::config::TokenScope::Admin) {
                @let grants = wharf.backend_grants(name);
                @if grants.is_empty() { p.empty { "None: no container, network or outbound HTTP." } }
                @else {
                    dl.grants { @for g in &grants { dt { (g.what) } dd { (g.values.join(", ")) } } }
                }
            } @else {
                p.empty { "Shown to admins." }
            }
            @if let Some(warm) = b.warm_pool {
                p.warm-pool { "Warm pool: " (warm.idle) " of " (warm.size) " started sandboxes waiting for a session." }
            }
            h3 { "Tools (" (b.tools.len()) ")" }
            @if let Some(every) = b.tools_listed_every_seconds {
                p.listed { "Listed by the backend while it runs: asked again every " (every) " s." }
            }
            ul.tools {
                @for t in &b.tools {
                    li.tool data-tool=(t.action) {
                        details {
                            summary { code.tool-name { (name) ":" (t.action) } " — " (t.description) }
                            p { "Session: " (text(&serde_json::to_value(t.session).unwrap_or(Value::Null))) }
                            h4 { "Input schema" }
                            pre { (pretty(&t.input_schema)) }
                            @if let Some(out) = &t.output_schema {
                                h4 { "Output schema" }
                                pre { (pretty(out)) }
                            }
                        }
                    }
                }
            }
            (action_form(viewer, "/console/backends/unload", &[("backend", name)], "Unload",
                Some("Unload this backend? Its calls then answer 5011.")))
        }
    }
}

fn upgrade(viewer: &Viewer, name: &str, p: &PendingUpgrade, now: u64) -> Markup {
    let admin = viewer.caller.has(crate::config::TokenScope::Admin);
    html! {
        div.pending {
            h3 { "Upgrade waiting for approval" }
            p { (p.declared_name) " " (p.version) " (" code { (short(&p.sha256)) } "), waiting "
                (span(now.saturating_sub(p.since_ms))) "." }
            @if !p.added.is_empty() {
                p { "It declares more than the running version:" }
                div.added { (requires(&p.added)) }
            }
            @if !p.grants_added.is_empty() {
                p { "Its grants reach further than the running version's:" }
                @if admin {
                    dl.grants-added {
                        @for (what, list) in &p.grants_added { dt { (what) } dd { (list.join(", ")) } }
                    }
                } @else {
                    p.empty { "Shown to admins." }
                }
            }
            div.buttons {
                (action_form(viewer, "/console/backends/approve", &[("backend", name)], "Approve", None))
                (action_form(viewer, "/console/backends/reject", &[("backend", name)], "Reject", None))
            }
        }
    }
}

fn requires(r: &Requires) -> Markup {
    html! {
        @if r.is_empty() { p.empty { "Nothing beyond computing." } }
        @else {
            dl.requires {
                @for (what, list) in [("images", &r.images), ("http_hosts", &r.http_hosts),
                                      ("networks", &r.networks), ("host_mounts", &r.host_mounts)] {
                    @if !list.is_empty() { dt { (what) } dd { (list.join(", ")) } }
                }
            }
        }
    }
}

/// The pool's counters as `idle 1, busy 0, …`.
fn pool(v: &Value) -> String {
    match v.as_object() {
        Some(fields) => fields
            .iter()
            .map(|(k, v)| format!("{k} {}", text(v)))
            .collect::<Vec<_>>()
            .join(", "),
        None => text(v),
    }
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default()
}

/// The first 12 hex digits of a digest.
fn short(sha256: &str) -> &str {
    sha256.get(..12).unwrap_or(sha256)
}
