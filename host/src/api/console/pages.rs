//! The console's pages, rendered with maud (which escapes every value it is given): the
//! layout, the login form, refusals, and the Sessions page; the Backends page is
//! `backends_page`. Everything shown comes through `front_door::Wharf`.

use super::{Console, Viewer};
use crate::clock::now_ms;
use crate::front_door::Wharf;
use crate::session_record::SessionRecord;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use maud::{DOCTYPE, Markup, html};
use serde_json::Value;
use std::sync::Arc;

/// An HTML answer.
pub fn html(status: StatusCode, page: Markup) -> Response {
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/html; charset=utf-8"),
        )],
        page.into_string(),
    )
        .into_response()
}

/// A refusal or an error, as a small page.
pub fn refusal(status: StatusCode, title: &str, message: &str) -> Response {
    html(
        status,
        layout(
            title,
            None,
            html! {
                h1 { (title) }
                p.refusal { (message) }
                p { a href="/console" { "Back to the console" } }
            },
        ),
    )
}

/// The HTTP status of a front-door error: the code table's (`Code::http_status`).
pub fn status_of(e: &crate::error_code::WharfError) -> StatusCode {
    StatusCode::from_u16(e.code.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

/// A front-door error as a page titled `title`, with the code table's status.
pub fn failure(title: &str, e: &crate::error_code::WharfError) -> Response {
    refusal(status_of(e), title, &e.message)
}

/// The page around `body`: the stylesheet, the script, and for a viewer the navigation,
/// who is signed in and the logout form.
pub fn layout(title: &str, viewer: Option<&Viewer>, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { "Wharf console — " (title) }
                link rel="stylesheet" href="/console/app.css";
                script src="/console/app.js" defer {}
            }
            body {
                header {
                    strong.brand { "Wharf" }
                    @if let Some(viewer) = viewer {
                        nav {
                            a href="/console" { "Backends" }
                            a href="/console/sessions" { "Sessions" }
                            a href="/console/calls" { "Calls" }
                            a href="/console/tenants" { "Tenants" }
                            a href="/console/health" { "Health" }
                        }
                        span.who {
                            "Signed in as " strong { (viewer.caller.name) }
                            @if viewer.admin() { " (admin)" } @else { " (read-only)" }
                        }
                        @if let Some(csrf) = &viewer.csrf {
                            form.logout method="post" action="/console/logout" {
                                input type="hidden" name="csrf" value=(csrf);
                                button type="submit" id="logout" { "Log out" }
                            }
                        }
                    }
                }
                main { (body) }
            }
        }
    }
}

/// The login form; `nonce` is also in the login cookie.
pub fn login(nonce: &str, error: Option<&str>) -> Markup {
    layout(
        "Sign in",
        None,
        html! {
            h1 { "Sign in" }
            p { "Paste a token from the host's " code { "[[auth.tokens]]" } ": a "
                code { "read" } " token sees, an " code { "admin" } " token can act." }
            @if let Some(error) = error { p.refusal #login-error { (error) } }
            form.login method="post" action="/console/login" autocomplete="off" {
                input type="hidden" name="csrf" value=(nonce);
                label for="token" { "Token" }
                input type="password" id="token" name="token" required autofocus;
                button type="submit" id="sign-in" { "Sign in" }
            }
        },
    )
}

/// A form posting `fields` and the viewer's CSRF token to `action`, shown only to admins.
pub fn action_form(
    viewer: &Viewer,
    action: &str,
    fields: &[(&str, &str)],
    label: &str,
    confirm: Option<&str>,
) -> Markup {
    html! {
        @if let (true, Some(csrf)) = (viewer.admin(), &viewer.csrf) {
            form.action method="post" action=(action) data-confirm=[confirm] {
                input type="hidden" name="csrf" value=(csrf);
                @for (name, value) in fields {
                    input type="hidden" name=(name) value=(value);
                }
                button type="submit" { (label) }
            }
        }
    }
}

/// A span of ms as people read it: `2h 5m`, `4m 12s`, `12s`.
pub fn span(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m {}s", s / 60, s % 60),
        3600..86400 => format!("{}h {}m", s / 3600, (s % 3600) / 60),
        _ => format!("{}d {}h", s / 86400, (s % 86400) / 3600),
    }
}

/// A JSON value as one line of text: strings as they are, the rest as JSON.
pub fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// `GET /console/sessions`: the sessions the viewer sees.
pub async fn sessions(State(console): State<Arc<Console>>, viewer: Viewer) -> Response {
    match sessions_table(&console.wharf, &viewer).await {
        Ok(body) => html(StatusCode::OK, layout("Sessions", Some(&viewer), body)),
        Err(e) => refusal(
            StatusCode::SERVICE_UNAVAILABLE,
            "Sessions unavailable",
            &e.message,
        ),
    }
}

async fn sessions_table(
    wharf: &Wharf,
    viewer: &Viewer,
) -> Result<Markup, crate::error_code::WharfError> {
    let caller = &viewer.caller;
    let mut list: Vec<SessionRecord> = wharf
        .sessions(caller.session_tenant(), None, None)
        .await?
        .into_iter()
        .filter(|s| caller.may_use(&s.backend, None))
        .collect();
    list.sort_by_key(|s| std::cmp::Reverse(s.created_at_ms));
    let now = now_ms();
    // Files (and, for admins, a terminal and End) for tokens that may use sessions.
    let may_call = viewer.caller.has(crate::config::TokenScope::Call);
    Ok(html! {
        h1 { "Sessions " span.count { "(" (list.len()) ")" } }
        @if list.is_empty() {
            p.empty { "No session." }
        } @else {
            table.sessions {
                thead { tr {
                    th { "Tenant" } th { "Backend" } th { "Key" } th { "State" } th { "Age" }
                    th { "Idle time left" } th { "Sandbox" } th { "Holder" }
                    @if may_call { th {} }
                } }
                tbody {
                    @for s in &list {
                        tr data-session=(s.id) {
                            td.tenant { (s.tenant) }
                            td.backend { (s.backend) }
                            td.key { (s.key) }
                            td.state { (s.state.as_str()) }
                            td.age { (span(now.saturating_sub(s.created_at_ms))) }
                            td.left {
                                @match s.expires_at_ms() {
                                    Some(at) => {
                                        @let left = at.saturating_sub(now);
                                        span data-left-ms=(left) { (span(left)) }
                                    }
                                    None => { "never" }
                                }
                            }
                            td.sandbox { (sandbox_of(&s.data)) }
                            td.holder { (s.holder.as_deref().unwrap_or("")) }
                            @if may_call {
                                td {
                                    @if s.data.get("sandbox").is_some() {
                                        a.files href={ "/console/sessions/files?id=" (s.id) } { "Files" } " "
                                        a.processes href={ "/console/sessions/processes?id=" (s.id) } { "Processes" } " "
                                        @if viewer.admin() {
                                            a.terminal href={ "/console/sessions/terminal?id=" (s.id) } { "Terminal" } " "
                                        }
                                    }
                                    (action_form(viewer, "/console/sessions/end",
                                    &[("id", s.id.as_str())], "End", Some("End this session? Its sandbox is released.")))
                                }
                            }
                        }
                    }
                }
            }
        }
    })
}

/// The sandbox a session holds, as its data names it (provider sessions).
fn sandbox_of(data: &Value) -> String {
    match (data.get("sandbox"), data.get("warm")) {
        (Some(sandbox), Some(_)) => format!("{} (warm)", text(sandbox)),
        (Some(sandbox), None) => text(sandbox),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn spans_read_like_people_write_them() {
        assert_eq!(span(12_400), "12s");
        assert_eq!(span(252_000), "4m 12s");
        assert_eq!(span(7_500_000), "2h 5m");
        assert_eq!(span(90_000_000), "1d 1h");
    }

    #[test]
    fn markup_escapes_what_guests_write() {
        let page = refusal(
            StatusCode::FORBIDDEN,
            "<b>t</b>",
            "<script>alert(1)</script>",
        );
        assert_eq!(page.status(), StatusCode::FORBIDDEN);
        let m = layout("x", None, html! { td.key { ("<script>x</script>\"'") } }).into_string();
        assert!(m.contains("&lt;script&gt;x&lt;/script&gt;&quot;'"), "{m}");
        assert!(!m.contains("<script>x"), "{m}");
        assert_eq!(
            sandbox_of(&json!({"sandbox": "c1", "warm": "w"})),
            "c1 (warm)"
        );
        assert_eq!(sandbox_of(&json!({"sandbox": "c2"})), "c2");
        assert_eq!(sandbox_of(&json!({})), "");
    }
}
