//! The named volumes a session's sandbox mounts (issue 37): allowed by `grants.volumes`,
//! and, for one that is not shared, held by no other container. The front door resolved
//! them within the session's tenant; this is the check under the backend's create turn,
//! where two sessions racing for one volume are settled.

use super::{ContainerView, engine_error};
use crate::engines::{self as engine, ContainerEngine};
use crate::error_code::Code;
use crate::imports::guest_error;
use crate::policy::{SandboxProfile, SandboxVolume};
use crate::runtime::bindings::v0_2::backend::wharf::plugin0_2_0::types::Error;

impl ContainerView<'_> {
    /// The named volumes `profile` mounts, once the grant allows them and no other
    /// sandbox holds one that is not shared (4030; 4090).
    pub(super) async fn checked_volumes(
        &self,
        engine: &dyn ContainerEngine,
        profile: Option<&SandboxProfile>,
    ) -> Result<Vec<engine::VolumeMount>, Error> {
        let Some(profile) = profile.filter(|p| !p.volumes.is_empty()) else {
            return Ok(Vec::new());
        };
        if !self.ctx.grants.volumes {
            return Err(guest_error(
                Code::Forbidden,
                format!(
                    "backend `{}` may not mount volumes (the operator's `grants.volumes` is off)",
                    self.counter.backend()
                ),
            ));
        }
        for volume in profile.volumes.iter().filter(|v| v.exclusive) {
            let users = engine
                .volume_users(&volume.engine_volume)
                .await
                .map_err(engine_error)?;
            if let Some(user) = users.first() {
                return Err(guest_error(
                    Code::Conflict,
                    SandboxVolume::held_by(&volume.name, user.session.as_deref()),
                ));
            }
        }
        Ok(profile
            .volumes
            .iter()
            .map(|v| engine::VolumeMount {
                volume: v.engine_volume.clone(),
                container_path: v.path.clone(),
                read_only: v.read_only,
            })
            .collect())
    }
}
