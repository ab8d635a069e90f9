//! Output a call streams to its caller while it runs (a long command's stdout and stderr as
//! they are written, and the backend's own progress reports): the protocol adapter that can
//! deliver it (REST as NDJSON lines, MCP as progress notifications) makes an
//! [`OutputSink`] and keeps the receiver; the sink travels with the call down to the import
//! that produces the output. A caller that reads slower than the output comes loses
//! pieces, counted, rather than holding the command or growing the host's memory.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::sync::mpsc;

/// Pieces waiting for their caller at most, per call (each at most 256 KiB: 8 MiB).
pub const PIECES_IN_FLIGHT: usize = 32;

/// Which stream a piece is from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputStream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

impl OutputStream {
    /// `stdout` or `stderr`.
    pub fn as_str(self) -> &'static str {
        match self {
            OutputStream::Stdout => "stdout",
            OutputStream::Stderr => "stderr",
        }
    }
}

/// One piece of output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputPiece {
    /// Its stream.
    pub stream: OutputStream,
    /// Its bytes.
    pub data: Vec<u8>,
}

/// How far a call has come, as its backend reports it (`progress.report`): checked by the
/// import (finite, growing, the message cut to 4 KiB).
#[derive(Debug, Clone, PartialEq)]
pub struct ProgressReport {
    /// How far, growing from one report to the next.
    pub progress: f64,
    /// Out of how much, when known.
    pub total: Option<f64>,
    /// What is happening, for people.
    pub message: Option<String>,
}

/// What a running call sends its caller.
#[derive(Debug, Clone, PartialEq)]
pub enum CallEvent {
    /// A piece of a command's output.
    Output(OutputPiece),
    /// The backend's report of how far it has come.
    Progress(ProgressReport),
}

/// Where a call's output goes while it runs. Cloning it shares the same channel.
#[derive(Debug, Clone)]
pub struct OutputSink {
    tx: mpsc::Sender<CallEvent>,
    dropped: Arc<AtomicU64>,
}

impl OutputSink {
    /// A sink and the receiver its caller reads.
    pub fn channel() -> (OutputSink, mpsc::Receiver<CallEvent>) {
        let (tx, rx) = mpsc::channel(PIECES_IN_FLIGHT);
        (
            OutputSink {
                tx,
                dropped: Arc::default(),
            },
            rx,
        )
    }

    /// Passes a piece on, or drops it (counted) when the caller is behind or gone: never
    /// waits.
    pub fn send(&self, piece: OutputPiece) {
        let bytes = piece.data.len() as u64;
        if self.tx.try_send(CallEvent::Output(piece)).is_err() {
            self.dropped.fetch_add(bytes, Ordering::Relaxed);
        }
    }

    /// Passes a progress report on, or drops it when the caller is behind or gone: never
    /// waits. (A later report says more than a dropped one, so none is counted.)
    pub fn progress(&self, report: ProgressReport) {
        let _ = self.tx.try_send(CallEvent::Progress(report));
    }

    /// Bytes dropped so far because the caller was behind.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slow_caller_loses_counted_pieces_and_never_blocks_the_producer() {
        let (sink, mut rx) = OutputSink::channel();
        for _ in 0..PIECES_IN_FLIGHT + 10 {
            sink.send(OutputPiece {
                stream: OutputStream::Stdout,
                data: vec![b'x'; 100],
            });
        }
        assert_eq!(sink.dropped(), 1000);
        let mut got = 0;
        while let Ok(event) = rx.try_recv() {
            assert!(matches!(event, CallEvent::Output(_)));
            got += 1;
        }
        assert_eq!(got, PIECES_IN_FLIGHT);
        drop(rx);
        sink.send(OutputPiece {
            stream: OutputStream::Stderr,
            data: vec![1],
        });
        assert_eq!(sink.dropped(), 1001);
    }
}
