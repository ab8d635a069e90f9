//! What the rest of the host sees of a loaded backend, whatever it is: a resource
//! backend's own component ([`ResourceComponent`](crate::runtime::resource_component)),
//! or a sandbox provider presented by the standard sandbox toolset
//! (`sandbox_toolset::ProviderBackend`). Sessions, tool calls and every API call through
//! this one face; nothing above it asks which world a backend is.

use crate::error_code::WharfError;
use crate::runtime::guest_types::{Discovery, SessionView};
pub use crate::runtime::instance_pool::{PoolStatus, PoolWatch};
use crate::tool::{ToolDescription, ToolResult};
use async_trait::async_trait;
use serde_json::Value;
use std::time::Duration;

/// One tool call, its arguments already validated against the tool's schema.
#[derive(Debug, Clone)]
pub struct ToolCall {
    /// The tenant whose request this is.
    pub tenant: std::sync::Arc<str>,
    /// Action name.
    pub action: String,
    /// Arguments.
    pub args: Value,
    /// The session, when the call has one.
    pub session: Option<SessionView>,
    /// Wall-clock limit for this call.
    pub timeout: Duration,
    /// For logs.
    pub trace_id: Option<String>,
    /// Where the call's output goes while it runs (a streaming caller's), if anywhere.
    pub output: Option<crate::call_output::OutputSink>,
    /// Fired when the caller gives up on the call, if the protocol can tell.
    pub cancel: Option<tokio_util::sync::CancellationToken>,
    /// What the host does for a call in a session beyond its backend (previews,
    /// snapshots), if anything.
    pub host: Option<SessionHostRef>,
}

/// What the front door does for a toolset tool beyond the provider: mint the URLs a
/// person opens to a port of a session's sandbox (its previews), and snapshot the
/// session's sandbox (its snapshots), for tools that hand them to an agent.
#[async_trait]
pub trait SessionHost: Send + Sync {
    /// A signed URL for `port` of `session` (the session the front door handed the call),
    /// valid `ttl_seconds` (the host's default when `None`). 4030 when the session does not
    /// expose the port or the host serves no previews.
    async fn signed_url(
        &self,
        session: &SessionView,
        port: u16,
        ttl_seconds: Option<u64>,
    ) -> Result<crate::preview_signature::PreviewLink, WharfError>;

    /// Snapshots the sandbox of `session` (the session the front door handed the call, its
    /// turn held by that call) under `name`, as `POST /v1/sessions/{id}/snapshots` does.
    async fn snapshot(
        &self,
        session: &SessionView,
        name: Option<String>,
    ) -> Result<crate::snapshot_record::SnapshotRecord, WharfError>;

    /// Pauses `session` of `backend` (the session the front door handed the call) as
    /// soon as the call's turn ends, as `POST /v1/sessions/{id}/pause` does; 4030 when its
    /// backend cannot pause.
    fn pause_after_call(&self, backend: &str, session: &SessionView) -> Result<(), WharfError>;
}

/// The front door's [`SessionHost`], as a call carries it.
#[derive(Clone)]
pub struct SessionHostRef(pub std::sync::Arc<dyn SessionHost>);

impl std::fmt::Debug for SessionHostRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionHostRef")
    }
}

/// A session being created: what the backend needs to make its resources.
#[derive(Debug, Clone)]
pub struct SessionStart {
    /// The tenant whose request creates it ([`HOST_TENANT`](crate::quotas::HOST_TENANT)
    /// for a warm pool's).
    pub tenant: std::sync::Arc<str>,
    /// Session id.
    pub id: String,
    /// Caller's key.
    pub key: String,
    /// Owner claim (providers record it on the sandbox).
    pub owner: Option<String>,
    /// The caller's per-session config (`null` when none).
    pub config: Value,
    /// The session's hard lifetime, s (0 = none).
    pub max_lifetime_seconds: u64,
    /// Whether an already-created (warm) sandbox may serve it. False when the caller's
    /// containers are counted by a quota: the sandbox is then created in the provider's
    /// create turn, where the count is checked.
    pub warm: bool,
    /// What the host checked and resolved for its sandbox beyond its config.
    pub sandbox: SandboxGrant,
}

/// What the host checked and resolved for a new session's sandbox beyond its config, and
/// applies to the containers its provider creates.
#[derive(Debug, Clone, Default)]
pub struct SandboxGrant {
    /// The snapshot image it starts from (the tenant's own, checked by the host), granted
    /// for this session whatever `grants.images` say.
    pub from_image: Option<String>,
    /// The tenant's named volumes it mounts (resolved within the tenant by the host).
    pub volumes: Vec<crate::policy::SandboxVolume>,
}

impl SandboxGrant {
    /// Whether a sandbox made for nobody (a warm one) is the same: no snapshot image, no
    /// volume.
    pub fn is_plain(&self) -> bool {
        self.from_image.is_none() && self.volumes.is_empty()
    }
}

/// A loaded backend's behaviour.
#[async_trait]
pub trait Backend: Send + Sync {
    /// Runs one tool.
    async fn call(&self, call: ToolCall) -> Result<ToolResult, WharfError>;
    /// Creates a session's resources; returns its data.
    async fn initialize(&self, start: SessionStart) -> Result<Value, WharfError>;
    /// Releases a session's resources (must succeed when they are already gone).
    async fn cleanup(&self, session: &SessionView) -> Result<(), WharfError>;
    /// Whether a stored session's resources still exist.
    async fn discover(&self, session: &SessionView) -> Result<Discovery, WharfError>;
    /// Stops taking calls and shuts its instances down (those out come back first).
    async fn drain(&self);
    /// Its instance pool, to watch.
    fn pool(&self) -> std::sync::Arc<dyn PoolWatch>;
    /// Moving whole files in and out of a session's sandbox, for backends that have one.
    fn files(&self) -> Option<&dyn SandboxFiles> {
        None
    }
    /// Snapshots a session's sandbox's filesystem to `target`; the bytes it added to its
    /// base image. A backend without a sandbox it can snapshot refuses (4030).
    async fn snapshot(
        &self,
        session: &SessionView,
        target: crate::engines::container_types::SnapshotTarget,
    ) -> Result<u64, WharfError> {
        let _ = (session, target);
        Err(no_suspension(None))
    }
    /// The tools as the guest lists them now (contract 0.3.0's `tool-listing`): `None` when
    /// they are the fixed list of `describe`, which is every backend's answer but a 0.3.0
    /// resource backend's that lists its own.
    async fn list_tools(&self) -> Result<Option<Vec<ToolDescription>>, WharfError> {
        Ok(None)
    }
    /// Whether it can pause a session's sandbox ([`Backend::suspend`]).
    fn suspendable(&self) -> bool {
        false
    }
    /// Its warm pool, when it has one: started sandboxes waiting for a session now, and
    /// how many it keeps when full.
    fn warm_sandboxes(&self) -> Option<(usize, usize)> {
        None
    }
    /// Pauses a session's sandbox (memory and processes kept), or resumes it when
    /// `resume`; idempotent. A backend without a sandbox it can pause refuses (4030).
    async fn suspend(&self, session: &SessionView, resume: bool) -> Result<(), WharfError> {
        let _ = (session, resume);
        Err(no_suspension(None))
    }
}

/// The refusal of a pause, resume, snapshot or fork by a backend (`backend`, when known)
/// that cannot: 4030 naming the feature.
pub fn no_suspension(backend: Option<&str>) -> WharfError {
    let who = backend.map_or_else(|| "this backend".to_string(), |b| format!("backend `{b}`"));
    WharfError::new(
        crate::error_code::Code::Forbidden,
        format!(
            "{who} cannot pause or snapshot its sessions' sandboxes (provider feature `suspension`, contract 0.3.0)"
        ),
    )
}

/// Whole-file access to a session's sandbox (the files route), in slices.
#[async_trait]
pub trait SandboxFiles: Send + Sync {
    /// Size of a regular file, as the sandbox reports it.
    async fn size(&self, session: &SessionView, path: &str) -> Result<u64, WharfError>;
    /// Slice `index` of a file (slices of [`SLICE_BYTES`]).
    async fn slice(
        &self,
        session: &SessionView,
        path: &str,
        index: u64,
    ) -> Result<Vec<u8>, WharfError>;
    /// Replaces a file's content.
    async fn write(
        &self,
        session: &SessionView,
        path: &str,
        content: Vec<u8>,
    ) -> Result<(), WharfError>;
    /// Appends to a file.
    async fn append(
        &self,
        session: &SessionView,
        path: &str,
        content: Vec<u8>,
    ) -> Result<(), WharfError>;
}

/// The slice size of [`SandboxFiles::slice`].
pub const SLICE_BYTES: u64 = 4 << 20;
