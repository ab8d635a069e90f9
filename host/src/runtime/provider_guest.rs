//! The `sandbox-provider` world of every served contract version behind one typed face:
//! `describe`, `warmup`, `shutdown`, `create`, `run-command`, `destroy`, `is-alive`, the
//! native file operations and (0.3.0) background processes and pausing, whatever version the
//! component was built against.

use crate::engines::container_types::{OutputChunk, OutputRead, ProcessInfo, ProcessStart, Signal};
use crate::runtime::bindings::v0_1;
use crate::runtime::guest_types::{
    CommandRequest, CommandResult, DirEntry, FileChunk, GuestError, RawProviderInfo, SandboxSpec,
};
use crate::runtime::host_state::HostState;
use crate::runtime::instance_pool::versioned_guest_world;
use crate::runtime::provider_processes::{
    Provider02, ProviderPre02, SuspendOp, cannot_pause, refused,
};
use wasmtime::Store;

versioned_guest_world!(
    "sandbox provider",
    ProviderPre, ProviderExports,
    V0_1: v0_1::provider::SandboxProviderPre<HostState>, v0_1::provider::SandboxProvider,
        wharf_plugin0_1_0_provider;
    V0_2: ProviderPre02, Provider02, wharf_plugin0_2_0_provider;
);

/// Runs `$body` with `$g` bound to the instance's `provider` export, whatever its version.
macro_rules! on_guest {
    ($exports:expr, |$g:ident| $body:expr) => {
        match $exports {
            ProviderExports::V0_1(p) => {
                let $g = p.wharf_plugin0_1_0_provider();
                $body
            }
            ProviderExports::V0_2(p) => {
                let $g = p.wharf_plugin0_2_0_provider();
                $body
            }
        }
    };
}

type Answer<T> = wasmtime::Result<Result<T, GuestError>>;

impl ProviderExports {
    /// `describe`.
    pub async fn describe(
        &self,
        store: &mut Store<HostState>,
    ) -> wasmtime::Result<RawProviderInfo> {
        let mut info: RawProviderInfo = on_guest!(self, |g| RawProviderInfo::from(
            g.call_describe(&mut *store).await?
        ));
        (info.features.processes, info.features.suspension) = match self {
            ProviderExports::V0_1(_) => (false, false),
            ProviderExports::V0_2(p) => (
                p.processes_available(store).await?,
                p.suspension_available(store).await?,
            ),
        };
        Ok(info)
    }

    /// `create`: the sandbox's handle.
    pub async fn create(&self, store: &mut Store<HostState>, spec: &SandboxSpec) -> Answer<String> {
        on_guest!(self, |g| Ok(g
            .call_create(&mut *store, &spec.into())
            .await?
            .map_err(Into::into)))
    }

    /// `run-command`.
    pub async fn run_command(
        &self,
        store: &mut Store<HostState>,
        sandbox: &str,
        request: &CommandRequest,
    ) -> Answer<CommandResult> {
        on_guest!(self, |g| Ok(g
            .call_run_command(&mut *store, sandbox, &request.into())
            .await?
            .map(Into::into)
            .map_err(Into::into)))
    }

    /// `destroy`.
    pub async fn destroy(&self, store: &mut Store<HostState>, sandbox: &str) -> Answer<()> {
        on_guest!(self, |g| Ok(g
            .call_destroy(&mut *store, sandbox)
            .await?
            .map_err(Into::into)))
    }

    /// `is-alive`.
    pub async fn is_alive(&self, store: &mut Store<HostState>, sandbox: &str) -> Answer<bool> {
        on_guest!(self, |g| Ok(g
            .call_is_alive(&mut *store, sandbox)
            .await?
            .map_err(Into::into)))
    }

    /// `read-file`.
    pub async fn read_file(
        &self,
        store: &mut Store<HostState>,
        sandbox: &str,
        path: &str,
        offset: u64,
        max_bytes: u64,
    ) -> Answer<FileChunk> {
        on_guest!(self, |g| Ok(g
            .call_read_file(&mut *store, sandbox, path, offset, max_bytes)
            .await?
            .map(Into::into)
            .map_err(Into::into)))
    }

    /// `write-file`.
    pub async fn write_file(
        &self,
        store: &mut Store<HostState>,
        sandbox: &str,
        path: &str,
        content: &[u8],
    ) -> Answer<()> {
        on_guest!(self, |g| Ok(g
            .call_write_file(&mut *store, sandbox, path, content)
            .await?
            .map_err(Into::into)))
    }

    /// `list-dir`.
    pub async fn list_dir(
        &self,
        store: &mut Store<HostState>,
        sandbox: &str,
        path: &str,
    ) -> Answer<Vec<DirEntry>> {
        on_guest!(self, |g| Ok(g
            .call_list_dir(&mut *store, sandbox, path)
            .await?
            .map(|entries| entries.into_iter().map(Into::into).collect())
            .map_err(Into::into)))
    }

    /// `processes.start` (0.3.0; refused with 4030 before).
    pub async fn start_process(
        &self,
        store: &mut Store<HostState>,
        sandbox: &str,
        start: &ProcessStart,
    ) -> Answer<ProcessInfo> {
        match self {
            ProviderExports::V0_2(p) => p.start_process(store, sandbox, start).await,
            ProviderExports::V0_1(_) => Ok(Err(refused())),
        }
    }

    /// `processes.output`.
    pub async fn process_output(
        &self,
        store: &mut Store<HostState>,
        sandbox: &str,
        read: OutputRead,
    ) -> Answer<OutputChunk> {
        match self {
            ProviderExports::V0_2(p) => p.process_output(store, sandbox, read).await,
            ProviderExports::V0_1(_) => Ok(Err(refused())),
        }
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
        match self {
            ProviderExports::V0_2(p) => p.process_input(store, sandbox, pid, data, close).await,
            ProviderExports::V0_1(_) => Ok(Err(refused())),
        }
    }

    /// `processes.send-signal`.
    pub async fn signal_process(
        &self,
        store: &mut Store<HostState>,
        sandbox: &str,
        pid: u32,
        signal: Signal,
    ) -> Answer<()> {
        match self {
            ProviderExports::V0_2(p) => p.signal_process(store, sandbox, pid, signal).await,
            ProviderExports::V0_1(_) => Ok(Err(refused())),
        }
    }

    /// `processes.list`.
    pub async fn list_processes(
        &self,
        store: &mut Store<HostState>,
        sandbox: &str,
    ) -> Answer<Vec<ProcessInfo>> {
        match self {
            ProviderExports::V0_2(p) => p.list_processes(store, sandbox).await,
            ProviderExports::V0_1(_) => Ok(Err(refused())),
        }
    }

    /// `suspension.pause`, `resume` or `snapshot` (0.3.0; refused with 4030 before).
    pub async fn suspend(
        &self,
        store: &mut Store<HostState>,
        sandbox: &str,
        op: SuspendOp,
    ) -> Answer<()> {
        match self {
            ProviderExports::V0_2(p) => p.suspend(store, sandbox, op).await,
            ProviderExports::V0_1(_) => Ok(Err(cannot_pause())),
        }
    }
}
