//! `freezer` (contract 0.3.0): pausing and resuming the caller's own containers with the
//! engine's freezer, and committing one to the snapshot image the host named for the call. It shares `container`'s view: the same owner (backend, session), the
//! same engine, answers counted the same way; another backend's container answers like a
//! missing one.

use super::HostImportsView;
use super::container::{ContainerView, HasContainer};
use crate::engines::EngineError;
use crate::runtime::bindings::v0_2::backend::wharf::plugin0_2_0::types::Error;
use crate::runtime::bindings::v0_3::backend::wharf::plugin0_3_0::freezer::Host;
use wasmtime::component::Linker;

/// Links `freezer` (0.3.0 on) on the `container` import's view.
pub fn add_to_linker<T: HostImportsView>(linker: &mut Linker<T>) -> anyhow::Result<()> {
    crate::runtime::bindings::v0_3::backend::wharf::plugin0_3_0::freezer::add_to_linker::<
        T,
        HasContainer,
    >(linker, HasContainer::view)?;
    Ok(())
}

type Answer<T> = wasmtime::Result<Result<T, Error>>;

impl Host for ContainerView<'_> {
    async fn pause(&mut self, container: String) -> Answer<()> {
        self.engine_op("freezer.pause", async |engine, owner| {
            engine.pause(&owner, &container).await?;
            tracing::info!(target: "wharf::audit", event = "container_pause", backend = %owner.backend, session = owner.session.as_deref().unwrap_or("-"), container = %container);
            Ok(())
        })
        .await
    }

    async fn resume(&mut self, container: String) -> Answer<()> {
        self.engine_op("freezer.resume", async |engine, owner| {
            engine.resume(&owner, &container).await?;
            tracing::info!(target: "wharf::audit", event = "container_resume", backend = %owner.backend, session = owner.session.as_deref().unwrap_or("-"), container = %container);
            Ok(())
        })
        .await
    }

    async fn commit(&mut self, container: String) -> Answer<()> {
        let ask = self.call.snapshot.clone();
        self.engine_op("freezer.commit", async |engine, owner| {
            let Some(ask) = ask else {
                return Err(EngineError::Refused(
                    "no snapshot was asked of this call: the host names a snapshot's image".into(),
                ));
            };
            let Some(target) = ask.take() else {
                return Err(EngineError::Refused(
                    "this call has committed its snapshot already".into(),
                ));
            };
            let bytes = engine.commit(&owner, &container, target).await?;
            ask.committed(bytes);
            tracing::info!(target: "wharf::audit", event = "container_commit", backend = %owner.backend, session = owner.session.as_deref().unwrap_or("-"), container = %container, image = %target.image, bytes);
            Ok(())
        })
        .await
    }
}
