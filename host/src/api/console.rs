//! The operator's console at `/console` (docs/operators.md, "Console"): server-rendered
//! pages over the front door, a login form that trades a bearer token for a cookie, and
//! forms for the admin's actions.
//!
//! - A console session lives in this process's memory (`logins`): the cookie holds only
//!   its random id (`HttpOnly; SameSite=Strict; Path=/console`, `Secure` unless the host
//!   listens on loopback and the request says nothing of TLS). Every request authenticates
//!   the session's token again, so a `read` token sees, an admin acts, and a token that
//!   stops being valid ends the session.
//! - Every state-changing form carries the console session's CSRF token (compared in
//!   constant time); the login form, before there is a session, carries a nonce also set
//!   as a cookie. The edge's Host and Origin rules (`api/edge`) run first; a browser's
//!   `Sec-Fetch-Site` that is not same-origin is refused as well.
//! - With no token configured the console shows its pages read-only, on a loopback
//!   listener only, as the API is open only there.
//! - Pages go out with a strict `Content-Security-Policy` (the script is `/console/app.js`,
//!   never inline), `X-Frame-Options: DENY` and `Cache-Control: no-store`; maud escapes
//!   everything a backend or caller wrote.

mod actions;
mod assets;
mod backends_page;
mod calls_page;
mod files_page;
mod health_page;
mod logins;
mod pages;
mod processes_page;
mod sandbox_access;
mod sign_in;
mod tenants_page;
mod terminal_page;

use crate::api::auth::{Authenticator, Caller};
use crate::config::TokenScope;
use crate::front_door::Wharf;
use axum::Router;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use logins::Logins;
use std::sync::Arc;

/// The cookie holding a console session's id.
const SESSION_COOKIE: &str = "wharf_console";
/// The cookie holding the login form's nonce.
const LOGIN_COOKIE: &str = "wharf_console_login";
/// How long a login form may wait before it is sent, s.
const LOGIN_FORM_SECONDS: u64 = 600;

/// The console's state: the host, the API's authenticator and the console sessions.
pub struct Console {
    wharf: Arc<Wharf>,
    authenticator: Arc<Authenticator>,
    logins: Logins,
    /// Whether the host listens on a loopback address.
    loopback: bool,
}

/// Who looks at a page: the caller its token is, and its console session's CSRF token
/// (none when no token is configured: then nothing can be changed).
pub struct Viewer {
    caller: Caller,
    csrf: Option<String>,
}

impl Viewer {
    /// Whether the viewer may act (approve, unload, end sessions).
    fn admin(&self) -> bool {
        self.csrf.is_some() && self.caller.has(TokenScope::Admin)
    }
}

/// A page's viewer, for a page route: without one, to the login form (or the console is
/// closed) as [`Console::page_viewer`] answers.
impl FromRequestParts<Arc<Console>> for Viewer {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut Parts,
        console: &Arc<Console>,
    ) -> Result<Self, Response> {
        console.page_viewer(&parts.headers).await
    }
}

/// Why a request has no viewer.
enum NoViewer {
    /// Not signed in (or the session ended): to the login form.
    SignedOut,
    /// The console is not served here (no tokens, not on loopback).
    Closed,
}

/// The console's routes, joined to the REST router (behind the edge guard).
pub fn router(wharf: &Arc<Wharf>, authenticator: &Arc<Authenticator>) -> Router<Arc<Wharf>> {
    let console = Arc::new(Console {
        loopback: wharf.server().listen.ip().is_loopback(),
        wharf: wharf.clone(),
        authenticator: authenticator.clone(),
        logins: Logins::default(),
    });
    Router::new()
        .route("/console", get(backends_page::backends))
        .route("/console/sessions", get(pages::sessions))
        .route("/console/login", get(sign_in::form).post(sign_in::login))
        .route("/console/logout", post(sign_in::logout))
        .route("/console/backends/upload", post(actions::upload))
        .route("/console/backends/{action}", post(actions::backend))
        .route("/console/sessions/end", post(actions::end_session))
        .route("/console/calls", get(calls_page::page))
        .route("/console/calls/stream", get(calls_page::stream))
        .route("/console/calls.js", get(calls_page::script))
        .route("/console/codes", get(calls_page::codes))
        .route("/console/tenants", get(tenants_page::page))
        .route("/console/health", get(health_page::page))
        .route("/console/sessions/files", get(files_page::page))
        .route("/console/sessions/processes", get(processes_page::page))
        .route(
            "/console/sessions/files/download",
            get(files_page::download),
        )
        .route("/console/sessions/terminal", get(terminal_page::page))
        .route(
            "/console/sessions/terminal-ticket",
            post(terminal_page::ticket),
        )
        .route("/console/terminal.js", get(terminal_page::script))
        .route("/console/app.js", get(assets::script))
        .route("/console/app.css", get(assets::style))
        .layer(axum::middleware::map_response(guard_headers))
        .with_state(console)
}

/// The headers every console answer carries.
async fn guard_headers(mut response: Response) -> Response {
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
             connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    // Not `no-referrer`: under it a browser sends `Origin: null` on a same-origin form
    // post, which the edge refuses.
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    response
}

impl Console {
    /// Whether no credential is configured (every caller is anonymous).
    fn open(&self) -> bool {
        self.wharf.server().auth.is_open()
    }

    /// Whether the session cookie gets `Secure`: always off loopback (the console is
    /// meant to be reached through a TLS terminator there), and on loopback when the
    /// request says it came over TLS. The header only ever tightens the cookie.
    fn secure(&self, headers: &HeaderMap) -> bool {
        !self.loopback || forwarded_https(headers)
    }

    /// The viewer of a request: its console session's caller, re-authenticated.
    async fn viewer(&self, headers: &HeaderMap) -> Result<Viewer, NoViewer> {
        if self.open() {
            return if self.loopback {
                Ok(Viewer {
                    caller: Caller::anonymous(),
                    csrf: None,
                })
            } else {
                Err(NoViewer::Closed)
            };
        }
        let id = cookie(headers, SESSION_COOKIE).ok_or(NoViewer::SignedOut)?;
        let (token, csrf) = self.logins.find(id).ok_or(NoViewer::SignedOut)?;
        match self
            .authenticator
            .authenticate(Some(&format!("Bearer {token}")))
            .await
        {
            Ok(caller) if caller.has(TokenScope::Read) => Ok(Viewer {
                caller,
                csrf: Some(csrf),
            }),
            _ => {
                self.logins.end(id);
                Err(NoViewer::SignedOut)
            }
        }
    }

    /// The viewer of a page: signed-out browsers go to the login form.
    async fn page_viewer(&self, headers: &HeaderMap) -> Result<Viewer, Response> {
        self.viewer(headers).await.map_err(|why| match why {
            NoViewer::SignedOut => see_other("/console/login"),
            NoViewer::Closed => closed(),
        })
    }

    /// The viewer of a form post, once its CSRF token and origin are checked.
    async fn form_viewer(&self, headers: &HeaderMap, csrf: &str) -> Result<Viewer, Response> {
        if let Some(refused) = cross_site(headers) {
            return Err(refused);
        }
        let viewer = self.viewer(headers).await.map_err(|why| match why {
            NoViewer::SignedOut => pages::refusal(
                StatusCode::FORBIDDEN,
                "Not signed in",
                "This form needs a console session; sign in again.",
            ),
            NoViewer::Closed => closed(),
        })?;
        match &viewer.csrf {
            Some(expected) if logins::same_secret(expected, csrf) => Ok(viewer),
            _ => Err(bad_csrf()),
        }
    }
}

fn closed() -> Response {
    pages::refusal(
        StatusCode::FORBIDDEN,
        "Console closed",
        "No token is configured, so the console is served on a loopback listener only.",
    )
}

fn bad_csrf() -> Response {
    pages::refusal(
        StatusCode::FORBIDDEN,
        "Form refused",
        "The form's CSRF token is missing or wrong: reload the page and try again.",
    )
}

/// The 403 for a request a browser says comes from another site or origin
/// (`Sec-Fetch-Site`); requests without the header are left to the edge's Origin rule
/// and the CSRF token.
fn cross_site(headers: &HeaderMap) -> Option<Response> {
    match headers.get("sec-fetch-site").map(HeaderValue::as_bytes) {
        None | Some(b"same-origin") | Some(b"none") => None,
        Some(_) => Some(pages::refusal(
            StatusCode::FORBIDDEN,
            "Cross-site request refused",
            "The console accepts forms from its own pages only.",
        )),
    }
}

/// Whether a TLS terminator in front says the request came over TLS.
fn forwarded_https(headers: &HeaderMap) -> bool {
    headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("https"))
}

/// The value of cookie `name` in the request's `Cookie` headers.
fn cookie<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v)
}

/// A `Set-Cookie` value for the console's path; `max_age` 0 clears it.
fn set_cookie(name: &str, value: &str, max_age: Option<u64>, secure: bool) -> HeaderValue {
    let age = max_age
        .map(|s| format!("; Max-Age={s}"))
        .unwrap_or_default();
    let secure = if secure { "; Secure" } else { "" };
    let text = format!("{name}={value}; HttpOnly; SameSite=Strict; Path=/console{age}{secure}");
    // Names and values are ours (hex), so this never falls back.
    HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// 303 to `location` (after a form post, and to the login form).
fn see_other(location: &'static str) -> Response {
    (
        StatusCode::SEE_OTHER,
        [(header::LOCATION, HeaderValue::from_static(location))],
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies_are_found_by_exact_name() {
        let mut h = HeaderMap::new();
        h.append(
            header::COOKIE,
            HeaderValue::from_static("wharf_console_login=n1; other=x"),
        );
        h.append(
            header::COOKIE,
            HeaderValue::from_static("wharf_console=abc"),
        );
        assert_eq!(cookie(&h, SESSION_COOKIE), Some("abc"));
        assert_eq!(cookie(&h, LOGIN_COOKIE), Some("n1"));
        assert_eq!(cookie(&h, "missing"), None);
    }

    #[test]
    fn set_cookie_is_strict_and_secure_when_asked() {
        let v = set_cookie(SESSION_COOKIE, "ab", None, true);
        assert_eq!(
            v.to_str().unwrap(),
            "wharf_console=ab; HttpOnly; SameSite=Strict; Path=/console; Secure"
        );
        let v = set_cookie(LOGIN_COOKIE, "", Some(0), false);
        assert_eq!(
            v.to_str().unwrap(),
            "wharf_console_login=; HttpOnly; SameSite=Strict; Path=/console; Max-Age=0"
        );
    }

    #[test]
    fn only_same_origin_fetches_pass() {
        let mut h = HeaderMap::new();
        assert!(cross_site(&h).is_none());
        h.insert("sec-fetch-site", HeaderValue::from_static("same-origin"));
        assert!(cross_site(&h).is_none());
        for site in ["same-site", "cross-site"] {
            h.insert("sec-fetch-site", HeaderValue::from_static(site));
            assert!(cross_site(&h).is_some(), "{site}");
        }
    }
}
