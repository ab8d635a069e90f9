//! A provider built against 0.2.0 or 0.3.0: 0.2.0's `provider` export, plus 0.3.0's
//! `processes` export (background processes in its sandboxes) and `suspension` export
//! (pausing them) when the component has them, all loaded from one instance. The host's vocabulary for processes is the sandbox
//! agent's (`engines::container_types`); the conversions live here.

use crate::engines::container_types::{Command, OutputChunk, ProcessInfo, ProcessStart, Signal};
use crate::runtime::bindings::v0_2::provider::exports::wharf::plugin0_2_0::provider::Guest;
use crate::runtime::bindings::v0_2::provider::{SandboxProvider, SandboxProviderIndices};
use crate::runtime::bindings::v0_3::backend::wharf::plugin0_3_0::process as wit;
use crate::runtime::bindings::v0_3::provider::exports::wharf::plugin0_3_0::processes::{
    Guest as ProcessesGuest, GuestIndices as ProcessesIndices, StartRequest,
};
use crate::runtime::bindings::v0_3::provider::exports::wharf::plugin0_3_0::suspension::{
    Guest as SuspensionGuest, GuestIndices as SuspensionIndices,
};
use crate::runtime::guest_types::GuestError;
use crate::runtime::host_state::HostState;
use crate::runtime::instance_pool::{IndexedPre, WorldIndices};
use anyhow::Result;
use wasmtime::Store;
use wasmtime::component::{Instance, InstancePre};

/// A pre-instantiated 0.2.0 or 0.3.0 provider.
pub type ProviderPre02 = IndexedPre<ProviderIndices02>;

/// Where a 0.2.0 or 0.3.0 provider's exports are; `processes` and `suspension` are absent
/// before 0.3.0.
#[derive(Clone)]
pub struct ProviderIndices02 {
    base: SandboxProviderIndices,
    processes: Option<ProcessesIndices>,
    suspension: Option<SuspensionIndices>,
}

/// One instance's exports of a 0.2.0 or 0.3.0 provider.
pub struct Provider02 {
    base: SandboxProvider,
    processes: Option<ProcessesGuest>,
    suspension: Option<SuspensionGuest>,
}

impl WorldIndices for ProviderIndices02 {
    type Exports = Provider02;

    fn new(pre: &InstancePre<HostState>) -> Result<Self> {
        Ok(Self {
            base: SandboxProviderIndices::new(pre)?,
            processes: ProcessesIndices::new(pre).ok(),
            suspension: SuspensionIndices::new(pre).ok(),
        })
    }

    fn load(&self, store: &mut Store<HostState>, instance: &Instance) -> Result<Provider02> {
        Ok(Provider02 {
            base: self.base.load(&mut *store, instance)?,
            processes: self
                .processes
                .as_ref()
                .map(|indices| indices.load(&mut *store, instance))
                .transpose()?,
            suspension: self
                .suspension
                .as_ref()
                .map(|indices| indices.load(&mut *store, instance))
                .transpose()?,
        })
    }
}

impl Provider02 {
    /// The 0.2.0 `provider` export.
    pub fn guest(&self) -> &Guest {
        self.base.wharf_plugin0_2_0_provider()
    }

    /// The `processes` export, if the component has it.
    pub fn processes(&self) -> Option<&ProcessesGuest> {
        self.processes.as_ref()
    }

    /// The `suspension` export, if the component has it.
    pub fn suspension(&self) -> Option<&SuspensionGuest> {
        self.suspension.as_ref()
    }
}

/// The answer of a provider without background processes (4030 naming the feature).
pub(crate) fn refused() -> GuestError {
    GuestError {
        code: 4030,
        message:
            "this provider does not run background processes (feature `processes`, contract 0.3.0)"
                .into(),
        retryable: false,
        data: None,
    }
}

impl From<wit::ProcessInfo> for ProcessInfo {
    fn from(p: wit::ProcessInfo) -> Self {
        ProcessInfo {
            pid: p.pid,
            command: p.command,
            running: p.running,
            exit_code: p.exit_code,
            started_at_ms: p.started_at_ms,
            terminal: false,
            output_bytes: p.output_bytes,
            dropped_bytes: p.dropped_bytes,
        }
    }
}

impl From<wit::ProcessOutput> for OutputChunk {
    fn from(o: wit::ProcessOutput) -> Self {
        OutputChunk {
            offset: o.offset,
            data: o.data,
            dropped: o.dropped,
            process: o.process.into(),
        }
    }
}

impl From<Signal> for wit::Signal {
    fn from(s: Signal) -> Self {
        match s {
            Signal::Term => wit::Signal::Term,
            Signal::Kill => wit::Signal::Kill,
            Signal::Int => wit::Signal::Int,
            Signal::Hup => wit::Signal::Hup,
            Signal::Quit => wit::Signal::Quit,
            Signal::Usr1 => wit::Signal::Usr1,
            Signal::Usr2 => wit::Signal::Usr2,
            Signal::Stop => wit::Signal::Stop,
            Signal::Cont => wit::Signal::Cont,
        }
    }
}

impl From<&ProcessStart> for StartRequest {
    fn from(start: &ProcessStart) -> Self {
        let (command, argv) = match &start.command {
            Command::Shell(line) => (line.clone(), Vec::new()),
            Command::Argv(argv) => (String::new(), argv.clone()),
        };
        StartRequest {
            command,
            argv,
            env: start.env.clone(),
            workdir: start.workdir.clone(),
            buffer_bytes: start.buffer_bytes,
            user: start.user.clone(),
            terminal: start.terminal.map(|t| wit::TerminalSize {
                cols: t.cols,
                rows: t.rows,
            }),
        }
    }
}

/// What a provider's `suspension` export is asked to do with a sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SuspendOp {
    /// Freeze it.
    Pause,
    /// Thaw it.
    Resume,
    /// Commit its filesystem to the snapshot image the call names.
    Snapshot,
}

/// The answer of a provider that cannot pause (4030 naming the feature).
pub(crate) fn cannot_pause() -> GuestError {
    GuestError {
        code: 4030,
        message: "this provider cannot pause its sandboxes (feature `suspension`, contract 0.3.0)"
            .into(),
        retryable: false,
        data: None,
    }
}
