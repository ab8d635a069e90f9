//! Compiling in a child process, so a cold compile does not leave its memory behind.
//!
//! Compiling an 18 MB componentize-py component peaks at about 350 MB, spread over the
//! compile threads' allocator arenas; glibc keeps those pages after they are freed (a
//! `malloc_trim` still leaves ~150 MB of fragmented arenas), so a host that compiled once
//! stays at its peak. The `wharf` binary therefore hands each compile to a short-lived
//! `wharf compile-worker` child that writes the artifact into the compile cache and exits;
//! the host then maps the artifact exactly as on a warm start. Hosts embedded as a library
//! (and a child that cannot be started) compile in-process as before.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// The exit code of a worker whose component did not compile (the reason is on stderr).
pub const EXIT_COMPILE_ERROR: i32 = 3;

/// The hidden subcommand the worker runs as.
pub const SUBCOMMAND: &str = "compile-worker";

/// The most of a worker's stderr kept as the reason of a failed compile.
const MAX_REASON_BYTES: usize = 8 * 1024;

static WORKER_EXE: OnceLock<PathBuf> = OnceLock::new();

/// Makes this process compile in children of `exe` (the `wharf` binary itself); called
/// once by the command line before it starts a host.
pub fn compile_in_children_of(exe: PathBuf) {
    let _ = WORKER_EXE.set(exe);
}

/// The executable compiles run in, when enabled.
pub(crate) fn worker_exe() -> Option<&'static Path> {
    WORKER_EXE.get().map(PathBuf::as_path)
}

/// What a worker did.
#[derive(Debug)]
pub(crate) enum WorkerOutcome {
    /// The artifact is in the cache.
    Stored,
    /// The component does not compile; the reason, as the compiler said it.
    Refused(String),
    /// No worker could do it (it did not start, crashed or was killed); compile in-process.
    Unavailable(String),
}

/// Compiles `wasm` in a child of `exe`, which stores the artifact in `cache_dir`.
pub(crate) fn compile_in_child(exe: &Path, cache_dir: &Path, wasm: &[u8]) -> WorkerOutcome {
    let spawned = Command::new(exe)
        .arg(SUBCOMMAND)
        .arg("--cache-dir")
        .arg(cache_dir)
        .env("RUST_LOG", "error")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn();
    let started = std::time::Instant::now();
    let mut child = match spawned {
        Ok(child) => child,
        Err(err) => {
            return WorkerOutcome::Unavailable(format!("starting {}: {err}", exe.display()));
        }
    };
    let written = match child.stdin.take() {
        Some(mut stdin) => stdin.write_all(wasm),
        None => Ok(()),
    };
    let mut reason = Vec::new();
    if let Some(mut stderr) = child.stderr.take() {
        let _ = (&mut stderr)
            .take(MAX_REASON_BYTES as u64)
            .read_to_end(&mut reason);
        // Drain the rest so a chatty worker cannot block on a full pipe.
        let _ = std::io::copy(&mut stderr, &mut std::io::sink());
    }
    let status = match child.wait() {
        Ok(status) => status,
        Err(err) => return WorkerOutcome::Unavailable(format!("waiting for the worker: {err}")),
    };
    let reason = String::from_utf8_lossy(&reason).trim().to_string();
    match status.code() {
        Some(0) => {
            tracing::info!(
                pid = child.id(),
                ms = started.elapsed().as_millis() as u64,
                "compiled in a worker process"
            );
            WorkerOutcome::Stored
        }
        Some(EXIT_COMPILE_ERROR) => WorkerOutcome::Refused(reason),
        _ => WorkerOutcome::Unavailable(format!(
            "the worker ended with {status}{}{}",
            if written.is_err() {
                " before reading the component"
            } else {
                ""
            },
            if reason.is_empty() {
                String::new()
            } else {
                format!(": {reason}")
            }
        )),
    }
}
