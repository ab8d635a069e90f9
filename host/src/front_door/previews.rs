//! Previews (docs/operators.md, "Previews"): a person opening a port a session exposes
//! (`expose_ports`), through the preview listener, by the session's tenant token or a
//! signed URL. The port is reached through the sandbox's agent, so it works whatever the
//! sandbox's network; only ports the session exposes, only in the session's own containers.

use super::Wharf;
use super::session_sandbox::Lookup;
use crate::engines::KvScope;
use crate::engines::container_types::PortStream;
use crate::error_code::{Code, WharfError};
pub use crate::preview_signature::PreviewLink;
use crate::preview_signature::{
    self as signature, EXPIRES_PARAM, MAX_TTL_SECONDS, PREVIEW_EPOCH, PREVIEW_KEY,
    PREVIEW_KV_OWNER, SIGNATURE_PARAM,
};
use crate::principal::Principal;
use crate::runtime::backend::SessionHost;
use crate::runtime::guest_types::SessionView;
use crate::tenant::Tenant;
use rand_core::{OsRng, RngCore as _};

/// How long a signed URL lives when the caller does not say.
pub const DEFAULT_PREVIEW_TTL_SECONDS: u64 = 3600;

/// How old a session record a preview request may trust (this node checked it against the
/// store no longer ago): a page's many small requests then cost no read of the store each.
/// Another node's pause or release reaches this node's previews at most this late (its
/// sandbox is gone or frozen by then, so nothing more is reached).
const PREVIEW_SESSION_FRESHNESS: std::time::Duration = std::time::Duration::from_secs(1);

/// How a preview request proves it may open a port.
#[derive(Debug, Clone, Copy)]
pub enum PreviewAccess<'a> {
    /// A bearer token: its tenant's own sessions (an admin's: every one), of the backends
    /// its allowlists let it use.
    Caller(&'a Principal),
    /// A signed URL's expiry (Unix seconds) and signature.
    Signed {
        /// `wharf_preview_expires`.
        expires_at_s: u64,
        /// `wharf_preview_signature`.
        signature: &'a str,
    },
}

fn now_s() -> u64 {
    crate::clock::now_ms() / 1000
}

impl Wharf {
    /// The host's preview key, made once (the first node to need it writes it; every node
    /// sharing the store reads the same). It never changes, so a node reads it once.
    pub(super) async fn preview_key(&self) -> Result<&[u8], WharfError> {
        self.preview_key
            .get_or_try_init(|| self.stored_preview_key())
            .await
            .map(Vec::as_slice)
    }

    async fn stored_preview_key(&self) -> Result<Vec<u8>, WharfError> {
        let kv = &self.services.kv;
        let scope = KvScope::Backend;
        if let Some(key) = kv.get(PREVIEW_KV_OWNER, &scope, PREVIEW_KEY).await? {
            return Ok(key);
        }
        let mut fresh = vec![0u8; 32];
        OsRng.fill_bytes(&mut fresh);
        kv.insert_if_absent(PREVIEW_KV_OWNER, &scope, PREVIEW_KEY, &fresh)
            .await?;
        kv.get(PREVIEW_KV_OWNER, &scope, PREVIEW_KEY)
            .await?
            .ok_or_else(|| WharfError::internal("the preview key vanished from the store"))
    }

    /// A session's preview epoch (0 until its previews are first revoked).
    async fn preview_epoch(&self, session: &str) -> Result<u64, WharfError> {
        let scope = KvScope::Session(session.to_string());
        Ok(self
            .services
            .kv
            .get(PREVIEW_KV_OWNER, &scope, PREVIEW_EPOCH)
            .await?
            .and_then(|v| <[u8; 8]>::try_from(v.as_slice()).ok())
            .map_or(0, u64::from_be_bytes))
    }

    /// The ports a session exposes (host-owned session data).
    fn exposed(data: &serde_json::Value) -> Vec<u16> {
        data["expose_ports"]
            .as_array()
            .map(|ports| {
                ports
                    .iter()
                    .filter_map(|p| p.as_u64().and_then(|p| u16::try_from(p).ok()))
                    .collect()
            })
            .unwrap_or_default()
    }

    fn require_exposed(ports: &[u16], port: u16, session: &str) -> Result<(), WharfError> {
        if ports.contains(&port) {
            Ok(())
        } else {
            Err(WharfError::new(
                Code::Forbidden,
                format!(
                    "port {port} of session {session} is not exposed (the session's `expose_ports`: {ports:?})"
                ),
            ))
        }
    }

    /// A signed URL for `tenant`'s session's `port`, valid `ttl_seconds` (default 1 h, at
    /// most 7 days).
    pub async fn preview_url(
        &self,
        tenant: &Tenant,
        session_id: &str,
        port: u16,
        ttl_seconds: Option<u64>,
    ) -> Result<PreviewLink, WharfError> {
        let record = self.sessions.get(tenant, session_id).await?;
        self.mint(session_id, &record.data, port, ttl_seconds).await
    }

    /// A signed URL for `port` of a session the caller was already let into, whose data
    /// is `data`.
    async fn mint(
        &self,
        session_id: &str,
        data: &serde_json::Value,
        port: u16,
        ttl_seconds: Option<u64>,
    ) -> Result<PreviewLink, WharfError> {
        let Some(listen) = self.preview_addr() else {
            return Err(WharfError::new(
                Code::Forbidden,
                "this host serves no previews: set [server] preview_listen",
            ));
        };
        let ttl = ttl_seconds.unwrap_or(DEFAULT_PREVIEW_TTL_SECONDS);
        if ttl == 0 || ttl > MAX_TTL_SECONDS {
            return Err(WharfError::new(
                Code::InvalidType,
                format!("ttl_seconds must be 1 to {MAX_TTL_SECONDS}"),
            ));
        }
        Self::require_exposed(&Self::exposed(data), port, session_id)?;
        let expires_at_s = now_s().saturating_add(ttl);
        let epoch = self.preview_epoch(session_id).await?;
        let sig = signature::sign(
            self.preview_key().await?,
            session_id,
            port,
            expires_at_s,
            epoch,
        );
        let base = match &self.server.preview_domain {
            Some(domain) => format!(
                "http://{}.{domain}:{}/",
                signature::host_label(session_id, port),
                listen.port()
            ),
            None => format!("http://{listen}/{session_id}/{port}/"),
        };
        Ok(PreviewLink {
            url: format!("{base}?{EXPIRES_PARAM}={expires_at_s}&{SIGNATURE_PARAM}={sig}"),
            expires_at_s,
        })
    }

    /// Revokes every signed URL of `tenant`'s session (its preview epoch moves on); the
    /// new epoch.
    pub async fn revoke_previews(
        &self,
        tenant: &Tenant,
        session_id: &str,
    ) -> Result<u64, WharfError> {
        self.sessions.get(tenant, session_id).await?;
        let next = self.preview_epoch(session_id).await?.saturating_add(1);
        self.services
            .kv
            .set(
                PREVIEW_KV_OWNER,
                &KvScope::Session(session_id.to_string()),
                PREVIEW_EPOCH,
                &next.to_be_bytes(),
            )
            .await?;
        Ok(next)
    }

    /// One connection to `port` of a session's sandbox, for a request that proved `access`.
    /// A session that is not the caller's, a bad signature and a port the session does not
    /// expose are all refused before the sandbox is touched.
    pub async fn open_preview(
        &self,
        access: PreviewAccess<'_>,
        session_id: &str,
        port: u16,
    ) -> Result<PortStream, WharfError> {
        let record = match access {
            PreviewAccess::Caller(caller) => {
                let record = self
                    .sessions
                    .get_recent(
                        caller.session_tenant(),
                        session_id,
                        PREVIEW_SESSION_FRESHNESS,
                    )
                    .await?;
                // As every session route: a token kept to some backends opens only theirs.
                caller.require_tool(&record.backend, None)?;
                record
            }
            PreviewAccess::Signed {
                expires_at_s,
                signature: sig,
            } => {
                let key = self.preview_key().await?;
                let epoch = self.preview_epoch(session_id).await?;
                signature::verify(key, (session_id, port), expires_at_s, epoch, sig, now_s())
                    .map_err(|e| WharfError::new(Code::Forbidden, e.to_string()))?;
                self.sessions
                    .get_recent(&Tenant::Every, session_id, PREVIEW_SESSION_FRESHNESS)
                    .await?
            }
        };
        Self::require_exposed(&Self::exposed(&record.data), port, session_id)?;
        let engine = &self.services.containers;
        for lookup in [Lookup::Remembered, Lookup::Fresh] {
            let (owner, container) = self.running_sandbox(&record, lookup, "ports").await?;
            match engine.connect_port(&owner, &container, port).await {
                Ok(stream) => return Ok(stream),
                // Gone or replaced since it was remembered: looked up again.
                Err(_) if lookup == Lookup::Remembered => self.sandbox_targets.forget(session_id),
                // Nothing listens (yet): the sandbox's server is the dependency that failed.
                Err(crate::engines::EngineError::NotFound(m)) => {
                    return Err(WharfError::new(Code::DependencyFailure, m).retryable(true));
                }
                Err(other) => return Err(other.into()),
            }
        }
        Err(WharfError::internal(
            "a preview's sandbox lookup ended without an answer",
        ))
    }
}

/// The toolset's `preview_url` tool mints through this: the session is one the front door
/// handed the call, so it is not looked up again.
#[async_trait::async_trait]
impl SessionHost for Wharf {
    async fn signed_url(
        &self,
        session: &SessionView,
        port: u16,
        ttl_seconds: Option<u64>,
    ) -> Result<PreviewLink, WharfError> {
        self.mint(&session.id, &session.data, port, ttl_seconds)
            .await
    }

    async fn snapshot(
        &self,
        session: &SessionView,
        name: Option<String>,
    ) -> Result<crate::snapshot_record::SnapshotRecord, WharfError> {
        self.snapshot_in_call(session, name).await
    }

    fn pause_after_call(&self, backend: &str, session: &SessionView) -> Result<(), WharfError> {
        self.pause_when_free(backend, &session.id)
    }
}
