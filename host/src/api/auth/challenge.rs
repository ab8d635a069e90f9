//! What a client learns when it is refused or asks how to authenticate: the
//! `WWW-Authenticate: Bearer` challenge of every 401 (RFC 6750 §3; with `[auth.oauth]`, the
//! resource's metadata URL and scopes of RFC 9728 §5.1), and the protected-resource
//! metadata document itself (RFC 9728 §3), served at the well-known path.

use crate::config::OAuthConfig;
use crate::front_door::Wharf;
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use std::sync::Arc;

/// Longest `error_description` sent, characters.
const MAX_DESCRIPTION: usize = 200;

/// The challenge for a 401: `refusal` is why a presented token was refused (none when no
/// token came).
pub fn challenge(oauth: Option<&OAuthConfig>, refusal: Option<&str>) -> HeaderValue {
    let mut value = String::from("Bearer realm=\"wharf\"");
    if let Some(oauth) = oauth {
        value.push_str(&format!(
            ", resource_metadata=\"{}\", scope=\"{}\"",
            quoted_safe(&oauth.metadata_url()),
            oauth.scopes.supported().join(" ")
        ));
    }
    if let Some(why) = refusal {
        value.push_str(&format!(
            ", error=\"invalid_token\", error_description=\"{}\"",
            quoted_safe(why)
        ));
    }
    HeaderValue::from_str(&value)
        .unwrap_or_else(|_| HeaderValue::from_static("Bearer realm=\"wharf\""))
}

/// `text` as a quoted-string's content: printable ASCII without `"` or `\`, bounded.
fn quoted_safe(text: &str) -> String {
    text.chars()
        .filter(|c| c.is_ascii_graphic() && *c != '"' && *c != '\\' || *c == ' ')
        .take(MAX_DESCRIPTION)
        .collect()
}

/// `GET /.well-known/oauth-protected-resource[/PATH]` (routed only with `[auth.oauth]`, at
/// its `metadata_paths`): the resource's metadata.
pub async fn resource_metadata(State(wharf): State<Arc<Wharf>>) -> Response {
    let Some(oauth) = wharf.server().auth.oauth.as_ref() else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let mut reply = Json(json!({
        "resource": oauth.resource,
        "authorization_servers": oauth.authorization_servers,
        "scopes_supported": oauth.scopes.supported(),
        "bearer_methods_supported": ["header"],
        "resource_name": "Wharf",
    }))
    .into_response();
    reply.headers_mut().insert(
        http::header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=3600"),
    );
    reply
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_challenge_names_the_metadata_and_carries_no_injected_quotes() {
        assert_eq!(challenge(None, None), "Bearer realm=\"wharf\"");
        let oauth: OAuthConfig = toml::from_str(
            "resource = \"https://w.example/mcp\"\nauthorization_servers = [\"https://as.example\"]",
        )
        .unwrap();
        let c = challenge(Some(&oauth), Some("bad \"token\"\r\nX-Evil: 1"));
        let c = c.to_str().unwrap();
        assert_eq!(
            c,
            "Bearer realm=\"wharf\", resource_metadata=\"https://w.example/.well-known/oauth-protected-resource/mcp\", \
             scope=\"wharf:read wharf:call\", error=\"invalid_token\", error_description=\"bad tokenX-Evil: 1\""
        );
    }
}
