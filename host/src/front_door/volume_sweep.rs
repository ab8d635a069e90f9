//! The sweep's part in named volumes (`front_door/volumes`): what a crash left is finished
//! (`making` rows of a dead incarnation of this node, or stuck, lose their engine volume
//! and row; this node's engine volumes that no row names are removed), this node's volumes
//! are measured — the ones a sandbox mounts, or mounted since, every sweep; the others at
//! most every [`IDLE_REMEASURE_MS`], since their files have not changed — and the sessions
//! that write to the volumes of a tenant past its `volume_bytes` are stopped.

use super::Wharf;
use crate::engines::EngineError;
use crate::error_code::WharfError;
use crate::tenant::Tenant;
use crate::volume_record::{VolumeRecord, VolumeState};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

/// A `making` row older than this is taken as stuck (its node lost it) and swept, ms.
const STUCK_AFTER_MS: u64 = 600_000;

/// An idle volume (no container mounted it when it was last measured, and no session of
/// this node has since) is measured again after this long anyway, ms: a sandbox of another
/// node on the same engine may have mounted it in between.
const IDLE_REMEASURE_MS: u64 = 300_000;

/// An engine volume no row names (its create landed after a crash's row was swept) is
/// removed once it is this old, ms: a row is always written before its create.
const ORPHAN_AFTER_MS: u64 = 10_000;

/// The volumes of this node measured while no container mounted them, and not resolved
/// for a session since: their files have not changed, so a sweep does not walk them again
/// (for [`IDLE_REMEASURE_MS`]). At most one entry per volume this node's engine holds
/// (each sweep forgets the others).
#[derive(Debug, Default)]
pub(super) struct IdleVolumes(std::sync::Mutex<HashSet<String>>);

impl IdleVolumes {
    /// Records whether `volume` was idle when measured (false: measure it next sweep).
    pub(super) fn set(&self, volume: &str, idle: bool) {
        let mut set = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if idle {
            set.insert(volume.to_string());
        } else {
            set.remove(volume);
        }
    }

    /// Forgets every volume but `seen` (one deleted by another node, say).
    fn keep_only(&self, seen: &HashSet<String>) {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .retain(|v| seen.contains(v));
    }

    fn is_idle(&self, volume: &str) -> bool {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .contains(volume)
    }
}

impl Wharf {
    /// The sweep of volumes (see the module's note). Returns the volume ids removed.
    pub(super) async fn sweep_volumes(&self) -> Result<Vec<String>, WharfError> {
        let store = self.sessions.store();
        let engine = self.services.containers.clone();
        let now = crate::clock::now_ms();
        let mut swept = Vec::new();
        for row in store
            .abandoned_volumes(&self.node_id, now.saturating_sub(STUCK_AFTER_MS))
            .await?
        {
            if engine.remove_volume(&row.engine_volume).await.is_ok() {
                store.delete_volume(&row.id).await?;
                swept.push(row.id);
            }
        }
        // Every row once: the quota is each tenant's across nodes.
        let mut rows: HashMap<String, VolumeRecord> = store
            .list_volumes(None)
            .await?
            .into_iter()
            .map(|v| (v.id.clone(), v))
            .collect();
        let mut measured = BTreeSet::new();
        let mut writers: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let mut seen = HashSet::new();
        for found in engine.engine_volumes().await? {
            if found.node.as_deref() != Some(self.node_id.as_str()) {
                continue;
            }
            seen.insert(found.volume.clone());
            let Some(row) = rows.get_mut(&found.volume) else {
                if now.saturating_sub(found.created_at_ms) >= ORPHAN_AFTER_MS
                    && engine.remove_volume(&found.name).await.is_ok()
                {
                    swept.push(found.volume);
                }
                continue;
            };
            if row.engine_volume != found.name || row.state != VolumeState::Ready {
                continue;
            }
            let users = engine.volume_users(&found.name).await.ok();
            let idle = users.as_ref().is_some_and(Vec::is_empty);
            for user in users.into_iter().flatten().filter(|u| !u.read_only) {
                if let Some(session) = user.session {
                    writers
                        .entry(row.tenant.clone())
                        .or_default()
                        .insert(session);
                }
            }
            if idle
                && self.idle_volumes.is_idle(&row.id)
                && now.saturating_sub(row.measured_at_ms) < IDLE_REMEASURE_MS
            {
                continue;
            }
            row.bytes = match engine.volume_bytes(&found.name).await {
                Ok(bytes) => bytes,
                // More files than a measurement walks: past any quota.
                Err(EngineError::TooLarge(_)) => u64::MAX,
                Err(e) => {
                    tracing::debug!(volume = %row.id, "measuring a volume skipped: {e}");
                    continue;
                }
            };
            store.set_volume_bytes(&row.id, row.bytes, now).await?;
            self.idle_volumes.set(&row.id, idle);
            measured.insert(row.tenant.clone());
        }
        self.idle_volumes.keep_only(&seen);
        for tenant in measured {
            let held = rows
                .values()
                .filter(|v| v.tenant == tenant)
                .fold(0u64, |sum, v| sum.saturating_add(v.bytes));
            let writing = writers.remove(&tenant).unwrap_or_default();
            self.stop_writers_past_quota(&tenant, held, writing).await;
        }
        Ok(swept)
    }

    /// When `held` is past `tenant`'s `volume_bytes`, stops the sessions `writing` to its
    /// volumes (audited).
    async fn stop_writers_past_quota(&self, tenant: &str, held: u64, writing: BTreeSet<String>) {
        let limit = self.services.quotas.limits(tenant, None).volume_bytes;
        if held <= limit {
            return;
        }
        let mut stopped = Vec::new();
        for session in writing {
            match self.delete_session(&Tenant::Every, &session).await {
                Ok(_) => stopped.push(session),
                Err(e) => {
                    tracing::warn!(session = %session, "stopping a session past its volume quota: {}", e.message)
                }
            }
        }
        tracing::warn!(target: "wharf::audit", event = "volume_quota_exceeded", tenant, bytes = held, limit, stopped = ?stopped);
    }
}
