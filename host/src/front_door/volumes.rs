//! Named volumes (issue 37): storage a tenant creates by name, its sessions mount by name
//! (`volumes: [{name, path, read_only}]` in a sandbox session config, where the backend's
//! `grants.volumes` allows it), kept by the container engine under a name of the host's
//! choosing, outliving sessions and host restarts. A volume is its tenant's: another tenant
//! neither sees, mounts nor deletes it (4007); an admin sees all. One that is not `shared`
//! is mounted by one sandbox at a time.
//!
//! The engine keeps no size quota, so the sweep measures the volumes (`volume_sweep`) and
//! stops the sessions writing to those of a tenant past its `volume_bytes`; here,
//! read-write mounts are refused while it is past it (read-only mounts and deletes still
//! work). A sandbox can pass the quota by what it writes within one sweep interval.

use super::Wharf;
use crate::engines::EngineError;
use crate::engines::container_types::{
    LABEL_NODE, LABEL_VOLUME, LABEL_VOLUME_CREATED, LABEL_VOLUME_TENANT,
};
use crate::error_code::{Code, WharfError};
use crate::policy::SandboxVolume;
use crate::runtime::loaded_backend::LoadedBackend;
use crate::store::VolumeInsert;
use crate::tenant::Tenant;
use crate::volume_record::{MAX_VOLUME_NAME_BYTES, VolumeRecord, VolumeState, is_volume_name};
use serde_json::{Value, json};
use std::collections::BTreeMap;

fn not_found(volume: &str) -> WharfError {
    WharfError::session_not_found(format!(
        "no volume `{}`",
        volume.chars().take(80).collect::<String>()
    ))
}

fn quota_refusal(tenant: &str, quota: &str, limit: u64, detail: String) -> WharfError {
    let mut e = WharfError::new(
        Code::Forbidden,
        format!("tenant `{tenant}` is at its quota of {detail}"),
    );
    e.data = Some(json!({"quota": quota, "limit": limit}));
    e
}

fn engine_refusal(e: EngineError) -> WharfError {
    match e {
        EngineError::Refused(m) if m.contains("in use") => WharfError::new(Code::Conflict, m),
        other => other.into(),
    }
}

impl Wharf {
    /// Creates volume `name` for `tenant` (the caller's own tenant, even for an admin).
    pub async fn create_volume(
        &self,
        tenant: &str,
        name: &str,
        shared: bool,
    ) -> Result<VolumeRecord, WharfError> {
        if !is_volume_name(name) {
            return Err(WharfError::new(
                Code::InvalidType,
                format!(
                    "a volume's name is 1 to {MAX_VOLUME_NAME_BYTES} ASCII letters, digits, `-`, `_` or `.`, starting with a letter or digit"
                ),
            ));
        }
        let engine = self.services.containers.clone();
        engine.configured()?;
        let limits = self.services.quotas.limits(tenant, None);
        let id = format!("vol_{}", uuid::Uuid::new_v4().simple());
        let now = crate::clock::now_ms();
        let mut volume = VolumeRecord {
            engine_volume: format!("wharf-vol-{}", &id[4..]),
            id,
            tenant: tenant.to_string(),
            name: name.to_string(),
            shared,
            bytes: 0,
            measured_at_ms: 0,
            state: VolumeState::Making,
            created_at_ms: now,
        };
        let store = self.sessions.store();
        match store
            .insert_volume(&volume, &self.node_id, limits.volumes)
            .await?
        {
            VolumeInsert::Inserted => {}
            VolumeInsert::NameTaken => {
                return Err(WharfError::new(
                    Code::Conflict,
                    format!("tenant `{tenant}` has a volume named `{name}` already"),
                ));
            }
            VolumeInsert::AtQuota => {
                self.metrics.tenants.record_refusal(tenant, "volumes");
                return Err(quota_refusal(
                    tenant,
                    "volumes",
                    limits.volumes,
                    format!("{} volumes; delete one first", limits.volumes),
                ));
            }
        }
        let labels = [
            (LABEL_VOLUME.to_string(), volume.id.clone()),
            (LABEL_VOLUME_TENANT.to_string(), tenant.to_string()),
            (LABEL_VOLUME_CREATED.to_string(), now.to_string()),
            (LABEL_NODE.to_string(), self.node_id.clone()),
        ];
        if let Err(e) = engine.create_volume(&volume.engine_volume, &labels).await {
            if let Err(undo) = store.delete_volume(&volume.id).await {
                tracing::warn!(volume = %volume.id, "forgetting a failed volume: {}", undo.message);
            }
            return Err(e.into());
        }
        store.mark_volume_ready(&volume.id).await?;
        volume.state = VolumeState::Ready;
        tracing::info!(target: "wharf::audit", event = "volume_create", tenant, volume = %volume.id, name, shared);
        Ok(volume)
    }

    /// The volumes `tenant` sees (an admin: all).
    pub async fn volumes(&self, tenant: &Tenant) -> Result<Vec<VolumeRecord>, WharfError> {
        self.sessions.store().list_volumes(tenant.only()).await
    }

    /// One ready volume `tenant` sees, by id, or by name within `own` (the caller's own
    /// tenant); 4007 otherwise.
    pub async fn volume(
        &self,
        tenant: &Tenant,
        own: &str,
        volume: &str,
    ) -> Result<VolumeRecord, WharfError> {
        let store = self.sessions.store();
        let found = if volume.starts_with("vol_") {
            store.get_volume(volume).await?
        } else if is_volume_name(volume) {
            store.volume_named(own, volume).await?
        } else {
            None
        };
        match found {
            Some(v) if tenant.sees(&v.tenant) && v.state == VolumeState::Ready => Ok(v),
            _ => Err(not_found(volume)),
        }
    }

    /// Deletes a volume `tenant` sees, its files with it. One a sandbox mounts is refused
    /// (4090).
    pub async fn delete_volume(
        &self,
        tenant: &Tenant,
        own: &str,
        volume: &str,
    ) -> Result<VolumeRecord, WharfError> {
        let found = self.volume(tenant, own, volume).await?;
        self.services
            .containers
            .remove_volume(&found.engine_volume)
            .await
            .map_err(engine_refusal)?;
        self.sessions.store().delete_volume(&found.id).await?;
        self.idle_volumes.set(&found.id, false);
        tracing::info!(target: "wharf::audit", event = "volume_delete", tenant = %found.tenant, volume = %found.id, name = %found.name);
        Ok(found)
    }

    /// The volumes a new session of `tenant` on `backend` mounts, from its `config`:
    /// each named one the tenant's own (4007 otherwise), none read-write while the
    /// tenant's volumes hold more than its quota (4030). Empty for a backend that is not a
    /// sandbox provider (its config is its own).
    pub(super) async fn session_volumes(
        &self,
        tenant: &str,
        backend: &LoadedBackend,
        config: &Value,
    ) -> Result<Vec<SandboxVolume>, WharfError> {
        if backend.behaviour().files().is_none() {
            return Ok(Vec::new());
        }
        let asks = crate::sandbox_toolset::session_spec::volume_asks(config)?;
        if asks.is_empty() {
            return Ok(Vec::new());
        }
        let own = Tenant::own(tenant);
        // Docker makes an empty volume of any name a mount asks for: a volume another
        // engine holds (another node's) must be refused here, not replaced by an empty one.
        let mut volumes = Vec::with_capacity(asks.len());
        for ask in asks {
            let found = self.volume(&own, tenant, &ask.name).await?;
            if !self
                .services
                .containers
                .has_volume(&found.engine_volume)
                .await?
            {
                return Err(WharfError::new(
                    Code::Conflict,
                    format!(
                        "volume `{}` is not on this node's container engine (it lives where it was created); create the session on that node",
                        found.name
                    ),
                ));
            }
            // Mounted now: the next sweep measures it.
            self.idle_volumes.set(&found.id, false);
            // Checked here for its code (4090); `container.create` checks again under the
            // backend's create turn, where a race between two sessions is settled.
            if !found.shared
                && let Some(user) = self
                    .services
                    .containers
                    .volume_users(&found.engine_volume)
                    .await?
                    .first()
            {
                return Err(WharfError::new(
                    Code::Conflict,
                    SandboxVolume::held_by(&found.name, user.session.as_deref()),
                ));
            }
            volumes.push(SandboxVolume {
                name: ask.name,
                engine_volume: found.engine_volume,
                path: ask.path,
                read_only: ask.read_only,
                exclusive: !found.shared,
            });
        }
        if volumes.iter().any(|v| !v.read_only) {
            let limit = self.services.quotas.limits(tenant, None).volume_bytes;
            let held = self.tenant_volume_bytes(tenant).await?;
            if held > limit {
                self.metrics.tenants.record_refusal(tenant, "volume_bytes");
                return Err(quota_refusal(
                    tenant,
                    "volume_bytes",
                    limit,
                    format!(
                        "{limit} volume bytes ({held} held): volumes mount read-only until some are deleted"
                    ),
                ));
            }
        }
        Ok(volumes)
    }

    async fn tenant_volume_bytes(&self, tenant: &str) -> Result<u64, WharfError> {
        Ok(self
            .sessions
            .store()
            .list_volumes(Some(tenant))
            .await?
            .iter()
            .fold(0u64, |sum, v| sum.saturating_add(v.bytes)))
    }

    /// Each tenant's (tenant, volumes, bytes last measured), for `/metrics`.
    pub(super) async fn volume_usage(&self) -> Result<Vec<(String, u64, u64)>, WharfError> {
        let mut usage: BTreeMap<String, (u64, u64)> = BTreeMap::new();
        for v in self.sessions.store().list_volumes(None).await? {
            let entry = usage.entry(v.tenant).or_default();
            entry.0 += 1;
            entry.1 = entry.1.saturating_add(v.bytes);
        }
        Ok(usage
            .into_iter()
            .map(|(tenant, (count, bytes))| (tenant, count, bytes))
            .collect())
    }
}
