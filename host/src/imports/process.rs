//! `process` (contract 0.3.0): background processes in the caller's own containers, run by
//! the sandbox agent the engine places in them. It shares `container`'s view: the same
//! owner (backend, session), the same engine, answers counted the same way. Waits are
//! clamped to what is left of the call's deadline.

use super::container::{ContainerView, HasContainer};
use super::{HostImportsView, guest_error};
use crate::engines::container_types::{
    self as engine, OutputChunk, OutputRead, ProcessInfo as AgentProcess, ProcessStart,
};
use crate::error_code::Code;
use crate::runtime::bindings::v0_2::backend::wharf::plugin0_2_0::exec::Command;
use crate::runtime::bindings::v0_2::backend::wharf::plugin0_2_0::types::Error;
use crate::runtime::bindings::v0_3::backend::wharf::plugin0_3_0::process::{
    Host, ProcessInfo, ProcessOutput, ProcessSpec, Signal,
};
use std::time::Instant;
use wasmtime::component::Linker;

/// Links `process` (0.3.0 on) on the `container` import's view.
pub fn add_to_linker<T: HostImportsView>(linker: &mut Linker<T>) -> anyhow::Result<()> {
    crate::runtime::bindings::v0_3::backend::wharf::plugin0_3_0::process::add_to_linker::<
        T,
        HasContainer,
    >(linker, HasContainer::view)?;
    Ok(())
}

type Answer<T> = wasmtime::Result<Result<T, Error>>;

fn info(p: AgentProcess) -> ProcessInfo {
    ProcessInfo {
        pid: p.pid,
        command: p.command,
        running: p.running,
        exit_code: p.exit_code,
        started_at_ms: p.started_at_ms,
        output_bytes: p.output_bytes,
        dropped_bytes: p.dropped_bytes,
    }
}

fn output(chunk: OutputChunk) -> ProcessOutput {
    ProcessOutput {
        offset: chunk.offset,
        data: chunk.data,
        dropped: chunk.dropped,
        process: info(chunk.process),
    }
}

fn signal(s: Signal) -> engine::Signal {
    match s {
        Signal::Term => engine::Signal::Term,
        Signal::Kill => engine::Signal::Kill,
        Signal::Int => engine::Signal::Int,
        Signal::Hup => engine::Signal::Hup,
        Signal::Quit => engine::Signal::Quit,
        Signal::Usr1 => engine::Signal::Usr1,
        Signal::Usr2 => engine::Signal::Usr2,
        Signal::Stop => engine::Signal::Stop,
        Signal::Cont => engine::Signal::Cont,
    }
}

impl Host for ContainerView<'_> {
    async fn start(&mut self, spec: ProcessSpec) -> Answer<ProcessInfo> {
        self.engine_op("process.start", async |engine, owner| {
            let container = spec.container;
            let start = ProcessStart {
                command: match spec.command {
                    Command::Argv(argv) => engine::Command::Argv(argv),
                    Command::Shell(line) => engine::Command::Shell(line),
                },
                env: spec.env,
                workdir: spec.workdir,
                user: spec.user,
                buffer_bytes: spec.buffer_bytes,
                terminal: spec.terminal.map(|t| engine::TerminalSize {
                    cols: t.cols,
                    rows: t.rows,
                }),
            };
            if start.terminal.is_some_and(|t| !t.fits()) {
                return Err(crate::engines::EngineError::Invalid(
                    "a terminal is 1 to 1000 columns and rows".into(),
                ));
            }
            let started = engine.start_process(&owner, &container, start).await?;
            tracing::info!(target: "wharf::audit", event = "process_start", backend = %owner.backend, session = owner.session.as_deref().unwrap_or("-"), container = %container, pid = started.pid);
            Ok(info(started))
        })
        .await
    }

    async fn output(
        &mut self,
        container: String,
        pid: u32,
        offset: u64,
        max_bytes: u32,
        wait_ms: u32,
    ) -> Answer<ProcessOutput> {
        let left_ms = self
            .call
            .deadline
            .map(|d| {
                u32::try_from(d.saturating_duration_since(Instant::now()).as_millis())
                    .unwrap_or(u32::MAX)
            })
            .unwrap_or(u32::MAX);
        let read = OutputRead {
            pid,
            offset,
            max_bytes,
            wait_ms: wait_ms.min(left_ms),
        };
        let cancel = self.call.cancel.clone();
        let waiting = async {
            self.engine_op("process.output", async |engine, owner| {
                Ok(output(
                    engine.process_output(&owner, &container, read).await?,
                ))
            })
            .await
        };
        let Some(cancel) = cancel else {
            return waiting.await;
        };
        // A caller that gave up ends the wait, so the guest can tell what it waits on.
        let answered = tokio::select! {
            biased;
            () = cancel.cancelled() => None,
            answer = waiting => Some(answer),
        };
        match answered {
            Some(answer) => answer,
            None => self.counter.counted(
                "process.output",
                Err(guest_error(
                    Code::Cancelled,
                    "the caller cancelled the call while it waited for output",
                )),
            ),
        }
    }

    async fn write_stdin(
        &mut self,
        container: String,
        pid: u32,
        data: Vec<u8>,
        close: bool,
    ) -> Answer<()> {
        self.engine_op("process.write_stdin", async |engine, owner| {
            engine
                .process_input(&owner, &container, pid, data, close)
                .await
        })
        .await
    }

    async fn send_signal(&mut self, container: String, pid: u32, sent: Signal) -> Answer<()> {
        self.engine_op("process.signal", async |engine, owner| {
            engine
                .signal_process(&owner, &container, pid, signal(sent))
                .await?;
            tracing::info!(target: "wharf::audit", event = "process_signal", backend = %owner.backend, session = owner.session.as_deref().unwrap_or("-"), container = %container, pid, signal = ?sent);
            Ok(())
        })
        .await
    }

    async fn list(&mut self, container: String) -> Answer<Vec<ProcessInfo>> {
        self.engine_op("process.list", async |engine, owner| {
            Ok(engine
                .list_processes(&owner, &container)
                .await?
                .into_iter()
                .map(info)
                .collect())
        })
        .await
    }
}
