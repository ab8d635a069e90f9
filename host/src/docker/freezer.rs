//! Pausing and resuming owned containers with the engine's freezer (`docker pause` /
//! `unpause`): a paused container keeps its memory and processes and is scheduled no CPU.
//! Both are idempotent, so a transition a crash interrupted is finished by asking again.

use super::client::{Docker, OP_TIMEOUT};
use super::error::DockerError;
use super::labels::shorten;
use super::types::Owner;

impl Docker {
    /// Freezes an owned running container; a paused one is left as it is.
    pub async fn pause(&self, owner: &Owner, id: &str) -> Result<(), DockerError> {
        let found = self.require_owned(owner, id).await?;
        let state = found.state.unwrap_or_default();
        if state.paused == Some(true) {
            return Ok(());
        }
        if state.running != Some(true) {
            return Err(DockerError::Failed(format!(
                "container {} is not running, so it cannot be paused",
                shorten(id)
            )));
        }
        let api = self.api().await?;
        let paused = self
            .run("pause container", OP_TIMEOUT, api.pause_container(id))
            .await;
        self.settled(owner, id, paused, true).await
    }

    /// Thaws an owned paused container; a running one is left as it is.
    pub async fn resume(&self, owner: &Owner, id: &str) -> Result<(), DockerError> {
        let found = self.require_owned(owner, id).await?;
        if found.state.unwrap_or_default().paused != Some(true) {
            return Ok(());
        }
        let api = self.api().await?;
        let resumed = self
            .run("unpause container", OP_TIMEOUT, api.unpause_container(id))
            .await;
        self.settled(owner, id, resumed, false).await
    }

    /// A refused pause or unpause is still a success when another caller got the
    /// container to the state asked for meanwhile (the engine answers 409 then).
    async fn settled(
        &self,
        owner: &Owner,
        id: &str,
        outcome: Result<(), DockerError>,
        paused: bool,
    ) -> Result<(), DockerError> {
        let Err(e) = outcome else { return Ok(()) };
        let now = self.require_owned(owner, id).await?;
        if now.state.unwrap_or_default().paused == Some(paused) {
            return Ok(());
        }
        Err(e)
    }
}
