//! The audit sink: every `wharf::audit` event (tool calls, exec, containers, outbound HTTP)
//! as one JSON line, written by its own thread to a size-rotated file or to stdout,
//! separate from the human log (ARCHITECTURE.md, "The audit sink").
//!
//! A call never waits for the disk: the event becomes a line on the caller's thread and goes
//! into a bounded queue. When the queue is full, `mode = "drop"` (the default) counts the
//! line as dropped (`wharf_audit_lines_dropped` in `/metrics`, and a periodic warning) and
//! `mode = "block"` waits for room, for operators who need every line.
//!
//! The imports' call sites are `tracing::info!(target: "wharf::audit", …)` with fields
//! already redacted; [`layer`] picks those events up once [`start`] ran, and
//! [`human_filter`] keeps them out of the human log from then on. A tool call's line, the
//! one every call writes, is built by the writer instead ([`defer`]): the call queues what
//! the line needs and the writer redacts the arguments and writes the JSON, off the request
//! path. Before [`start`] (in `wharf dev`, or a host embedded in tests) every audit event
//! stays in the human log.

use anyhow::{Context, Result, bail};
use serde::Deserialize;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender};
use std::time::Duration;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::{FilterFn, LevelFilter, filter_fn};

mod line;

pub use line::LineBuilder;

/// The tracing target of audit events.
pub const TARGET: &str = "wharf::audit";

/// How often a warning reports lines dropped since the last one.
const WARN_EVERY: Duration = Duration::from_secs(30);

/// Largest batch of lines the writer hands to one write.
const BATCH_BYTES: usize = 256 * 1024;

/// How long the writer lets lines gather after a write. While it sleeps it is not parked on
/// the queue, so a call that queues a line wakes no thread: a busy host wakes the writer a
/// few hundred times a second instead of once per call, which on two cores is CPU the calls
/// get back. A line reaches the file at most this much later.
const GATHER: Duration = Duration::from_millis(2);

/// What a full queue does to the call that writes a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum AuditMode {
    /// The line is dropped and counted; the call goes on.
    #[default]
    Drop,
    /// The call waits until the writer has room.
    Block,
}

/// `[audit]`: where audit lines go and what happens when the writer falls behind.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuditConfig {
    /// The audit file; `-` or unset writes to stdout.
    pub path: Option<PathBuf>,
    /// `drop` (default) or `block` when the queue is full.
    pub mode: AuditMode,
    /// The file is rotated after it passes this size, in bytes.
    pub max_bytes: u64,
    /// Rotated files kept (`PATH.1` the newest … `PATH.KEEP`).
    pub keep: usize,
    /// Lines the queue holds before `mode` applies.
    pub queue_lines: usize,
}

impl Default for AuditConfig {
    fn default() -> Self {
        Self {
            path: None,
            mode: AuditMode::Drop,
            max_bytes: 100 * 1024 * 1024,
            keep: 5,
            queue_lines: 16_384,
        }
    }
}

impl AuditConfig {
    /// Refuses sizes the writer cannot work with.
    pub fn validate(&self) -> Result<()> {
        if self.max_bytes == 0 || usize::try_from(self.max_bytes).is_err() {
            bail!("audit.max_bytes = {}: must be at least 1", self.max_bytes);
        }
        if self.queue_lines == 0 || self.queue_lines > 1 << 24 {
            bail!(
                "audit.queue_lines = {}: must be between 1 and {}",
                self.queue_lines,
                1 << 24
            );
        }
        Ok(())
    }

    fn file(&self) -> Option<&PathBuf> {
        self.path.as_ref().filter(|p| p.as_os_str() != "-")
    }
}

/// Lines written and dropped since the process started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AuditStats {
    /// Lines the writer wrote.
    pub written: u64,
    /// Lines dropped: the queue was full (`drop` mode) or the write failed.
    pub dropped: u64,
}

/// A line the writer builds itself: it owns what the line needs.
pub type DeferredLine = Box<dyn FnOnce() -> Vec<u8> + Send>;

/// What the queue carries: a line, or the means to build one.
enum Queued {
    Line(Vec<u8>),
    Deferred(DeferredLine),
}

struct Sink {
    queue: SyncSender<Queued>,
    mode: AuditMode,
}

static SINK: OnceLock<Sink> = OnceLock::new();
static ACTIVE: AtomicBool = AtomicBool::new(false);
static WRITTEN: AtomicU64 = AtomicU64::new(0);
static DROPPED: AtomicU64 = AtomicU64::new(0);
static QUEUED: AtomicU64 = AtomicU64::new(0);

/// Starts the sink once per process (later calls keep the first one): opens the file, starts
/// the writer and from then on routes `wharf::audit` events to it.
pub fn start(config: &AuditConfig) -> Result<()> {
    config.validate()?;
    if SINK.get().is_some() {
        return Ok(());
    }
    let (out, batch_limit): (Box<dyn Write + Send>, usize) = match config.file() {
        Some(path) => (
            Box::new(rotating_file(path, config)?),
            batch_limit(config.max_bytes),
        ),
        None => (Box::new(std::io::stdout()), BATCH_BYTES),
    };
    let (queue, lines) = std::sync::mpsc::sync_channel(config.queue_lines);
    std::thread::Builder::new()
        .name("wharf-audit".into())
        .spawn(move || write_lines(&lines, out, batch_limit))
        .context("starting the audit writer")?;
    std::thread::Builder::new()
        .name("wharf-audit-warn".into())
        .spawn(warn_about_drops)
        .context("starting the audit watcher")?;
    if SINK
        .set(Sink {
            queue,
            mode: config.mode,
        })
        .is_ok()
    {
        ACTIVE.store(true, Ordering::Release);
        // Filters below read ACTIVE; callsites registered before this point re-ask them.
        tracing::callsite::rebuild_interest_cache();
    }
    Ok(())
}

fn rotating_file(
    path: &Path,
    config: &AuditConfig,
) -> Result<file_rotate::FileRotate<file_rotate::suffix::AppendCount>> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("creating the audit directory {}", dir.display()))?;
    }
    // Opened here once so a path that cannot be written is a start-up error, not a stream
    // of dropped lines.
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("opening the audit file {}", path.display()))?;
    let max_bytes = usize::try_from(config.max_bytes).context("audit.max_bytes")?;
    Ok(file_rotate::FileRotate::new(
        path,
        file_rotate::suffix::AppendCount::new(config.keep),
        file_rotate::ContentLimit::BytesSurpassed(max_bytes),
        file_rotate::compression::Compression::None,
        None,
    ))
}

/// The most a batch holds when writing to a rotated file: a quarter of `max_bytes` (the
/// file rotates after the write that passes it, so a file ends at most one batch past it),
/// never more than [`BATCH_BYTES`].
fn batch_limit(max_bytes: u64) -> usize {
    usize::try_from(max_bytes / 4)
        .unwrap_or(BATCH_BYTES)
        .clamp(1, BATCH_BYTES)
}

/// The writer thread: takes whatever is queued, up to `limit` bytes, writes it as one piece
/// (whole lines, so a rotation never splits one) and flushes it, then lets the next lines
/// gather for [`GATHER`].
fn write_lines(lines: &Receiver<Queued>, mut out: Box<dyn Write + Send>, limit: usize) {
    let mut batch = Vec::with_capacity(limit);
    let add = |batch: &mut Vec<u8>, queued: Queued| match queued {
        Queued::Line(line) => batch.extend_from_slice(&line),
        Queued::Deferred(build) => batch.extend_from_slice(&build()),
    };
    while let Ok(queued) = lines.recv() {
        add(&mut batch, queued);
        let mut n = 1u64;
        while batch.len() < limit {
            match lines.try_recv() {
                Ok(queued) => {
                    add(&mut batch, queued);
                    n += 1;
                }
                Err(_) => break,
            }
        }
        match out.write_all(&batch).and_then(|()| out.flush()) {
            Ok(()) => WRITTEN.fetch_add(n, Ordering::Relaxed),
            Err(_) => DROPPED.fetch_add(n, Ordering::Relaxed),
        };
        QUEUED.fetch_sub(n, Ordering::Release);
        batch.clear();
        std::thread::sleep(GATHER);
    }
}

fn warn_about_drops() {
    let mut reported = 0;
    loop {
        std::thread::sleep(WARN_EVERY);
        let dropped = DROPPED.load(Ordering::Relaxed);
        if dropped > reported {
            tracing::warn!(
                dropped_since_last = dropped - reported,
                dropped_total = dropped,
                "audit lines dropped: the audit writer falls behind or cannot write (see [audit] in docs/security.md)"
            );
            reported = dropped;
        }
    }
}

/// Lines written and dropped so far.
pub fn stats() -> AuditStats {
    AuditStats {
        written: WRITTEN.load(Ordering::Relaxed),
        dropped: DROPPED.load(Ordering::Relaxed),
    }
}

/// Waits up to `within` for the queued lines to be written (at shutdown).
pub fn flush(within: Duration) {
    let deadline = std::time::Instant::now() + within;
    while QUEUED.load(Ordering::Acquire) > 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Whether the sink runs: audit lines go to it, not to the human log.
pub fn active() -> bool {
    ACTIVE.load(Ordering::Acquire)
}

/// Queues a line the writer builds (with [`LineBuilder`]), under the sink's `mode` like
/// any other line. Building a line (redacting arguments, escaping, formatting) is most of
/// its cost, and here it is paid on the writer's thread rather than by the call. Returns
/// `build` when the sink does not run, for the caller to log the event another way.
pub fn defer(build: DeferredLine) -> Result<(), DeferredLine> {
    let Some(sink) = SINK.get().filter(|_| active()) else {
        return Err(build);
    };
    enqueue(sink, Queued::Deferred(build));
    Ok(())
}

fn enqueue(sink: &Sink, queued: Queued) {
    QUEUED.fetch_add(1, Ordering::AcqRel);
    let sent = match sink.mode {
        AuditMode::Drop => sink.queue.try_send(queued).is_ok(),
        AuditMode::Block => sink.queue.send(queued).is_ok(),
    };
    if !sent {
        QUEUED.fetch_sub(1, Ordering::AcqRel);
        DROPPED.fetch_add(1, Ordering::Relaxed);
    }
}

fn is_audit(meta: &tracing::Metadata<'_>) -> bool {
    meta.target() == TARGET
}

/// The filter for the human log: everything but audit events once the sink runs.
pub fn human_filter(
    max_level: Option<LevelFilter>,
) -> FilterFn<impl Fn(&tracing::Metadata<'_>) -> bool> {
    // The human log's own level, as this filter's hint: a filter without one makes every
    // `trace!` in every crate (and every `log` record wasmtime writes) reach the subscriber.
    let level = max_level.unwrap_or(LevelFilter::TRACE);
    filter_fn(move |meta| *meta.level() <= level && !(is_audit(meta) && active()))
        .with_max_level_hint(level)
}

/// The layer that turns audit events into lines for the sink.
pub fn layer<S>() -> impl Layer<S>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    AuditLayer.with_filter(
        filter_fn(|meta| is_audit(meta) && active() && *meta.level() <= LevelFilter::INFO)
            .with_max_level_hint(LevelFilter::INFO),
    )
}

struct AuditLayer;

impl<S: tracing::Subscriber> Layer<S> for AuditLayer {
    fn on_event(
        &self,
        event: &tracing::Event<'_>,
        _ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        let Some(sink) = SINK.get() else { return };
        enqueue(sink, Queued::Line(line::of_event(event)));
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_batch_passes_a_small_file_limit_by_at_most_a_quarter() {
        assert_eq!(super::batch_limit(2_000), 500);
        assert_eq!(super::batch_limit(0), 1);
        assert_eq!(super::batch_limit(u64::MAX), super::BATCH_BYTES);
        assert_eq!(super::batch_limit(100 * 1024 * 1024), super::BATCH_BYTES);
    }
}
