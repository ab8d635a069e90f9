//! `docker-provider`: a sandbox is one container on the host's Docker engine, created and
//! driven only through Wharf's `container`, `exec`, `process`, `files` and `freezer`
//! imports (so the host's grants, labels and ownership rules apply). Commands, background
//! processes and file reads and listings run through the sandbox agent the host places in
//! every container (no shell needed for the files); in a sandbox without the agent, writes
//! to absolute paths use copy-in and other writes go through commands.

use serde::Deserialize;
use wharf_sdk::host::{container, exec, files, freezer, process};
use wharf_sdk::{
    Capabilities, CommandRequest, CommandResult, DirEntry, EntryKind, FileChunk, ProcessRequest,
    Provider, ProviderFeatures, ProviderInfo, SandboxSpec, ToolError, Value,
};

/// The operator's config.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct Config {
    /// Image used when a session does not name one.
    image: String,
    /// Where commands run and relative paths resolve.
    workdir: String,
    /// Mount the root file system read-only (the workdir stays writable).
    read_only_root: bool,
    /// Process limit per sandbox.
    pids_limit: u32,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            image: "wharf-sandbox:test".into(),
            workdir: "/work".into(),
            read_only_root: false,
            pids_limit: 256,
        }
    }
}

#[derive(Default)]
struct DockerProvider {
    config: Config,
}

/// Keeps the container alive until it is removed; exits at once on SIGTERM.
const IDLE_COMMAND: &str = "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done";

fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

fn is_missing(err: &ToolError) -> bool {
    err.message.contains("not found") || err.message.contains("No such container")
}

impl DockerProvider {
    fn exec(
        &self,
        sandbox: &str,
        command: String,
        stdin: Option<Vec<u8>>,
        timeout_ms: u32,
        max_output: u32,
    ) -> Result<exec::ExecOutput, ToolError> {
        Ok(exec::run(&exec::ExecRequest {
            container: sandbox.to_string(),
            command: exec::Command::Shell(command),
            env: Vec::new(),
            workdir: Some(self.config.workdir.clone()),
            user: None,
            stdin,
            timeout_ms,
            max_output_bytes: max_output,
        })?)
    }
}

impl Provider for DockerProvider {
    fn new() -> Self {
        Self::default()
    }

    fn info() -> ProviderInfo {
        ProviderInfo::new(
            "docker",
            "0.1.0",
            "One container per sandbox on the host's Docker engine.",
        )
        .features(
            ProviderFeatures::READ_FILE
                | ProviderFeatures::WRITE_FILE
                | ProviderFeatures::LIST_DIR
                | ProviderFeatures::STDIN
                | ProviderFeatures::POOLABLE,
        )
        .requires(Capabilities {
            images: vec!["wharf-sandbox:*".into()],
            networks: vec!["bridge".into()],
            ..Default::default()
        })
    }

    fn warmup(&mut self, config: Value) -> Result<(), ToolError> {
        self.config = if config.is_null() {
            Config::default()
        } else {
            serde_json::from_value(config)?
        };
        Ok(())
    }

    fn create(&mut self, spec: SandboxSpec) -> Result<String, ToolError> {
        // An egress allowlist is the host's to enforce: it gives the container no network
        // but its egress proxy, whatever network is asked here.
        let network = if spec.network.block_network {
            container::Network::None
        } else {
            container::Network::Bridge
        };
        let workdir = spec
            .workdir
            .clone()
            .unwrap_or_else(|| self.config.workdir.clone());
        let mut labels = Vec::new();
        if let Some(owner) = &spec.owner {
            labels.push(("sandbox.owner".to_string(), owner.clone()));
        }
        let info = container::create(&container::ContainerSpec {
            image: spec
                .image
                .clone()
                .unwrap_or_else(|| self.config.image.clone()),
            command: Some(vec!["/bin/sh".into(), "-c".into(), IDLE_COMMAND.into()]),
            env: spec.env,
            workdir: Some(workdir),
            labels,
            mounts: Vec::new(),
            network,
            cpu_millis: spec.cpu_millis,
            memory_bytes: spec.memory_bytes,
            pids_limit: Some(self.config.pids_limit),
            read_only_root: self.config.read_only_root,
        })?;
        if let Err(e) = container::start(&info.id) {
            let _ = container::remove(&info.id);
            return Err(e.into());
        }
        Ok(info.id)
    }

    fn run_command(
        &mut self,
        sandbox: &str,
        request: CommandRequest,
    ) -> Result<CommandResult, ToolError> {
        match self.exec(
            sandbox,
            request.command,
            request.stdin,
            request.timeout_ms,
            request.max_output_bytes,
        ) {
            Ok(out) => Ok(CommandResult {
                exit_code: out.exit_code,
                stdout: out.stdout,
                stderr: out.stderr,
                stdout_truncated: out.stdout_truncated,
                stderr_truncated: out.stderr_truncated,
                timed_out: out.timed_out,
                sandbox_terminated: false,
            }),
            Err(e) if is_missing(&e) => Ok(CommandResult::sandbox_terminated()),
            Err(e) => Err(e),
        }
    }

    fn destroy(&mut self, sandbox: &str) -> Result<(), ToolError> {
        match container::remove(sandbox) {
            Ok(()) => Ok(()),
            Err(e) => {
                let e = ToolError::from(e);
                if is_missing(&e) { Ok(()) } else { Err(e) }
            }
        }
    }

    fn is_alive(&mut self, sandbox: &str) -> Result<bool, ToolError> {
        // Paused is alive: the engine freezes a sandbox while it commits a snapshot, and a
        // host restarted mid-commit must not take the session for gone.
        Ok(matches!(
            container::inspect(sandbox)?,
            Some(info) if matches!(
                info.state,
                container::ContainerState::Running | container::ContainerState::Paused
            )
        ))
    }

    // A sandbox without the agent (a host with `sandbox_agent = false`) answers these with
    // 4030, and the host then reads and lists through commands.
    fn read_file(
        &mut self,
        sandbox: &str,
        path: &str,
        offset: u64,
        max_bytes: u64,
    ) -> Result<FileChunk, ToolError> {
        let read = files::read(sandbox, path, offset, max_bytes)?;
        Ok(FileChunk {
            data: read.data,
            total_size: read.size,
        })
    }

    fn list_dir(&mut self, sandbox: &str, path: &str) -> Result<Vec<DirEntry>, ToolError> {
        Ok(files::list(sandbox, path)?
            .into_iter()
            .map(|entry| DirEntry {
                name: entry.name,
                kind: match entry.kind {
                    files::FileKind::File => EntryKind::File,
                    files::FileKind::Directory => EntryKind::Directory,
                    files::FileKind::Symlink => EntryKind::Symlink,
                    files::FileKind::Other => EntryKind::Other,
                },
                size: entry.size,
            })
            .collect())
    }

    fn write_file(&mut self, sandbox: &str, path: &str, content: Vec<u8>) -> Result<(), ToolError> {
        match files::write(sandbox, path, &content, false) {
            Ok(()) => return Ok(()),
            // No agent in this sandbox: copy-in or a command writes it. (A path the
            // sandbox's user may not write is 4030 too, and stays refused.)
            Err(e) if e.code == 4030 && e.message.contains("no sandbox agent") => {}
            Err(e) => return Err(e.into()),
        }
        if path.starts_with('/') && container::copy_in(sandbox, path, &content, 0o644).is_ok() {
            return Ok(());
        }
        // Relative paths, and directories that do not exist yet, go through the shell.
        let p = if path.starts_with('-') {
            format!("./{path}")
        } else {
            path.to_string()
        };
        let script = format!(
            "p={}; mkdir -p \"$(dirname \"$p\")\" && cat > \"$p\"",
            quote(&p)
        );
        let out = self.exec(sandbox, script, Some(content), 120_000, 4096)?;
        match out.exit_code {
            Some(0) => Ok(()),
            _ => Err(ToolError::execution(format!(
                "writing `{path}` failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ))),
        }
    }

    fn processes_available() -> bool {
        true
    }

    fn start_process(
        &mut self,
        sandbox: &str,
        request: ProcessRequest,
    ) -> Result<process::ProcessInfo, ToolError> {
        let command = if request.argv.is_empty() {
            exec::Command::Shell(request.command)
        } else {
            exec::Command::Argv(request.argv)
        };
        Ok(process::start(&process::ProcessSpec {
            container: sandbox.to_string(),
            command,
            env: request.env,
            workdir: request
                .workdir
                .or_else(|| Some(self.config.workdir.clone())),
            // The host refuses a user other than the sandbox's (never a weaker sandbox).
            user: request.user,
            buffer_bytes: request.buffer_bytes,
            terminal: request.terminal,
        })?)
    }

    fn process_output(
        &mut self,
        sandbox: &str,
        pid: u32,
        offset: u64,
        max_bytes: u32,
        wait_ms: u32,
    ) -> Result<process::ProcessOutput, ToolError> {
        Ok(process::output(sandbox, pid, offset, max_bytes, wait_ms)?)
    }

    fn process_input(
        &mut self,
        sandbox: &str,
        pid: u32,
        data: Vec<u8>,
        close: bool,
    ) -> Result<(), ToolError> {
        Ok(process::write_stdin(sandbox, pid, &data, close)?)
    }

    fn signal_process(
        &mut self,
        sandbox: &str,
        pid: u32,
        signal: process::Signal,
    ) -> Result<(), ToolError> {
        Ok(process::send_signal(sandbox, pid, signal)?)
    }

    fn list_processes(&mut self, sandbox: &str) -> Result<Vec<process::ProcessInfo>, ToolError> {
        Ok(process::list(sandbox)?)
    }

    fn pause_available() -> bool {
        true
    }

    fn pause(&mut self, sandbox: &str) -> Result<(), ToolError> {
        Ok(freezer::pause(sandbox)?)
    }

    fn resume(&mut self, sandbox: &str) -> Result<(), ToolError> {
        Ok(freezer::resume(sandbox)?)
    }

    fn snapshot(&mut self, sandbox: &str) -> Result<(), ToolError> {
        Ok(freezer::commit(sandbox)?)
    }
}

wharf_sdk::export_provider!(DockerProvider);
