//! A tenant's REST client for a running host: every request carries the tenant's bearer
//! token and answers the reply's JSON envelope.

use serde_json::{Value, json};

/// Requests to the host at `url` as the tenant whose token is `token`.
pub struct TenantClient<'a> {
    /// The host's base URL.
    pub url: &'a str,
    /// The tenant's bearer token.
    pub token: &'a str,
}

impl TenantClient<'_> {
    /// Sends `request` with the token; the reply's JSON.
    pub async fn send(&self, request: reqwest::RequestBuilder) -> Value {
        request
            .bearer_auth(self.token)
            .send()
            .await
            .expect("the host answers")
            .json()
            .await
            .expect("JSON")
    }

    /// POSTs a JSON body.
    pub async fn post(&self, path: &str, body: Value) -> Value {
        self.send(
            reqwest::Client::new()
                .post(format!("{}{path}", self.url))
                .json(&body),
        )
        .await
    }

    /// GETs a path.
    pub async fn get(&self, path: &str) -> Value {
        self.send(reqwest::Client::new().get(format!("{}{path}", self.url)))
            .await
    }

    /// DELETEs a path.
    pub async fn delete(&self, path: &str) -> Value {
        self.send(reqwest::Client::new().delete(format!("{}{path}", self.url)))
            .await
    }

    /// The host's `/metrics` text, as this tenant scrapes it.
    pub async fn metrics(&self) -> String {
        reqwest::Client::new()
            .get(format!("{}/metrics", self.url))
            .bearer_auth(self.token)
            .send()
            .await
            .expect("the host answers")
            .text()
            .await
            .expect("text")
    }

    /// Runs `command` with `backend`'s `run_command` in `session`; its result (the call
    /// must succeed).
    pub async fn run(&self, backend: &str, session: &str, command: &str) -> Value {
        let reply = self
            .post(
                "/v1/call",
                json!({"tool": format!("{backend}:run_command"), "args": {"command": command}, "session_id": session}),
            )
            .await;
        assert_eq!(reply["code"], 0, "{command}: {reply}");
        reply["data"]["result"].clone()
    }
}
