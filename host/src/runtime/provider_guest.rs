//! The `sandbox-provider` world of every served contract version behind one typed face:
//! `describe`, `warmup`, `shutdown`, `create`, `run-command`, `destroy`, `is-alive` and the
//! native file operations, whatever version the component was built against.

use crate::runtime::bindings::{v0_1, v0_2};
use crate::runtime::guest_types::{
    CommandRequest, CommandResult, DirEntry, FileChunk, GuestError, RawProviderInfo, SandboxSpec,
};
use crate::runtime::host_state::HostState;
use crate::runtime::instance_pool::{BoxFuture, GuestWorld};
use crate::runtime::world::ContractVersion;
use anyhow::Result;
use wasmtime::component::InstancePre;
use wasmtime::{Engine, Store};

/// A pre-instantiated sandbox provider.
#[derive(Clone)]
pub enum ProviderPre {
    /// Built against 0.1.0.
    V0_1(v0_1::provider::SandboxProviderPre<HostState>),
    /// Built against 0.2.0 or 0.3.0 (whose `provider` export is 0.2.0's).
    V0_2(v0_2::provider::SandboxProviderPre<HostState>),
}

/// One instance's exports.
pub enum ProviderExports {
    /// Built against 0.1.0.
    V0_1(v0_1::provider::SandboxProvider),
    /// Built against 0.2.0.
    V0_2(v0_2::provider::SandboxProvider),
}

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

impl ProviderPre {
    /// Wraps an `InstancePre` of a component built against `version`.
    pub fn new(version: ContractVersion, pre: InstancePre<HostState>) -> Result<Self> {
        Ok(match version {
            ContractVersion::V0_1 => Self::V0_1(v0_1::provider::SandboxProviderPre::new(pre)?),
            // 0.3.0 exports 0.2.0's `provider` as it is.
            ContractVersion::V0_2 | ContractVersion::V0_3 => {
                Self::V0_2(v0_2::provider::SandboxProviderPre::new(pre)?)
            }
        })
    }
}

impl GuestWorld for ProviderPre {
    type Exports = ProviderExports;

    fn engine(&self) -> &Engine {
        match self {
            Self::V0_1(p) => p.engine(),
            Self::V0_2(p) => p.engine(),
        }
    }

    fn instantiate<'a>(
        &'a self,
        store: &'a mut Store<HostState>,
    ) -> BoxFuture<'a, Result<ProviderExports>> {
        Box::pin(async move {
            Ok(match self {
                Self::V0_1(p) => ProviderExports::V0_1(p.instantiate_async(store).await?),
                Self::V0_2(p) => ProviderExports::V0_2(p.instantiate_async(store).await?),
            })
        })
    }

    fn warmup<'a>(
        exports: &'a ProviderExports,
        store: &'a mut Store<HostState>,
        config: &'a str,
    ) -> BoxFuture<'a, Answer<()>> {
        Box::pin(async move {
            on_guest!(exports, |g| Ok(g
                .call_warmup(&mut *store, config)
                .await?
                .map_err(Into::into)))
        })
    }

    fn shutdown<'a>(
        exports: &'a ProviderExports,
        store: &'a mut Store<HostState>,
    ) -> BoxFuture<'a, wasmtime::Result<()>> {
        Box::pin(async move { on_guest!(exports, |g| g.call_shutdown(&mut *store).await) })
    }
}

impl ProviderExports {
    /// `describe`.
    pub async fn describe(
        &self,
        store: &mut Store<HostState>,
    ) -> wasmtime::Result<RawProviderInfo> {
        on_guest!(self, |g| Ok(g.call_describe(&mut *store).await?.into()))
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
}
