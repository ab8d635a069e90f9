//! `exec` for `wharf:plugin@0.1.0` components, on the current implementation
//! (`imports::v0_1` has what the adapters share).

use crate::imports::v0_1::{Answer, answer};
use crate::runtime::bindings::v0_1::backend::wharf::plugin0_1_0 as old;
use crate::runtime::bindings::v0_2::backend::wharf::plugin0_2_0 as new;

impl old::exec::Host for crate::imports::container::ContainerView<'_> {
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
