//! Snapshots (issue 37): a session's sandbox filesystem committed to a local image through
//! its provider's `suspension.snapshot`, recorded per tenant in the store, listed, deleted,
//! and used to start new sessions (`SessionRequest::from_snapshot`). A snapshot belongs to
//! its tenant: another tenant neither sees, uses nor deletes it (4007); an admin sees all.
//! The sweep finishes what a crash left: a `making` row's image removed with the row, a
//! snapshot image no row names removed, and an archive no session holds
//! (`session_archives`).

use super::Wharf;
use crate::engines::container_types::{LABEL_NODE, SnapshotTarget};
use crate::error_code::{Code, WharfError};
use crate::snapshot_record::{MAX_SNAPSHOT_NAME_BYTES, SnapshotRecord, SnapshotState};
use crate::tenant::Tenant;
use serde_json::json;

/// The repository every snapshot image is tagged in.
const SNAPSHOT_REPOSITORY: &str = "wharf-snapshot";

/// A `making` row older than this is taken as stuck (its node lost it) and swept, ms.
const STUCK_AFTER_MS: u64 = 3_600_000;

/// A snapshot image no row names (its commit landed after a crash's row was swept) is
/// removed once it is this old, ms: a row is always written before its commit, so the
/// margin only covers clocks.
const ORPHAN_AFTER_MS: u64 = 10_000;

fn not_found(id: &str) -> WharfError {
    WharfError::session_not_found(format!("no snapshot `{id}`"))
}

fn quota_refusal(tenant: &str, quota: &str, limit: u64, detail: String) -> WharfError {
    let mut e = WharfError::new(
        Code::Forbidden,
        format!("tenant `{tenant}` is at its quota of {detail}; delete a snapshot first"),
    );
    e.data = Some(json!({"quota": quota, "limit": limit}));
    e
}

/// Checks a caller's name for a snapshot: printable, at most 128 bytes.
fn check_name(name: &str) -> Result<(), WharfError> {
    if name.len() > MAX_SNAPSHOT_NAME_BYTES || name.chars().any(char::is_control) {
        return Err(WharfError::new(
            Code::InvalidType,
            format!(
                "a snapshot's name is at most {MAX_SNAPSHOT_NAME_BYTES} bytes of printable text"
            ),
        ));
    }
    Ok(())
}

impl Wharf {
    /// Snapshots session `id` of `tenant` (its filesystem; not its memory or processes).
    pub async fn snapshot_session(
        &self,
        tenant: &Tenant,
        id: &str,
        name: Option<String>,
    ) -> Result<SnapshotRecord, WharfError> {
        if let Some(name) = &name {
            check_name(name)?;
        }
        // A frozen sandbox cannot copy its work dir: a paused session is resumed first.
        let (record, _turn, _) = self.begin_live_call(tenant, id, None).await?;
        self.snapshot_held(&record, name, None).await
    }

    /// Snapshots the session of a tool call in progress (the `snapshot_sandbox` tool):
    /// the call holds its turn, and its session is running.
    pub(super) async fn snapshot_in_call(
        &self,
        session: &crate::runtime::guest_types::SessionView,
        name: Option<String>,
    ) -> Result<SnapshotRecord, WharfError> {
        if let Some(name) = &name {
            check_name(name)?;
        }
        let record = self
            .sessions
            .store()
            .get_session(&session.id)
            .await?
            .ok_or_else(|| WharfError::session_not_found(format!("no session `{}`", session.id)))?;
        self.snapshot_held(&record, name, None).await
    }

    /// Snapshots `record`'s sandbox for a caller that holds the session's turn (as the
    /// archive of session `archive_of`, when given).
    pub(super) async fn snapshot_held(
        &self,
        record: &crate::session_record::SessionRecord,
        name: Option<String>,
        archive_of: Option<&str>,
    ) -> Result<SnapshotRecord, WharfError> {
        let id = record.id.as_str();
        let backend = self.backend(&record.backend)?;
        if !backend.behaviour().suspendable() {
            return Err(crate::runtime::backend::no_suspension(Some(
                &record.backend,
            )));
        }
        let owner = record.tenant.clone();
        let quota_tenant = super::quota_tenant_of(&owner);
        let limits = self
            .services
            .quotas
            .limits(quota_tenant, Some(&record.backend));
        let snapshot_id = format!("snap_{}", uuid::Uuid::new_v4().simple());
        let image = format!("{SNAPSHOT_REPOSITORY}:{snapshot_id}");
        let mut snapshot = SnapshotRecord {
            id: snapshot_id.clone(),
            tenant: owner.clone(),
            backend: record.backend.clone(),
            name: name.unwrap_or_else(|| format!("snapshot of {id}")),
            image: image.clone(),
            origin_session: id.to_string(),
            bytes: 0,
            state: SnapshotState::Making,
            created_at_ms: crate::clock::now_ms(),
            archive_of: archive_of.map(str::to_string),
        };
        let store = self.sessions.store();
        if !store
            .insert_snapshot(&snapshot, &self.node_id, limits.snapshots)
            .await?
        {
            return Err(quota_refusal(
                quota_tenant,
                "snapshots",
                limits.snapshots,
                format!("{} snapshots", limits.snapshots),
            ));
        }
        let target = SnapshotTarget {
            image: image.clone(),
            labels: vec![
                ("wharf.snapshot".into(), snapshot_id.clone()),
                ("wharf.snapshot.tenant".into(), owner.clone()),
                ("wharf.snapshot.backend".into(), record.backend.clone()),
                ("wharf.snapshot.origin".into(), id.to_string()),
                (LABEL_NODE.into(), self.node_id.clone()),
            ],
        };
        let started = std::time::Instant::now();
        let made = backend.behaviour().snapshot(&record.view(), target).await;
        let bytes = match made {
            Ok(bytes) => bytes,
            Err(e) => {
                self.forget_snapshot(&snapshot).await;
                return Err(e);
            }
        };
        let used: u64 = store
            .snapshot_usage(Some(&owner))
            .await?
            .first()
            .map_or(0, |(_, _, bytes)| *bytes);
        if used.saturating_add(bytes) > limits.snapshot_bytes {
            self.forget_snapshot(&snapshot).await;
            return Err(quota_refusal(
                quota_tenant,
                "snapshot_bytes",
                limits.snapshot_bytes,
                format!(
                    "{} snapshot bytes ({used} kept, this one {bytes})",
                    limits.snapshot_bytes
                ),
            ));
        }
        store.mark_snapshot_ready(&snapshot_id, bytes).await?;
        snapshot.bytes = bytes;
        snapshot.state = SnapshotState::Ready;
        tracing::info!(target: "wharf::audit", event = "session_snapshot", tenant = quota_tenant, backend = %record.backend, session = %id, snapshot = %snapshot_id, bytes, duration_ms = started.elapsed().as_millis() as u64);
        Ok(snapshot)
    }

    /// The snapshots `tenant` sees (an admin: all).
    pub async fn snapshots(&self, tenant: &Tenant) -> Result<Vec<SnapshotRecord>, WharfError> {
        self.sessions.store().list_snapshots(tenant.only()).await
    }

    /// One ready snapshot `tenant` sees; 4007 otherwise.
    pub async fn snapshot(&self, tenant: &Tenant, id: &str) -> Result<SnapshotRecord, WharfError> {
        match self.sessions.store().get_snapshot(id).await? {
            Some(s) if tenant.sees(&s.tenant) && s.state == SnapshotState::Ready => Ok(s),
            _ => Err(not_found(id)),
        }
    }

    /// Deletes a snapshot `tenant` sees: its image, then its row. One a sandbox still runs
    /// from is refused (4090).
    pub async fn delete_snapshot(&self, tenant: &Tenant, id: &str) -> Result<(), WharfError> {
        let snapshot = self.snapshot(tenant, id).await?;
        self.check_not_held_archive(&snapshot).await?;
        self.services
            .containers
            .remove_snapshot(&snapshot.image)
            .await
            .map_err(|e| match e {
                crate::engines::EngineError::Refused(m) if m.contains("in use") => {
                    WharfError::new(Code::Conflict, m)
                }
                other => other.into(),
            })?;
        self.sessions.store().delete_snapshot(id).await?;
        tracing::info!(target: "wharf::audit", event = "snapshot_delete", tenant = tenant.only().unwrap_or("-"), snapshot = %id);
        Ok(())
    }

    /// The image a new session of `backend` starts from: a ready snapshot of that backend
    /// that `tenant` sees (4007 otherwise, 4030 for another backend's).
    pub(super) async fn snapshot_image(
        &self,
        tenant: &Tenant,
        id: &str,
        backend: &str,
    ) -> Result<String, WharfError> {
        let snapshot = self.snapshot(tenant, id).await?;
        if snapshot.backend != backend {
            return Err(WharfError::new(
                Code::Forbidden,
                format!(
                    "snapshot `{id}` was made of a `{}` session; it starts only `{}` sessions",
                    snapshot.backend, snapshot.backend
                ),
            ));
        }
        Ok(snapshot.image)
    }

    /// Removes a snapshot's image (if it was made) and its row, after a failure or when
    /// its archive's session is gone; true when both went.
    pub(super) async fn forget_snapshot(&self, snapshot: &SnapshotRecord) -> bool {
        if let Err(e) = self
            .services
            .containers
            .remove_snapshot(&snapshot.image)
            .await
        {
            tracing::warn!(snapshot = %snapshot.id, "removing a snapshot's image: {e}");
            return false;
        }
        if let Err(e) = self.sessions.store().delete_snapshot(&snapshot.id).await {
            tracing::warn!(snapshot = %snapshot.id, "forgetting a snapshot: {}", e.message);
            return false;
        }
        true
    }

    /// Finishes what a crash left of snapshots: `making` rows of a dead incarnation of this
    /// node (or stuck for an hour) lose their image and row; snapshot images this node
    /// made that no row names are removed. Returns the snapshot ids removed.
    pub(super) async fn sweep_snapshots(&self) -> Result<Vec<String>, WharfError> {
        let store = self.sessions.store();
        let now = crate::clock::now_ms();
        let mut swept = Vec::new();
        for row in store
            .abandoned_snapshots(&self.node_id, now.saturating_sub(STUCK_AFTER_MS))
            .await?
        {
            if self
                .services
                .containers
                .remove_snapshot(&row.image)
                .await
                .is_ok()
            {
                store.delete_snapshot(&row.id).await?;
                swept.push(row.id);
            }
        }
        for image in self.services.containers.snapshot_images().await? {
            if image.node.as_deref() != Some(self.node_id.as_str())
                || now.saturating_sub(image.created_at_ms) < ORPHAN_AFTER_MS
                || store.get_snapshot(&image.snapshot).await?.is_some()
            {
                continue;
            }
            let reference = format!("{SNAPSHOT_REPOSITORY}:{}", image.snapshot);
            if self
                .services
                .containers
                .remove_snapshot(&reference)
                .await
                .is_ok()
            {
                swept.push(image.snapshot);
            }
        }
        swept.extend(self.sweep_archives().await?);
        Ok(swept)
    }
}

/// The most sessions one fork makes.
pub const MAX_FORK: u32 = 32;

impl Wharf {
    /// Forks session `id`: a snapshot of it, then `count` new sessions of the caller's
    /// tenant started from it at once (each with its own sandbox, `keys` naming them, the
    /// session `config` given to each, by default the origin's). A fork that cannot make them all removes what it
    /// made, the snapshot included.
    pub async fn fork_session(
        &self,
        caller_tenant: &str,
        view: &Tenant,
        id: &str,
        count: u32,
        keys: Option<Vec<String>>,
        config: Option<serde_json::Value>,
    ) -> Result<(SnapshotRecord, Vec<crate::session_record::SessionRecord>), WharfError> {
        if count == 0 || count > MAX_FORK {
            return Err(WharfError::new(
                Code::InvalidType,
                format!("a fork makes 1 to {MAX_FORK} sessions"),
            ));
        }
        if let Some(keys) = &keys
            && keys.len() != count as usize
        {
            return Err(WharfError::new(
                Code::InvalidType,
                format!("`keys` names {} sessions, `count` asks {count}", keys.len()),
            ));
        }
        if let Some(keys) = &keys
            && keys.iter().collect::<std::collections::HashSet<_>>().len() != keys.len()
        {
            return Err(WharfError::new(
                Code::InvalidType,
                "`keys` must name different sessions",
            ));
        }
        let snapshot = self
            .snapshot_session(view, id, Some(format!("fork of {id}")))
            .await?;
        // Unless the caller gives one, each fork gets its origin's config: the same
        // sandbox (isolation, user, network), never a weaker one.
        let config = match config {
            Some(config) => Some(config),
            None => self.sessions.kept_config(id).await?,
        };
        let requests = (0..count as usize).map(|i| super::SessionRequest {
            backend: snapshot.backend.clone(),
            key: keys.as_ref().map(|k| k[i].clone()),
            config: config.clone(),
            ttl_seconds: None,
            owner: None,
            holder: None,
            from_snapshot: Some(snapshot.id.clone()),
        });
        let made = futures::future::join_all(
            requests.map(|request| self.create_session(caller_tenant, request)),
        )
        .await;
        let mut sessions = Vec::new();
        let mut failure = None;
        for outcome in made {
            match outcome {
                Ok((record, _)) => sessions.push(record),
                Err(e) => failure = failure.or(Some(e)),
            }
        }
        if let Some(e) = failure {
            let tenant = Tenant::own(caller_tenant);
            for record in &sessions {
                if let Err(undo) = self.delete_session(&tenant, &record.id).await {
                    tracing::warn!(session = %record.id, "rolling back a fork: {}", undo.message);
                }
            }
            if let Err(undo) = self.delete_snapshot(view, &snapshot.id).await {
                tracing::warn!(snapshot = %snapshot.id, "rolling back a fork: {}", undo.message);
            }
            return Err(e);
        }
        tracing::info!(target: "wharf::audit", event = "session_fork", tenant = caller_tenant, session = %id, snapshot = %snapshot.id, count);
        Ok((snapshot, sessions))
    }
}
