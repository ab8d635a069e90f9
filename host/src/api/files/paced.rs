//! A response body fed by a task of its own, at the client's pace: every download and
//! watch of the files routes. The task holds what the stream needs (a session's turn, a
//! watch's slot) and hands each piece over only when the client takes it; a client that
//! takes none for the stall time, or the stream's time running out, ends the task and
//! drops what it held (SECURITY.md, "Resource ledger").

use std::future::Future;
use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use tokio::sync::mpsc;

/// The task's end of the body.
pub(super) struct Paced {
    tx: mpsc::Sender<Result<Bytes, std::io::Error>>,
    stall: Duration,
}

impl Paced {
    /// Hands `piece` to the client; `false` when it took nothing for the stall time or
    /// left (the task should end). An `Err` ends the body abruptly, so the client cannot
    /// take a cut stream for a whole one.
    pub(super) async fn send(&self, piece: Result<Bytes, std::io::Error>) -> bool {
        self.tx.send_timeout(piece, self.stall).await.is_ok()
    }
}

/// The body `produce` feeds, ended at the latest after `lasts`.
pub(super) fn paced_body<F>(
    stall: Duration,
    lasts: Option<Duration>,
    produce: impl FnOnce(Paced) -> F,
) -> Body
where
    F: Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = mpsc::channel(1);
    let task = produce(Paced { tx, stall });
    tokio::spawn(async move {
        match lasts {
            Some(lasts) => {
                let _ = tokio::time::timeout(lasts, task).await;
            }
            None => task.await,
        }
    });
    Body::from_stream(futures::stream::unfold(rx, |mut rx| async move {
        let piece = rx.recv().await?;
        Some((piece, rx))
    }))
}
