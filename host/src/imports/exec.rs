//! `exec`: commands in the caller's own containers, with the timeout clamped to what is
//! left of the call's deadline. If the call is dropped, the engine kills the
//! command's process group.

mod v0_1_adapter;

use super::HostImportsView;
use super::container::{ContainerView, HasContainer};
use crate::engines as engine;
use crate::runtime::bindings::v0_2::backend::wharf::plugin0_2_0::exec::{
    Command, ExecOutput, ExecRequest, Host,
};
use crate::runtime::bindings::v0_2::backend::wharf::plugin0_2_0::types::Error;
use crate::runtime::bindings::{v0_1, v0_2};
use std::time::Instant;
use wasmtime::component::Linker;

/// Links `exec` for components of every served contract version (0.1.0 through `v0_1`),
/// on the `container` import's view: commands run in the caller's own containers.
pub fn add_to_linker<T: HostImportsView>(linker: &mut Linker<T>) -> anyhow::Result<()> {
    v0_2::backend::wharf::plugin0_2_0::exec::add_to_linker::<T, HasContainer>(
        linker,
        HasContainer::view,
    )?;
    v0_1::backend::wharf::plugin0_1_0::exec::add_to_linker::<T, HasContainer>(
        linker,
        HasContainer::view,
    )?;
    Ok(())
}

impl Host for ContainerView<'_> {
    async fn run(&mut self, request: ExecRequest) -> wasmtime::Result<Result<ExecOutput, Error>> {
        let remaining_ms = self
            .call
            .deadline
            .map(|d| {
                d.saturating_duration_since(Instant::now())
                    .as_millis()
                    .min(u32::MAX as u128) as u32
            })
            .unwrap_or(u32::MAX);
        // Buffered by the host before the guest sees it: the host's cap, not the guest's.
        let max_output_bytes = self
            .ctx
            .guest_buffer_cap
            .clamp(u64::from(request.max_output_bytes))
            .try_into()
            .unwrap_or(request.max_output_bytes);
        let output = self.call.output.clone();
        self.engine_op("exec.run", async |engine, owner| {
            let container = request.container.clone();
            let req = engine::ExecRequest {
                container: request.container,
                command: match request.command {
                    Command::Argv(argv) => engine::Command::Argv(argv),
                    Command::Shell(line) => engine::Command::Shell(line),
                },
                env: request.env,
                workdir: request.workdir,
                user: request.user,
                stdin: request.stdin,
                timeout_ms: request.timeout_ms.min(remaining_ms).max(1),
                max_output_bytes,
            };
            let o = match &output {
                Some(sink) => engine.exec_streamed(&owner, req, sink).await?,
                None => engine.exec(&owner, req).await?,
            };
            tracing::info!(target: "wharf::audit", event = "exec", backend = %owner.backend, session = owner.session.as_deref().unwrap_or("-"), container = %container, exit = ?o.exit_code, timed_out = o.timed_out, duration_ms = o.duration_ms);
            Ok(ExecOutput {
                exit_code: o.exit_code,
                stdout: o.stdout,
                stderr: o.stderr,
                stdout_truncated: o.stdout_truncated,
                stderr_truncated: o.stderr_truncated,
                timed_out: o.timed_out,
                duration_ms: o.duration_ms,
            })
        })
        .await
    }
}
