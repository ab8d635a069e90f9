//! `wharf sessions create|list|delete|pause|resume|snapshot|fork`: sessions of a running server, over its REST API.

use super::{http_json, with_token};
use anyhow::{Context, Result, bail};
use clap::Subcommand;
use serde_json::{Value, json};

/// What to do with sessions.
#[derive(Debug, Subcommand)]
pub enum SessionsCommand {
    /// Create a session (or get the one that exists for this backend and key); prints its id.
    Create {
        /// The backend.
        backend: String,
        /// The caller's key: the same key gives the same session.
        #[arg(long)]
        key: Option<String>,
        /// Per-session config, a JSON object given to the backend's `initialize`.
        #[arg(long)]
        config: Option<String>,
        /// Idle time after which the session expires, in seconds.
        #[arg(long)]
        ttl_seconds: Option<u64>,
    },
    /// List sessions: one line each, `ID BACKEND KEY STATE`.
    List {
        /// Only this backend's.
        #[arg(long)]
        backend: Option<String>,
        /// Only this key's.
        #[arg(long)]
        key: Option<String>,
        /// Print the server's JSON instead.
        #[arg(long)]
        json: bool,
    },
    /// Delete a session (its backend's `cleanup` runs).
    Delete {
        /// The session id.
        id: String,
    },
    /// Pause a session's sandbox (memory and processes kept, no CPU).
    Pause {
        /// The session id.
        id: String,
    },
    /// Resume a paused session's sandbox where it was.
    Resume {
        /// The session id.
        id: String,
    },
    /// Snapshot a session's sandbox filesystem; prints the snapshot's id.
    Snapshot {
        /// The session id.
        id: String,
        /// A name for the snapshot.
        #[arg(long)]
        name: Option<String>,
    },
    /// Make COUNT sessions from a snapshot of a session; prints their ids.
    Fork {
        /// The session id.
        id: String,
        /// How many sessions (1 to 32).
        #[arg(long, default_value_t = 1)]
        count: u32,
        /// The session config each gets, a JSON object (by default its origin's).
        #[arg(long)]
        config: Option<String>,
    },
}

/// `URL/v1/sessions/ID/ACTION`, the id one path segment whatever it holds.
fn session_action_url(url: &str, id: &str, action: &str) -> Result<reqwest::Url> {
    let mut at = reqwest::Url::parse(url).with_context(|| format!("`{url}` is not a URL"))?;
    at.path_segments_mut()
        .map_err(|()| anyhow::anyhow!("`{url}` cannot take a path"))?
        .pop_if_empty()
        .extend(["v1", "sessions", id, action]);
    Ok(at)
}

/// The JSON body of `POST /v1/sessions` for `create`.
pub fn create_body(
    backend: &str,
    key: Option<&str>,
    config: Option<&str>,
    ttl_seconds: Option<u64>,
) -> Result<Value> {
    let mut body = json!({ "backend": backend });
    if let Some(key) = key {
        body["key"] = json!(key);
    }
    if let Some(config) = config {
        let config: Value = serde_json::from_str(config).context("--config is not valid JSON")?;
        body["config"] = config;
    }
    if let Some(ttl) = ttl_seconds {
        body["ttl_seconds"] = json!(ttl);
    }
    Ok(body)
}

/// Runs one `sessions` subcommand against the server at `url`.
pub async fn run(command: SessionsCommand, url: &str, token: Option<String>) -> Result<()> {
    let client = reqwest::Client::new();
    match command {
        SessionsCommand::Create {
            backend,
            key,
            config,
            ttl_seconds,
        } => {
            let body = create_body(&backend, key.as_deref(), config.as_deref(), ttl_seconds)?;
            let reply = http_json(with_token(
                client.post(format!("{url}/v1/sessions")).json(&body),
                token,
            ))
            .await?;
            let data = ok_data(&reply)?;
            println!("{}", data["id"].as_str().unwrap_or_default());
        }
        SessionsCommand::List { backend, key, json } => {
            let mut query = Vec::new();
            if let Some(backend) = backend {
                query.push(("backend", backend));
            }
            if let Some(key) = key {
                query.push(("key", key));
            }
            let list_url = reqwest::Url::parse_with_params(&format!("{url}/v1/sessions"), &query)
                .with_context(|| format!("`{url}` is not a URL"))?;
            let reply = http_json(with_token(client.get(list_url), token)).await?;
            print_listing(ok_data(&reply)?, "sessions", json, |s| {
                format!(
                    "{}  {}  {}  {}",
                    s["id"].as_str().unwrap_or_default(),
                    s["backend"].as_str().unwrap_or_default(),
                    s["key"].as_str().unwrap_or("-"),
                    s["state"].as_str().unwrap_or_default(),
                )
            })?;
        }
        SessionsCommand::Delete { id } => {
            let reply = http_json(with_token(
                client.delete(format!("{url}/v1/sessions/{id}")),
                token,
            ))
            .await?;
            ok_data(&reply)?;
            eprintln!("wharf: deleted session `{id}`");
        }
        SessionsCommand::Pause { id } => {
            let at = session_action_url(url, &id, "pause")?;
            let reply = http_json(with_token(client.post(at), token)).await?;
            let data = ok_data(&reply)?;
            eprintln!(
                "wharf: session `{id}` is {}",
                data["state"].as_str().unwrap_or("?")
            );
        }
        SessionsCommand::Snapshot { id, name } => {
            let at = session_action_url(url, &id, "snapshots")?;
            let body = name.map_or_else(|| json!({}), |name| json!({ "name": name }));
            let reply = http_json(with_token(client.post(at).json(&body), token)).await?;
            let data = ok_data(&reply)?;
            println!("{}", data["id"].as_str().unwrap_or_default());
        }
        SessionsCommand::Fork { id, count, config } => {
            let at = session_action_url(url, &id, "fork")?;
            let mut body = json!({ "count": count });
            if let Some(config) = config {
                body["config"] =
                    serde_json::from_str(&config).context("--config is not valid JSON")?;
            }
            let reply = http_json(with_token(client.post(at).json(&body), token)).await?;
            let data = ok_data(&reply)?;
            for s in data["sessions"].as_array().into_iter().flatten() {
                println!("{}", s["id"].as_str().unwrap_or_default());
            }
            eprintln!(
                "wharf: forked from snapshot `{}`",
                data["snapshot"]["id"].as_str().unwrap_or_default()
            );
        }
        SessionsCommand::Resume { id } => {
            let at = session_action_url(url, &id, "resume")?;
            let reply = http_json(with_token(client.post(at), token)).await?;
            let data = ok_data(&reply)?;
            let was = if data["resumed"] == json!(true) {
                "resumed"
            } else {
                "was not paused"
            };
            eprintln!("wharf: session `{id}` {was}");
        }
    }
    Ok(())
}

/// The `data` of a successful reply, or the server's message and code as the error.
pub(super) fn ok_data(reply: &Value) -> Result<&Value> {
    if reply["code"].as_u64() != Some(0) {
        bail!(
            "{} ({})",
            reply["message"].as_str().unwrap_or("the server refused"),
            reply["code"]
        );
    }
    Ok(&reply["data"])
}

/// Prints a listing reply's `data`: whole as JSON with `--json`, otherwise one line per
/// entry of its `field` array, written by `line`.
pub(super) fn print_listing(
    data: &Value,
    field: &str,
    json: bool,
    line: impl Fn(&Value) -> String,
) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(data)?);
        return Ok(());
    }
    for entry in data[field].as_array().into_iter().flatten() {
        println!("{}", line(entry));
    }
    Ok(())
}

/// What to do about a 4007 from `wharf call`, in the CLI's words (the server's message
/// speaks REST).
pub(super) fn session_advice(tool: &str, reply: &Value, session: Option<&str>) -> String {
    let backend = reply["meta"]["backend"]
        .as_str()
        .filter(|b| !b.is_empty())
        .unwrap_or_else(|| tool.split([':', '.']).next().unwrap_or(tool));
    match session {
        None => format!(
            "`{tool}` needs a session: create one with `wharf sessions create {backend}` and call again with `--session ID`"
        ),
        Some(id) => format!(
            "session `{id}` is unknown or has ended: `wharf sessions list` shows the live ones, `wharf sessions create {backend}` makes a new one"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_session_is_answered_with_cli_commands() {
        let reply = json!({"code": 4007, "meta": {"backend": "notes"}});
        let advice = session_advice("notes:add", &reply, None);
        assert!(advice.contains("wharf sessions create notes"), "{advice}");
        assert!(advice.contains("--session"), "{advice}");
        assert!(!advice.contains("POST"), "{advice}");
        let advice = session_advice("notes.add", &json!({"code": 4007}), Some("s-1"));
        assert!(
            advice.contains("`s-1`") && advice.contains("create notes"),
            "{advice}"
        );
    }

    #[test]
    fn create_body_takes_what_was_given() {
        assert_eq!(
            create_body("b", None, None, None).unwrap(),
            json!({ "backend": "b" })
        );
        assert_eq!(
            create_body("b", Some("k"), Some(r#"{"x":1}"#), Some(60)).unwrap(),
            json!({ "backend": "b", "key": "k", "config": { "x": 1 }, "ttl_seconds": 60 })
        );
        assert!(create_body("b", None, Some("{nope"), None).is_err());
    }

    #[test]
    fn a_session_id_is_one_path_segment() {
        let at = session_action_url("http://127.0.0.1:8080", "a/../b?c", "pause").unwrap();
        assert_eq!(
            at.as_str(),
            "http://127.0.0.1:8080/v1/sessions/a%2F..%2Fb%3Fc/pause"
        );
        let at = session_action_url("http://h/base/", "s-1", "resume").unwrap();
        assert_eq!(at.as_str(), "http://h/base/v1/sessions/s-1/resume");
    }
}
