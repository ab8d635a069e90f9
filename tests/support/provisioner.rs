//! A fake remote sandbox provisioner for tests: a real HTTP server (axum on 127.0.0.1:0)
//! whose sandboxes are scratch directories and whose commands really run under `sh -c`,
//! each in its own process group so a timeout kills everything the command started.
//!
//! API (what `plugins/remote-provider` drives):
//! - `POST /api/sandboxes` `{image?, env?, workdir?, lifetime_seconds?, owner?}` → 201 `{id, url}`
//! - `GET /api/sandboxes` → `[{id, created_at}]`; `GET /api/sandboxes/{id}` → `{id, state}` or 404
//! - `DELETE /api/sandboxes/{id}` → 204, or 404 when unknown
//! - `POST /api/sandboxes/{id}/v1/shell/exec` `{command, timeout_ms?, stdin_base64?, max_output_bytes?}`
//!   → `{exit_code, stdout_base64, stderr_base64, stdout_truncated, stderr_truncated, timed_out}`

mod exec;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

/// A running fake provisioner. Dropping it stops the server and removes every scratch dir.
pub struct Provisioner {
    /// Base URL, e.g. `http://127.0.0.1:1234` (no trailing slash).
    pub url: String,
    state: Arc<Shared>,
    server: tokio::task::JoinHandle<()>,
}

struct Shared {
    base: String,
    token: Option<String>,
    sandboxes: Mutex<HashMap<String, Sandbox>>,
}

struct Sandbox {
    dir: tempfile::TempDir,
    created_at: u64,
    env: BTreeMap<String, String>,
}

impl Shared {
    fn sandboxes(&self) -> MutexGuard<'_, HashMap<String, Sandbox>> {
        self.sandboxes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// Starts a provisioner that needs no token.
pub async fn start() -> Provisioner {
    start_with_token(None).await
}

/// Starts a provisioner; with a token every request must carry `Authorization: Bearer <token>`.
pub async fn start_with_token(token: Option<&str>) -> Provisioner {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the provisioner");
    let addr = listener.local_addr().expect("provisioner address");
    let url = format!("http://{addr}");
    let state = Arc::new(Shared {
        base: url.clone(),
        token: token.map(str::to_string),
        sandboxes: Mutex::default(),
    });
    let app = Router::new()
        .route("/api/sandboxes", post(create).get(list))
        .route("/api/sandboxes/{id}", get(show).delete(destroy))
        .route("/api/sandboxes/{id}/v1/shell/exec", post(exec::exec))
        .layer(middleware::from_fn_with_state(state.clone(), authorize))
        .with_state(state.clone());
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Provisioner { url, state, server }
}

impl Provisioner {
    /// Ids of the live sandboxes, sorted.
    pub fn ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.state.sandboxes().keys().cloned().collect();
        ids.sort();
        ids
    }

    /// The scratch directory of a live sandbox.
    pub fn scratch_dir(&self, id: &str) -> Option<PathBuf> {
        self.state
            .sandboxes()
            .get(id)
            .map(|s| s.dir.path().to_path_buf())
    }
}

impl Drop for Provisioner {
    fn drop(&mut self) {
        self.server.abort();
        self.state.sandboxes().clear();
    }
}

async fn authorize(
    State(state): State<Arc<Shared>>,
    headers: HeaderMap,
    request: Request,
    next: Next,
) -> Response {
    if let Some(token) = &state.token {
        let expected = format!("Bearer {token}");
        if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some(expected.as_str()) {
            return (
                StatusCode::UNAUTHORIZED,
                axum::Json(json!({"error": "bad or missing token"})),
            )
                .into_response();
        }
    }
    next.run(request).await
}

fn reply(status: StatusCode, body: Value) -> Response {
    (status, axum::Json(body)).into_response()
}

fn not_found(id: &str) -> Response {
    reply(
        StatusCode::NOT_FOUND,
        json!({"error": format!("no sandbox `{id}`")}),
    )
}

fn parse<T: for<'de> Deserialize<'de> + Default>(body: &Bytes) -> serde_json::Result<T> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    serde_json::from_slice(body)
}

fn bad_request(message: impl std::fmt::Display) -> Response {
    reply(
        StatusCode::BAD_REQUEST,
        json!({"error": message.to_string()}),
    )
}

/// Type-checked like a real provisioner would; only `env` is used, since every command runs
/// on this machine in the scratch dir (no images, no expiry).
#[derive(Deserialize, Default)]
#[serde(default)]
#[allow(dead_code)]
struct CreateRequest {
    image: Option<String>,
    env: BTreeMap<String, String>,
    workdir: Option<String>,
    lifetime_seconds: Option<u64>,
    owner: Option<String>,
}

async fn create(State(state): State<Arc<Shared>>, body: Bytes) -> Response {
    let request: CreateRequest = match parse(&body) {
        Ok(request) => request,
        Err(e) => return bad_request(e),
    };
    let dir = match tempfile::Builder::new().prefix("wharf-prov-").tempdir() {
        Ok(dir) => dir,
        Err(e) => {
            return reply(
                StatusCode::INTERNAL_SERVER_ERROR,
                json!({"error": e.to_string()}),
            );
        }
    };
    let id = uuid::Uuid::new_v4().simple().to_string();
    let created_at = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    state.sandboxes().insert(
        id.clone(),
        Sandbox {
            dir,
            created_at,
            env: request.env,
        },
    );
    let url = format!("{}/api/sandboxes/{id}", state.base);
    reply(StatusCode::CREATED, json!({"id": id, "url": url}))
}

async fn list(State(state): State<Arc<Shared>>) -> Response {
    let mut list: Vec<Value> = state
        .sandboxes()
        .iter()
        .map(|(id, s)| json!({"id": id, "created_at": s.created_at}))
        .collect();
    list.sort_by(|a, b| a["id"].as_str().cmp(&b["id"].as_str()));
    reply(StatusCode::OK, Value::Array(list))
}

async fn show(State(state): State<Arc<Shared>>, Path(id): Path<String>) -> Response {
    if state.sandboxes().contains_key(&id) {
        reply(StatusCode::OK, json!({"id": id, "state": "running"}))
    } else {
        not_found(&id)
    }
}

async fn destroy(State(state): State<Arc<Shared>>, Path(id): Path<String>) -> Response {
    // Dropping the TempDir removes the scratch directory.
    let removed = state.sandboxes().remove(&id);
    match removed {
        Some(sandbox) => {
            drop(sandbox);
            StatusCode::NO_CONTENT.into_response()
        }
        None => not_found(&id),
    }
}
