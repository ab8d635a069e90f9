//! Sandbox providers: create / run-command / destroy plus declared native file operations,
//! and the glue that exports them. The host builds the standard sandbox toolset on top.

use crate::bindings::provider_world::exports::wharf::plugin0_3_0::processes as wit_processes;
use crate::bindings::provider_world::exports::wharf::plugin0_3_0::suspension as wit_suspension;
use crate::bindings::{provider_world::exports::wharf::plugin0_2_0::provider as wit, wit_types};
use crate::host::process::{ProcessInfo, ProcessOutput, Signal};
use crate::{Capabilities, ToolError};
use serde_json::Value;
use std::any::Any;
use std::cell::RefCell;
use std::marker::PhantomData;

pub use wit::{
    CommandRequest, CommandResult, DirEntry, EntryKind, FileChunk, NetworkPolicy, ProviderFeatures,
    SandboxSpec,
};
pub use wit_processes::StartRequest as ProcessRequest;

impl CommandResult {
    /// The answer when the sandbox no longer exists: no exit code, no output, and
    /// `sandbox_terminated` set, so the host ends the session.
    pub fn sandbox_terminated() -> Self {
        CommandResult {
            exit_code: None,
            stdout: Vec::new(),
            stderr: Vec::new(),
            stdout_truncated: false,
            stderr_truncated: false,
            timed_out: false,
            sandbox_terminated: true,
        }
    }
}

/// Name, version, description, native features and capabilities of a provider.
#[derive(Debug, Clone)]
pub struct ProviderInfo {
    /// Default name (the operator may load it under another).
    pub name: String,
    /// Semantic version.
    pub version: String,
    /// One line for people and agents.
    pub description: String,
    /// What the provider implements natively; the host never calls the rest.
    pub features: ProviderFeatures,
    /// What it will ask the host for.
    pub requires: Capabilities,
}

impl ProviderInfo {
    /// Name, version and description, with no native features.
    pub fn new(name: &str, version: &str, description: &str) -> Self {
        Self {
            name: name.into(),
            version: version.into(),
            description: description.into(),
            features: ProviderFeatures::empty(),
            requires: Capabilities::default(),
        }
    }
    /// Declares native features.
    pub fn features(mut self, features: ProviderFeatures) -> Self {
        self.features = features;
        self
    }
    /// Declares the capabilities the provider will ask for.
    pub fn requires(mut self, requires: Capabilities) -> Self {
        self.requires = requires;
        self
    }
}

fn unsupported(what: &str) -> ToolError {
    ToolError::execution(format!("this provider does not implement {what}"))
}

/// A sandbox provider. Implement the three-function contract (plus `is_alive`); the native
/// operations default to "not implemented" and are only called when declared in
/// [`ProviderInfo::features`].
pub trait Provider: Sized + 'static {
    /// A fresh instance, before `warmup`.
    fn new() -> Self;
    /// Name, version, features and capabilities.
    fn info() -> ProviderInfo;
    /// Builds shared resources; `config` is the operator's JSON (`null` when none).
    fn warmup(&mut self, _config: Value) -> Result<(), ToolError> {
        Ok(())
    }
    /// Releases shared resources before the instance is dropped.
    fn shutdown(&mut self) {}
    /// Provisions a sandbox and returns its handle. Refuse (4030) what cannot be enforced.
    fn create(&mut self, spec: SandboxSpec) -> Result<String, ToolError>;
    /// Runs a shell command in the sandbox.
    fn run_command(
        &mut self,
        sandbox: &str,
        request: CommandRequest,
    ) -> Result<CommandResult, ToolError>;
    /// Destroys the sandbox; destroying one that is gone succeeds.
    fn destroy(&mut self, sandbox: &str) -> Result<(), ToolError>;
    /// Whether the sandbox still exists and answers.
    fn is_alive(&mut self, sandbox: &str) -> Result<bool, ToolError>;
    /// Reads up to `max_bytes` from `offset` (feature `read-file`).
    fn read_file(
        &mut self,
        _sandbox: &str,
        _path: &str,
        _offset: u64,
        _max_bytes: u64,
    ) -> Result<FileChunk, ToolError> {
        Err(unsupported("read-file"))
    }
    /// Writes a whole file (feature `write-file`).
    fn write_file(
        &mut self,
        _sandbox: &str,
        _path: &str,
        _content: Vec<u8>,
    ) -> Result<(), ToolError> {
        Err(unsupported("write-file"))
    }
    /// Lists a directory (feature `list-dir`).
    fn list_dir(&mut self, _sandbox: &str, _path: &str) -> Result<Vec<DirEntry>, ToolError> {
        Err(unsupported("list-dir"))
    }
    /// Whether this provider runs background processes (contract 0.3.0): when `true`, the
    /// host offers the process tools and calls the `*_process` methods below.
    fn processes_available() -> bool {
        false
    }
    /// Starts a background process in the sandbox.
    fn start_process(
        &mut self,
        _sandbox: &str,
        _request: ProcessRequest,
    ) -> Result<ProcessInfo, ToolError> {
        Err(no_processes())
    }
    /// A process's output from `offset`, waiting up to `wait_ms` for some.
    fn process_output(
        &mut self,
        _sandbox: &str,
        _pid: u32,
        _offset: u64,
        _max_bytes: u32,
        _wait_ms: u32,
    ) -> Result<ProcessOutput, ToolError> {
        Err(no_processes())
    }
    /// Writes to a process's stdin, closing it after when `close`.
    fn process_input(
        &mut self,
        _sandbox: &str,
        _pid: u32,
        _data: Vec<u8>,
        _close: bool,
    ) -> Result<(), ToolError> {
        Err(no_processes())
    }
    /// Signals a process's process group.
    fn signal_process(
        &mut self,
        _sandbox: &str,
        _pid: u32,
        _signal: Signal,
    ) -> Result<(), ToolError> {
        Err(no_processes())
    }
    /// The sandbox's background processes.
    fn list_processes(&mut self, _sandbox: &str) -> Result<Vec<ProcessInfo>, ToolError> {
        Err(no_processes())
    }
    /// Whether this provider can pause and resume its sandboxes (contract 0.3.0): when
    /// `true`, the host calls [`Provider::pause`] and [`Provider::resume`] for a session's
    /// pause and resume, and for a backend's `on_idle = "pause"`.
    fn pause_available() -> bool {
        false
    }
    /// Pauses the sandbox (its memory and processes kept).
    fn pause(&mut self, _sandbox: &str) -> Result<(), ToolError> {
        Err(no_pause())
    }
    /// Resumes a paused sandbox.
    fn resume(&mut self, _sandbox: &str) -> Result<(), ToolError> {
        Err(no_pause())
    }
    /// Snapshots the sandbox's filesystem (commit its container with
    /// [`crate::host::freezer::commit`]); a session started from the snapshot gets its
    /// image in `SandboxSpec::image`.
    fn snapshot(&mut self, _sandbox: &str) -> Result<(), ToolError> {
        Err(no_pause())
    }
}

fn no_pause() -> ToolError {
    ToolError::new(4030, "this provider cannot pause its sandboxes")
}

fn no_processes() -> ToolError {
    ToolError::new(4030, "this provider does not run background processes")
}

thread_local! {
    // A component instance is single-threaded; this holds the one provider value.
    static INSTANCE: RefCell<Option<Box<dyn Any>>> = const { RefCell::new(None) };
}

fn with_provider<P: Provider, R>(
    f: impl FnOnce(&mut P) -> Result<R, ToolError>,
) -> Result<R, wit_types::Error> {
    INSTANCE.with(|cell| {
        let mut slot = cell.borrow_mut();
        let mut provider = match slot.take().map(|b| b.downcast::<P>()) {
            Some(Ok(provider)) => provider,
            _ => Box::new(P::new()),
        };
        let result = f(&mut provider);
        *slot = Some(provider);
        result.map_err(Into::into)
    })
}

/// The export glue for a provider type; used by [`crate::export_provider!`].
pub struct ProviderExport<P>(PhantomData<P>);

impl<P: Provider> wit::Guest for ProviderExport<P> {
    fn describe() -> wit::ProviderInfo {
        let info = P::info();
        wit::ProviderInfo {
            name: info.name,
            version: info.version,
            description: info.description,
            features: info.features,
            requires: info.requires.into(),
        }
    }
    fn warmup(config: String) -> Result<(), wit_types::Error> {
        crate::host::install_panic_hook();
        let config: Value = if config.trim().is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&config).map_err(ToolError::from)?
        };
        with_provider::<P, _>(|p| p.warmup(config))
    }
    fn shutdown() {
        let _ = with_provider::<P, _>(|p| {
            p.shutdown();
            Ok(())
        });
    }
    fn create(spec: SandboxSpec) -> Result<String, wit_types::Error> {
        with_provider::<P, _>(|p| p.create(spec))
    }
    fn run_command(
        sandbox: String,
        request: CommandRequest,
    ) -> Result<CommandResult, wit_types::Error> {
        with_provider::<P, _>(|p| p.run_command(&sandbox, request))
    }
    fn destroy(sandbox: String) -> Result<(), wit_types::Error> {
        with_provider::<P, _>(|p| p.destroy(&sandbox))
    }
    fn is_alive(sandbox: String) -> Result<bool, wit_types::Error> {
        with_provider::<P, _>(|p| p.is_alive(&sandbox))
    }
    fn read_file(
        sandbox: String,
        path: String,
        offset: u64,
        max_bytes: u64,
    ) -> Result<FileChunk, wit_types::Error> {
        with_provider::<P, _>(|p| p.read_file(&sandbox, &path, offset, max_bytes))
    }
    fn write_file(sandbox: String, path: String, content: Vec<u8>) -> Result<(), wit_types::Error> {
        with_provider::<P, _>(|p| p.write_file(&sandbox, &path, content))
    }
    fn list_dir(sandbox: String, path: String) -> Result<Vec<DirEntry>, wit_types::Error> {
        with_provider::<P, _>(|p| p.list_dir(&sandbox, &path))
    }
}

impl<P: Provider> wit_processes::Guest for ProviderExport<P> {
    fn available() -> bool {
        P::processes_available()
    }
    fn start(sandbox: String, request: ProcessRequest) -> Result<ProcessInfo, wit_types::Error> {
        with_provider::<P, _>(|p| p.start_process(&sandbox, request))
    }
    fn output(
        sandbox: String,
        pid: u32,
        offset: u64,
        max_bytes: u32,
        wait_ms: u32,
    ) -> Result<ProcessOutput, wit_types::Error> {
        with_provider::<P, _>(|p| p.process_output(&sandbox, pid, offset, max_bytes, wait_ms))
    }
    fn write_stdin(
        sandbox: String,
        pid: u32,
        data: Vec<u8>,
        close: bool,
    ) -> Result<(), wit_types::Error> {
        with_provider::<P, _>(|p| p.process_input(&sandbox, pid, data, close))
    }
    fn send_signal(sandbox: String, pid: u32, signal: Signal) -> Result<(), wit_types::Error> {
        with_provider::<P, _>(|p| p.signal_process(&sandbox, pid, signal))
    }
    fn list(sandbox: String) -> Result<Vec<ProcessInfo>, wit_types::Error> {
        with_provider::<P, _>(|p| p.list_processes(&sandbox))
    }
}

impl<P: Provider> wit_suspension::Guest for ProviderExport<P> {
    fn available() -> bool {
        P::pause_available()
    }
    fn pause(sandbox: String) -> Result<(), wit_types::Error> {
        with_provider::<P, _>(|p| p.pause(&sandbox))
    }
    fn resume(sandbox: String) -> Result<(), wit_types::Error> {
        with_provider::<P, _>(|p| p.resume(&sandbox))
    }
    fn snapshot(sandbox: String) -> Result<(), wit_types::Error> {
        with_provider::<P, _>(|p| p.snapshot(&sandbox))
    }
}
