//! The REST routes (docs/agents.md) over the front door.

use crate::api::auth::Caller;
use crate::api::call_request::{self, CallRequest};
use crate::api::call_stream;
use crate::api::envelope::{Envelope, RequestClock, attachments_json};
use crate::api::json_body::{self, EmptyBody};
use crate::api::route_answer::{PathRoute, answer, readiness};
use crate::api::session_reply::{SessionList, SessionReply};
use crate::call_output::OutputSink;
use crate::config::TokenScope;
use crate::error_code::{Code, WharfError};
use crate::front_door::{Invocation, SessionChoice, SessionRequest, Wharf};
use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tracing::Instrument;

/// A required JSON body, mapped onto the code table.
fn parse_body<T: DeserializeOwned>(body: Result<Bytes, BytesRejection>) -> Result<T, WharfError> {
    json_body::parse_body(body, EmptyBody::Refused)
}

/// The REST router: every route behind the edge guard ([`crate::api::edge`]) and the
/// authentication of [`crate::api::auth`]; routes that take JSON refuse other bodies
/// (415), uploads take raw bytes. Fails only when `[auth.oauth]`'s HTTP client cannot be
/// built.
pub fn router(wharf: Arc<Wharf>) -> anyhow::Result<Router> {
    use axum::middleware::{from_fn, from_fn_with_state};
    let limit = wharf.server().max_body_bytes;
    let edge = crate::api::edge::EdgePolicy::new(wharf.server());
    let read_scope = || crate::api::auth::ScopeGuard::layer(TokenScope::Read);
    let connections = &wharf.server().connections;
    let mut mcp_sessions =
        rmcp::transport::streamable_http_server::session::local::LocalSessionManager::default();
    mcp_sessions.session_config.keep_alive = Some(connections.mcp_session_idle());
    let mcp_sessions = Arc::new(mcp_sessions);
    let mcp_owners = Arc::new(crate::api::mcp::owners::McpOwners::new(
        mcp_sessions.clone(),
        connections,
    ));
    let mcp_direct = Arc::new(crate::api::mcp::direct_call::DirectCalls::new(
        wharf.clone(),
        mcp_sessions.clone(),
    ));
    let json_routes = Router::new()
        .route("/v1/sessions", post(create_session).get(list_sessions))
        .route("/v1/sessions/{id}", get(get_session).delete(delete_session))
        .route("/v1/sessions/{id}/refresh", post(refresh_session))
        .route(
            "/v1/sessions/{id}/pause",
            post(crate::api::session_pauses::pause),
        )
        .route(
            "/v1/sessions/{id}/resume",
            post(crate::api::session_pauses::resume),
        )
        .route(
            "/v1/sessions/{id}/snapshots",
            post(crate::api::snapshots::create),
        )
        .route("/v1/sessions/{id}/fork", post(crate::api::snapshots::fork))
        .route(
            "/v1/sessions/{id}/terminal/tickets",
            post(crate::api::terminal::mint_ticket),
        )
        .route("/v1/snapshots", get(crate::api::snapshots::list))
        .route(
            "/v1/snapshots/{id}",
            get(crate::api::snapshots::get).delete(crate::api::snapshots::delete),
        )
        .route(
            "/v1/volumes",
            get(crate::api::volumes::list).post(crate::api::volumes::create),
        )
        .route(
            "/v1/volumes/{volume}",
            get(crate::api::volumes::get).delete(crate::api::volumes::delete),
        )
        .route(
            "/v1/sessions/{id}/previews",
            post(crate::api::preview_links::create).delete(crate::api::preview_links::revoke),
        )
        .route(
            "/v1/sessions/{id}/claim",
            axum::routing::delete(release_claim),
        )
        .route("/v1/call", post(call))
        .route_service(
            "/mcp",
            tower::ServiceBuilder::new()
                .layer(read_scope())
                .layer(from_fn_with_state(
                    mcp_owners,
                    crate::api::mcp::owners::guard,
                ))
                .layer(from_fn_with_state(
                    mcp_direct,
                    crate::api::mcp::direct_call::answer,
                ))
                .layer(from_fn(crate::api::mcp::json_reply::one_message))
                .layer(from_fn(crate::api::mcp::plain_errors::as_envelopes))
                .service(crate::api::mcp::service(wharf.clone(), mcp_sessions)),
        )
        .merge(crate::api::compat::router())
        .route_layer(json_body::require_json());
    let authenticator = Arc::new(crate::api::auth::Authenticator::new(&wharf.server().auth)?);
    let mut metadata = Router::new();
    for path in wharf
        .server()
        .auth
        .oauth
        .iter()
        .flat_map(|o| o.metadata_paths())
    {
        metadata = metadata.route(&path, get(crate::api::auth::resource_metadata));
    }
    Ok(Router::new()
        .route("/healthz", get(healthz))
        .merge(metadata)
        .route("/readyz", get(readyz))
        .route("/openapi.json", get(crate::api::openapi::serve))
        .route(
            "/metrics",
            get(crate::api::metrics::serve).route_layer(read_scope()),
        )
        .route("/v1/backends", get(crate::api::backends::list_backends))
        .route("/v1/quotas", get(crate::api::quotas::serve))
        .route("/v1/tools", get(list_tools))
        .route(
            "/v1/sessions/{id}/terminal",
            get(crate::api::terminal::open),
        )
        .route("/v1/sessions/{id}/files/info", get(crate::api::files::info))
        .route("/v1/sessions/{id}/files/list", get(crate::api::files::list))
        .route(
            "/v1/sessions/{id}/files/watch",
            get(crate::api::files::watch),
        )
        .route(
            "/v1/sessions/{id}/files",
            get(crate::api::files::download)
                .put(crate::api::files::upload)
                .route_layer(json_body::require_file_body())
                .layer(axum::Extension(Arc::new(
                    crate::api::files::SpoolBudget::new(
                        wharf.server().max_spooled_bytes_per_tenant,
                    ),
                ))),
        )
        .merge(json_routes)
        .merge(crate::api::admin::router(&wharf))
        .merge(crate::api::console::router(&wharf, &authenticator))
        .fallback(no_route)
        .layer(DefaultBodyLimit::max(limit))
        .with_state(wharf)
        .layer(from_fn_with_state(
            authenticator,
            crate::api::auth::authenticate_request,
        ))
        .layer(crate::api::edge::EdgeGuard::layer(edge)))
}

async fn no_route(uri: axum::http::Uri) -> Envelope {
    let t = RequestClock::start();
    let mut e = t.reply(Err(WharfError::invalid_request(format!(
        "no route `{}`",
        uri.path()
    ))));
    e.code = Code::InvalidRequest;
    e
}

async fn healthz() -> Envelope {
    RequestClock::start().reply(Ok(json!({ "status": "ok" })))
}

async fn readyz(State(wharf): State<Arc<Wharf>>) -> Envelope {
    let t = RequestClock::start();
    t.reply(readiness(&wharf))
}

async fn list_tools(State(wharf): State<Arc<Wharf>>, caller: Caller) -> Envelope {
    answer(&caller, TokenScope::Read, async {
        let tools: Vec<Value> = wharf
            .tools()
            .into_iter()
            .filter(|(name, _, _)| caller.may_use(&name.backend, Some(&name.action)))
            .map(|(name, version, tool)| {
                json!({
                    "name": name.canonical(),
                    "backend": name.backend,
                    "version": version,
                    "description": tool.description,
                    "input_schema": tool.input_schema,
                    "output_schema": tool.output_schema,
                    "annotations": tool.annotations,
                    "session": tool.session,
                })
            })
            .collect();
        Ok(json!({ "tools": tools }))
    })
    .await
}

async fn create_session(
    State(wharf): State<Arc<Wharf>>,
    caller: Caller,
    body: Result<Bytes, BytesRejection>,
) -> Envelope {
    let mut envelope = answer(&caller, TokenScope::Call, async {
        let request: SessionRequest = parse_body(body)?;
        caller.require_tool(&request.backend, None)?;
        let (record, created) = wharf.create_session(&caller.tenant, request).await?;
        Ok(SessionReply {
            created: Some(created),
            ..SessionReply::from(&record)
        })
    })
    .await;
    envelope.meta.session_id = envelope.data_text("id");
    envelope.meta.backend = envelope.data_text("backend");
    envelope
}

#[derive(Deserialize)]
struct SessionFilter {
    backend: Option<String>,
    key: Option<String>,
}

async fn list_sessions(
    State(wharf): State<Arc<Wharf>>,
    caller: Caller,
    filter: Result<Query<SessionFilter>, QueryRejection>,
) -> Envelope {
    answer(&caller, TokenScope::Read, async {
        let filter = json_body::parse_query(filter)?;
        let list = wharf
            .sessions(
                caller.session_tenant(),
                filter.backend.as_deref(),
                filter.key.as_deref(),
            )
            .await?;
        let visible = list.iter().filter(|s| caller.may_use(&s.backend, None));
        Ok(SessionList {
            sessions: visible.map(SessionReply::from).collect(),
        })
    })
    .await
}

async fn get_session(r: PathRoute) -> Envelope {
    r.answer(TokenScope::Read, async {
        r.permitted_session().await.map(|s| SessionReply::from(&s))
    })
    .await
}

async fn refresh_session(r: PathRoute) -> Envelope {
    r.answer_on_session(TokenScope::Call, async {
        r.wharf
            .refresh_session(r.session_tenant(), &r.id)
            .await
            .map(|s| SessionReply::from(&s))
    })
    .await
}

#[derive(Deserialize)]
struct Holder {
    holder: String,
}

async fn release_claim(r: PathRoute, holder: Result<Query<Holder>, QueryRejection>) -> Envelope {
    r.answer(TokenScope::Call, async {
        let h = json_body::parse_query(holder)?;
        r.permitted_session().await?;
        r.wharf
            .release_claim(r.session_tenant(), &r.id, &h.holder)
            .await
            .map(|released| json!({ "id": r.id, "released": released }))
    })
    .await
}

async fn delete_session(r: PathRoute) -> Envelope {
    r.answer(TokenScope::Call, async {
        // An unknown id stays a no-op (delete is idempotent); a forbidden one is not.
        if let Err(e) = r.permitted_session().await
            && e.code != Code::SessionNotFound
        {
            return Err(e);
        }
        r.wharf
            .delete_session(r.session_tenant(), &r.id)
            .await
            .map(|deleted| json!({ "id": r.id, "deleted": deleted }))
    })
    .await
}

async fn call(
    State(wharf): State<Arc<Wharf>>,
    caller: Caller,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let (span, t) = RequestClock::for_request("rest.call", &caller.name, None);
    let request: CallRequest = match caller
        .require(TokenScope::Call)
        .and_then(|()| parse_body(body))
    {
        Ok(r) => r,
        Err(e) => return t.reply(Err(e)).into_response(),
    };
    if !call_stream::wants_lines(&headers) {
        return run_call(&wharf, &caller, request, None, span, t)
            .await
            .into_response();
    }
    let (sink, pieces) = OutputSink::channel();
    call_stream::streamed(pieces, move |done| {
        tokio::spawn(async move {
            let envelope = run_call(&wharf, &caller, request, Some(sink), span, t).await;
            let _ = done.send(envelope);
        })
    })
}

/// Runs one REST call; its output also goes to `output` when the client streams it.
async fn run_call(
    wharf: &Wharf,
    caller: &Caller,
    request: CallRequest,
    output: Option<OutputSink>,
    span: tracing::Span,
    t: RequestClock,
) -> Envelope {
    let invocation = Invocation {
        session: request
            .session_id
            .map_or(SessionChoice::None, SessionChoice::Id),
        deadline: request.timeout_ms.map(Duration::from_millis),
        trace_id: Some(t.trace_id.clone()),
        output,
        ..Invocation::new(
            caller.principal(),
            request.tool,
            request.args,
            call_request::missing_session,
        )
    };
    match wharf.invoke(invocation).instrument(span).await {
        Ok(outcome) => {
            let (result, place) = outcome.into_parts();
            let attachments = attachments_json(&result.attachments);
            let mut data = json!({ "result": result.content });
            if !attachments.is_empty() {
                data["attachments"] = Value::Array(attachments);
            }
            Envelope::ok(data, t.meta()).at(place)
        }
        Err((err, place)) => Envelope::error(err, t.meta()).at(place),
    }
}
