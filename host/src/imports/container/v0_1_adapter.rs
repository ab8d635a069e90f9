//! `container` for `wharf:plugin@0.1.0` components, on the current implementation
//! (`imports::v0_1` has what the adapters share).

use crate::imports::v0_1::{Answer, answer};
use crate::runtime::bindings::v0_1::backend::wharf::plugin0_1_0 as old;
use crate::runtime::bindings::v0_2::backend::wharf::plugin0_2_0 as new;

fn container_info(i: new::container::ContainerInfo) -> old::container::ContainerInfo {
    use new::container::ContainerState as S;
    use old::container::ContainerState as O;
    old::container::ContainerInfo {
        id: i.id,
        name: i.name,
        image: i.image,
        state: match i.state {
            S::Created => O::Created,
            S::Running => O::Running,
            S::Paused => O::Paused,
            S::Exited => O::Exited,
            S::Dead => O::Dead,
            S::Unknown => O::Unknown,
        },
        labels: i.labels,
        created_at_ms: i.created_at_ms,
    }
}

impl old::container::Host for super::ContainerView<'_> {
    async fn create(
        &mut self,
        spec: old::container::ContainerSpec,
    ) -> Answer<old::container::ContainerInfo> {
        let spec = new::container::ContainerSpec {
            image: spec.image,
            command: spec.command,
            env: spec.env,
            workdir: spec.workdir,
            labels: spec.labels,
            mounts: spec
                .mounts
                .into_iter()
                .map(|m| new::container::Mount {
                    host_path: m.host_path,
                    container_path: m.container_path,
                    read_only: m.read_only,
                })
                .collect(),
            network: match spec.network {
                old::container::Network::None => new::container::Network::None,
                old::container::Network::Bridge => new::container::Network::Bridge,
                old::container::Network::Named(n) => new::container::Network::Named(n),
            },
            cpu_millis: spec.cpu_millis,
            memory_bytes: spec.memory_bytes,
            pids_limit: spec.pids_limit,
            read_only_root: spec.read_only_root,
        };
        answer(
            new::container::Host::create(self, spec).await,
            container_info,
        )
    }

    async fn start(&mut self, id: String) -> Answer<()> {
        answer(new::container::Host::start(self, id).await, |v| v)
    }

    async fn stop(&mut self, id: String, timeout_ms: u32) -> Answer<()> {
        answer(
            new::container::Host::stop(self, id, timeout_ms).await,
            |v| v,
        )
    }

    async fn remove(&mut self, id: String) -> Answer<()> {
        answer(new::container::Host::remove(self, id).await, |v| v)
    }

    async fn inspect(&mut self, id: String) -> Answer<Option<old::container::ContainerInfo>> {
        answer(new::container::Host::inspect(self, id).await, |i| {
            i.map(container_info)
        })
    }

    async fn list_owned(
        &mut self,
        session_id: Option<String>,
    ) -> Answer<Vec<old::container::ContainerInfo>> {
        answer(
            new::container::Host::list_owned(self, session_id).await,
            |list| list.into_iter().map(container_info).collect(),
        )
    }

    async fn copy_in(
        &mut self,
        id: String,
        path: String,
        content: Vec<u8>,
        mode: u32,
    ) -> Answer<()> {
        answer(
            new::container::Host::copy_in(self, id, path, content, mode).await,
            |v| v,
        )
    }

    async fn copy_out(&mut self, id: String, path: String, max_bytes: u64) -> Answer<Vec<u8>> {
        answer(
            new::container::Host::copy_out(self, id, path, max_bytes).await,
            |b| b,
        )
    }
}
