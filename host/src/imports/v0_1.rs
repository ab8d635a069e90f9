//! `wharf:plugin@0.1.0`'s imports, served by the current implementation: each function
//! converts its 0.1.0 records to 0.2.0's (the same shape), calls the 0.2.0 `Host` impl,
//! and converts the answer back. 0.1.0 has no `egress`, `kv.increment`,
//! `kv.compare-and-swap` or `log.panic`, so nothing here reaches them.

use crate::runtime::bindings::v0_1::backend::wharf::plugin0_1_0 as old;
use crate::runtime::bindings::v0_2::backend::wharf::plugin0_2_0 as new;
use crate::runtime::host_state::HostState;

type Answer<T> = wasmtime::Result<Result<T, old::types::Error>>;

fn error(e: new::types::Error) -> old::types::Error {
    old::types::Error {
        code: e.code,
        message: e.message,
        retryable: e.retryable,
        data: e.data,
    }
}

fn answer<A, B>(
    r: wasmtime::Result<Result<A, new::types::Error>>,
    f: impl FnOnce(A) -> B,
) -> Answer<B> {
    Ok(r?.map(f).map_err(error))
}

impl old::types::Host for HostState {}

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

impl old::container::Host for super::container::ContainerView<'_> {
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

impl old::exec::Host for super::container::ContainerView<'_> {
    async fn run(&mut self, request: old::exec::ExecRequest) -> Answer<old::exec::ExecOutput> {
        let request = new::exec::ExecRequest {
            container: request.container,
            command: match request.command {
                old::exec::Command::Argv(argv) => new::exec::Command::Argv(argv),
                old::exec::Command::Shell(line) => new::exec::Command::Shell(line),
            },
            env: request.env,
            workdir: request.workdir,
            user: request.user,
            stdin: request.stdin,
            timeout_ms: request.timeout_ms,
            max_output_bytes: request.max_output_bytes,
        };
        answer(new::exec::Host::run(self, request).await, |o| {
            old::exec::ExecOutput {
                exit_code: o.exit_code,
                stdout: o.stdout,
                stderr: o.stderr,
                stdout_truncated: o.stdout_truncated,
                stderr_truncated: o.stderr_truncated,
                timed_out: o.timed_out,
                duration_ms: o.duration_ms,
            }
        })
    }
}

fn scope(s: old::kv::Scope) -> new::kv::Scope {
    match s {
        old::kv::Scope::Backend => new::kv::Scope::Backend,
        old::kv::Scope::Session => new::kv::Scope::Session,
    }
}

impl old::kv::Host for super::kv::KvView<'_> {
    async fn get(&mut self, s: old::kv::Scope, key: String) -> Answer<Option<Vec<u8>>> {
        answer(new::kv::Host::get(self, scope(s), key).await, |v| v)
    }

    async fn set(&mut self, s: old::kv::Scope, key: String, value: Vec<u8>) -> Answer<()> {
        answer(new::kv::Host::set(self, scope(s), key, value).await, |v| v)
    }

    async fn delete(&mut self, s: old::kv::Scope, key: String) -> Answer<()> {
        answer(new::kv::Host::delete(self, scope(s), key).await, |v| v)
    }

    async fn list_keys(&mut self, s: old::kv::Scope, prefix: String) -> Answer<Vec<String>> {
        answer(
            new::kv::Host::list_keys(self, scope(s), prefix).await,
            |v| v,
        )
    }
}

impl old::log::Host for super::log::LogView<'_> {
    async fn log(&mut self, level: old::log::Level, message: String) -> wasmtime::Result<()> {
        use new::log::Level as L;
        use old::log::Level as O;
        let level = match level {
            O::Trace => L::Trace,
            O::Debug => L::Debug,
            O::Info => L::Info,
            O::Warn => L::Warn,
            O::Error => L::Error,
        };
        new::log::Host::log(self, level, message).await
    }
}
