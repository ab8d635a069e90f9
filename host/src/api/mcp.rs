//! MCP at `/mcp`: the streamable-HTTP transport of the `rmcp` crate over the
//! front door. `tools/list` lists every loaded tool under its MCP name, in pages
//! ([`tool_list`]), `tools/call` runs it
//! (acquiring a session by key when the tool needs one, see [`call`]), and clients hear
//! `notifications/tools/list_changed` when backends load or unload or a backend that lists
//! its tools at run time lists others.
//!
//! Two eras are served side by side, as rmcp routes them: an `initialize` handshake opens an
//! MCP session (`Mcp-Session-Id`, 2025 revisions up to 2025-11-25; its Wharf sessions fall
//! back to that id as their key, and a connected session is told of list changes); a
//! 2026-07-28 client finds the server with `server/discover` and sends every request on its
//! own, carrying its protocol version (no MCP session: a session tool needs an explicit key,
//! and list changes come on a `subscriptions/listen` stream).

pub mod call;
pub mod direct_call;
pub mod json_reply;
pub mod owners;
pub mod plain_errors;
pub mod session_end;
pub mod tool_list;

use crate::front_door::Wharf;
use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, ListToolsResult,
    PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig, SubscriptionFilter,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use std::borrow::Cow;
use std::convert::Infallible;
use std::sync::Arc;
use std::task::Poll;

/// The tower service mounted at `/mcp`: rmcp's transport behind an `Arc`. Every layer in
/// front of it clones its inner service per request; rmcp's own clone copies its whole
/// config (vectors and all), this one is a reference count.
#[derive(Clone)]
pub struct McpService(Arc<StreamableHttpService<WharfMcp, LocalSessionManager>>);

impl tower::Service<http::Request<axum::body::Body>> for McpService {
    type Response = http::Response<BoxBody<Bytes, Infallible>>;
    type Error = Infallible;
    type Future = futures::future::BoxFuture<'static, Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut std::task::Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<axum::body::Body>) -> Self::Future {
        let transport = self.0.clone();
        Box::pin(async move { Ok(transport.handle(request).await) })
    }
}

/// The MCP service over `wharf`: one [`WharfMcp`] handler per MCP session, request bodies
/// capped at the server's `max_body_bytes`. The `Host` and `Origin` checks are the whole
/// router's ([`crate::api::edge`]), so the transport's own are off.
pub fn service(wharf: Arc<Wharf>, sessions: Arc<LocalSessionManager>) -> McpService {
    let server = wharf.server();
    let config = StreamableHttpServerConfig::default()
        .with_max_request_body_bytes(server.max_body_bytes)
        .with_cancellation_token(wharf.shutdown_token().child_token())
        .disable_allowed_hosts();
    McpService(Arc::new(StreamableHttpService::new(
        move || Ok(WharfMcp::new(wharf.clone())),
        sessions,
        config,
    )))
}

/// The MCP handler of one MCP session.
pub struct WharfMcp {
    wharf: Arc<Wharf>,
    /// Dropped with the handler (the MCP session ended): stops its list-changed forwarder.
    alive: tokio::sync::watch::Sender<()>,
}

impl WharfMcp {
    /// A handler over `wharf`.
    pub fn new(wharf: Arc<Wharf>) -> Self {
        Self {
            wharf,
            alive: tokio::sync::watch::channel(()).0,
        }
    }
}

impl ServerHandler for WharfMcp {
    fn get_info(&self) -> ServerConfig {
        let mut info = ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        );
        info.protocol_version = ProtocolVersion::LATEST_WITH_INITIALIZE;
        info.server_info = Implementation::new("wharf", env!("CARGO_PKG_VERSION"));
        info.instructions = Some(
            "Tools of the backends loaded in this Wharf host. Tools that need a session get one \
             automatically, keyed by the X-Wharf-Session-Key header, `_meta[\"wharf/session_key\"]`, \
             or else this MCP session."
                .into(),
        );
        info
    }

    /// Every revision rmcp knows, the 2026-07-28 one included: rmcp answers its
    /// `server/discover` and serves its requests statelessly (no `Mcp-Session-Id`), while an
    /// `initialize` still negotiates a 2025 revision with an MCP session.
    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::known_up_to(&ProtocolVersion::LATEST))
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let parts = context.extensions.get::<http::request::Parts>();
        let caller =
            call::caller_of(parts).map_err(|e| ErrorData::invalid_request(e.message, None))?;
        let tools = self
            .wharf
            .tools()
            .into_iter()
            .filter(|(name, _, _)| caller.may_use(&name.backend, Some(&name.action)))
            .map(|(name, _, tool)| (name, tool));
        let cursor = request.as_ref().and_then(|r| r.cursor.as_deref());
        let page_size = self.wharf.server().connections.mcp_tools_page_size;
        tool_list::page(tools, cursor, page_size).map_err(|tool_list::BadCursor| {
            ErrorData::invalid_params("the cursor is not one this server gave", None)
        })
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        call::call_tool(&self.wharf, request, context)
            .await
            .map(CallToolResponse::from)
    }

    /// The 2026-07-28 revision's `subscriptions/listen`: tool-list changes only.
    fn accepted_subscription_filter(
        &self,
        _requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(SubscriptionFilter::builder().tools_list_changed().build())
    }

    /// Sends `notifications/tools/list_changed` on the listen stream when the tools change,
    /// until the client cancels it or the stream closes (one stream holds one
    /// connection, so the connection caps bound them).
    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let mut changes = self.wharf.subscribe_tool_changes();
        loop {
            tokio::select! {
                () = context.cancelled() => return Ok(()),
                change = changes.recv() => match change {
                    Ok(()) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                        if context.sink().notify_tool_list_changed().await.is_err() {
                            return Ok(());
                        }
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return Ok(()),
                },
            }
        }
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let mut changes = self.wharf.subscribe_tool_changes();
        let mut closed = self.alive.subscribe();
        let peer = context.peer;
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    // Never sent: resolves only when the handler (the MCP session) is gone.
                    _ = closed.changed() => return,
                    change = changes.recv() => match change {
                        Ok(()) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                            if peer.notify_tool_list_changed().await.is_err() && peer.is_transport_closed() {
                                return;
                            }
                        }
                        Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                    },
                }
            }
        });
    }
}
