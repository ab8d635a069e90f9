//! A provider built against 0.2.0 or 0.3.0: 0.2.0's `provider` export, plus 0.3.0's
//! `processes` export (background processes in its sandboxes) and `suspension` export
//! (pausing them) when the component has them, all loaded from one instance. The host's vocabulary for processes is the sandbox
//! agent's (`engines::container_types`); the conversions live here.

use crate::engines::container_types::{Command, OutputChunk, ProcessInfo, ProcessStart, Signal};
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
use anyhow::Result;
use wasmtime::component::InstancePre;
use wasmtime::{Engine, Store};

/// A pre-instantiated 0.2.0 or 0.3.0 provider.
#[derive(Clone)]
pub struct ProviderPre02 {
    pre: InstancePre<HostState>,
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

impl ProviderPre02 {
    /// Wraps a component's `InstancePre`; `processes` and `suspension` are looked up, and
    /// absent before 0.3.0.
    pub fn new(pre: InstancePre<HostState>) -> Result<Self> {
        Ok(Self {
            base: SandboxProviderIndices::new(&pre)?,
            processes: ProcessesIndices::new(&pre).ok(),
            suspension: SuspensionIndices::new(&pre).ok(),
            pre,
        })
    }

    /// The engine it was compiled for.
    pub fn engine(&self) -> &Engine {
        self.pre.engine()
    }

    /// A new instance in `store`.
    pub async fn instantiate_async(&self, store: &mut Store<HostState>) -> Result<Provider02> {
        let instance = self.pre.instantiate_async(&mut *store).await?;
        let base = self.base.load(&mut *store, &instance)?;
        let processes = match &self.processes {
            Some(indices) => Some(indices.load(&mut *store, &instance)?),
            None => None,
        };
        let suspension = match &self.suspension {
            Some(indices) => Some(indices.load(&mut *store, &instance)?),
            None => None,
        };
        Ok(Provider02 {
            base,
            processes,
            suspension,
        })
    }
}

type Answer<T> = wasmtime::Result<Result<T, GuestError>>;

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

fn info(p: wit::ProcessInfo) -> ProcessInfo {
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

fn wit_signal(s: Signal) -> wit::Signal {
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

impl Provider02 {
    /// The 0.2.0 `provider` export.
    pub fn wharf_plugin0_2_0_provider(
        &self,
    ) -> &crate::runtime::bindings::v0_2::provider::exports::wharf::plugin0_2_0::provider::Guest
    {
        self.base.wharf_plugin0_2_0_provider()
    }

    /// Whether the provider runs background processes (`processes.available`).
    pub async fn processes_available(
        &self,
        store: &mut Store<HostState>,
    ) -> wasmtime::Result<bool> {
        match &self.processes {
            Some(g) => g.call_available(&mut *store).await,
            None => Ok(false),
        }
    }

    /// `processes.start`.
    pub async fn start_process(
        &self,
        store: &mut Store<HostState>,
        sandbox: &str,
        start: &ProcessStart,
    ) -> Answer<ProcessInfo> {
        let Some(g) = &self.processes else {
            return Ok(Err(refused()));
        };
        let (command, argv) = match &start.command {
            Command::Shell(line) => (line.clone(), Vec::new()),
            Command::Argv(argv) => (String::new(), argv.clone()),
        };
        let request = StartRequest {
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
        };
        Ok(g.call_start(&mut *store, sandbox, &request)
            .await?
            .map(info)
            .map_err(Into::into))
    }

    /// `processes.output`.
    pub async fn process_output(
        &self,
        store: &mut Store<HostState>,
        sandbox: &str,
        read: crate::engines::container_types::OutputRead,
    ) -> Answer<OutputChunk> {
        let Some(g) = &self.processes else {
            return Ok(Err(refused()));
        };
        Ok(g.call_output(
            &mut *store,
            sandbox,
            read.pid,
            read.offset,
            read.max_bytes,
            read.wait_ms,
        )
        .await?
        .map(|o| OutputChunk {
            offset: o.offset,
            data: o.data,
            dropped: o.dropped,
            process: info(o.process),
        })
        .map_err(Into::into))
    }

    /// `processes.write-stdin`.
    pub async fn process_input(
        &self,
        store: &mut Store<HostState>,
        sandbox: &str,
        pid: u32,
        data: &[u8],
        close: bool,
    ) -> Answer<()> {
        let Some(g) = &self.processes else {
            return Ok(Err(refused()));
        };
        Ok(g.call_write_stdin(&mut *store, sandbox, pid, data, close)
            .await?
            .map_err(Into::into))
    }

    /// `processes.send-signal`.
    pub async fn signal_process(
        &self,
        store: &mut Store<HostState>,
        sandbox: &str,
        pid: u32,
        signal: Signal,
    ) -> Answer<()> {
        let Some(g) = &self.processes else {
            return Ok(Err(refused()));
        };
        Ok(
            g.call_send_signal(&mut *store, sandbox, pid, wit_signal(signal))
                .await?
                .map_err(Into::into),
        )
    }

    /// `processes.list`.
    pub async fn list_processes(
        &self,
        store: &mut Store<HostState>,
        sandbox: &str,
    ) -> Answer<Vec<ProcessInfo>> {
        let Some(g) = &self.processes else {
            return Ok(Err(refused()));
        };
        Ok(g.call_list(&mut *store, sandbox)
            .await?
            .map(|list| list.into_iter().map(info).collect())
            .map_err(Into::into))
    }

    /// Whether the provider can pause its sandboxes (`suspension.available`).
    pub async fn suspension_available(
        &self,
        store: &mut Store<HostState>,
    ) -> wasmtime::Result<bool> {
        match &self.suspension {
            Some(g) => g.call_available(&mut *store).await,
            None => Ok(false),
        }
    }

    /// `suspension.pause`, `resume` or `snapshot`.
    pub async fn suspend(
        &self,
        store: &mut Store<HostState>,
        sandbox: &str,
        op: SuspendOp,
    ) -> Answer<()> {
        let Some(g) = &self.suspension else {
            return Ok(Err(cannot_pause()));
        };
        let answer = match op {
            SuspendOp::Pause => g.call_pause(&mut *store, sandbox).await?,
            SuspendOp::Resume => g.call_resume(&mut *store, sandbox).await?,
            SuspendOp::Snapshot => g.call_snapshot(&mut *store, sandbox).await?,
        };
        Ok(answer.map_err(Into::into))
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
