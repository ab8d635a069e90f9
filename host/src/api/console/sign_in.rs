//! Signing in and out of the console: the login form (with a nonce in the form and in a
//! cookie, so another site cannot sign a browser in), the token traded for a console
//! session's cookie, and logout, which ends the session.

use super::{
    Console, LOGIN_COOKIE, LOGIN_FORM_SECONDS, SESSION_COOKIE, bad_csrf, cookie, cross_site,
    forwarded_https, logins, pages, see_other, set_cookie,
};
use crate::config::TokenScope;
use axum::extract::rejection::FormRejection;
use axum::extract::{Form, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use serde::Deserialize;
use std::sync::Arc;

/// `GET /console/login`: the form, with a fresh nonce in it and in a cookie.
pub async fn form(State(console): State<Arc<Console>>, headers: HeaderMap) -> Response {
    if console.open() {
        return see_other("/console");
    }
    login_page(&console, &headers, StatusCode::OK, None)
}

fn login_page(
    console: &Console,
    headers: &HeaderMap,
    status: StatusCode,
    error: Option<&str>,
) -> Response {
    let Ok(nonce) = logins::random_hex() else {
        return pages::refusal(
            StatusCode::INTERNAL_SERVER_ERROR,
            "No randomness",
            "The host could not draw a random value; try again.",
        );
    };
    let cookie = set_cookie(
        LOGIN_COOKIE,
        &nonce,
        Some(LOGIN_FORM_SECONDS),
        console.secure(headers),
    );
    let mut response = pages::html(status, pages::login(&nonce, error));
    response.headers_mut().append(header::SET_COOKIE, cookie);
    response
}

/// The login form's fields.
#[derive(Deserialize)]
pub struct LoginForm {
    token: String,
    #[serde(default)]
    csrf: String,
}

/// `POST /console/login`: a valid token with `read` (or more) starts a console session.
pub async fn login(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    form: Result<Form<LoginForm>, FormRejection>,
) -> Response {
    if console.open() {
        return see_other("/console");
    }
    if let Some(refused) = cross_site(&headers) {
        return refused;
    }
    if !console.loopback && !forwarded_https(&headers) {
        return pages::refusal(
            StatusCode::FORBIDDEN,
            "TLS required",
            "Off loopback the console is served through a TLS terminator only (one that sets X-Forwarded-Proto: https).",
        );
    }
    let Ok(Form(form)) = form else {
        return pages::refusal(
            StatusCode::BAD_REQUEST,
            "Bad form",
            "The login form was not sent as a form.",
        );
    };
    let nonce_matches =
        cookie(&headers, LOGIN_COOKIE).is_some_and(|n| logins::same_secret(n, &form.csrf));
    if !nonce_matches {
        return bad_csrf();
    }
    let token = form.token.trim();
    let caller = match console
        .authenticator
        .authenticate(Some(&format!("Bearer {token}")))
        .await
    {
        Ok(caller) if caller.has(TokenScope::Read) => caller,
        Ok(_) => {
            return login_page(
                &console,
                &headers,
                StatusCode::FORBIDDEN,
                Some("This token has no `read` scope."),
            );
        }
        Err(_) => {
            return login_page(
                &console,
                &headers,
                StatusCode::UNAUTHORIZED,
                Some("The token is not valid."),
            );
        }
    };
    let Ok(id) = console.logins.start(token.to_string()) else {
        return pages::refusal(
            StatusCode::INTERNAL_SERVER_ERROR,
            "No randomness",
            "The host could not draw a random value; try again.",
        );
    };
    tracing::info!(token = %caller.name, "console: signed in");
    let secure = console.secure(&headers);
    let mut response = see_other("/console");
    let h = response.headers_mut();
    h.append(
        header::SET_COOKIE,
        set_cookie(SESSION_COOKIE, &id, None, secure),
    );
    h.append(
        header::SET_COOKIE,
        set_cookie(LOGIN_COOKIE, "", Some(0), secure),
    );
    response
}

/// A form that carries only its CSRF token.
#[derive(Deserialize)]
pub struct CsrfForm {
    #[serde(default)]
    csrf: String,
}

/// `POST /console/logout`: ends the console session and clears its cookie.
pub async fn logout(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    form: Result<Form<CsrfForm>, FormRejection>,
) -> Response {
    let csrf = form.map(|Form(f)| f.csrf).unwrap_or_default();
    if let Err(refused) = console.form_viewer(&headers, &csrf).await {
        return refused;
    }
    if let Some(id) = cookie(&headers, SESSION_COOKIE) {
        console.logins.end(id);
    }
    let mut response = see_other("/console/login");
    response.headers_mut().append(
        header::SET_COOKIE,
        set_cookie(SESSION_COOKIE, "", Some(0), console.secure(&headers)),
    );
    response
}
