//! Byte counting on the proxy's upstream sockets: each connection's own counts (for its
//! audit line) and its session's budget, which ends the connection once spent.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A session's egress budget: bytes moved both ways through the proxy, and the ceiling.
#[derive(Debug)]
pub struct Meter {
    used: AtomicU64,
    limit: u64,
}

impl Meter {
    /// A budget of `limit` bytes, none used.
    pub fn new(limit: u64) -> Self {
        Meter {
            used: AtomicU64::new(0),
            limit,
        }
    }

    /// Bytes used so far.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    /// Whether the budget is spent.
    pub fn spent(&self) -> bool {
        self.used() >= self.limit
    }

    /// Charges `bytes`, which a connection also adds to its own `count`; `false` once the
    /// budget is exceeded.
    pub(super) fn charge(&self, count: &AtomicU64, bytes: usize) -> bool {
        let bytes = u64::try_from(bytes).unwrap_or(u64::MAX);
        count.fetch_add(bytes, Ordering::Relaxed);
        let before = self.used.fetch_add(bytes, Ordering::Relaxed);
        before.saturating_add(bytes) <= self.limit
    }
}

/// One connection's counts: bytes sent upstream, and received from it.
#[derive(Debug, Default)]
pub struct Counts {
    /// Sent by the sandbox to the destination.
    pub sent: AtomicU64,
    /// Received from the destination.
    pub received: AtomicU64,
}

/// An upstream socket whose every byte is counted, and which fails once its session's
/// budget is spent.
pub struct Metered<S> {
    inner: S,
    meter: Arc<Meter>,
    counts: Arc<Counts>,
}

impl<S> Metered<S> {
    /// `inner`, counted in `counts` and charged to `meter`.
    pub fn new(inner: S, meter: Arc<Meter>, counts: Arc<Counts>) -> Self {
        Metered {
            inner,
            meter,
            counts,
        }
    }
}

/// The error a connection ends with once its session's budget is spent.
pub(super) fn spent() -> io::Error {
    io::Error::other("this session's egress budget is spent")
}

impl<S: AsyncRead + Unpin> AsyncRead for Metered<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled {
            let read = buf.filled().len() - before;
            if !self.meter.charge(&self.counts.received, read) {
                return Poll::Ready(Err(spent()));
            }
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Metered<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.meter.spent() {
            return Poll::Ready(Err(spent()));
        }
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(written)) = polled {
            self.meter.charge(&self.counts.sent, written);
        }
        polled
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    #[tokio::test]
    async fn bytes_are_counted_and_the_budget_ends_the_stream() {
        let (a, mut b) = tokio::io::duplex(1 << 16);
        let meter = Arc::new(Meter::new(10));
        let counts = Arc::new(Counts::default());
        let mut metered = Metered::new(a, meter.clone(), counts.clone());
        metered.write_all(b"abcd").await.unwrap();
        let mut got = [0u8; 4];
        b.read_exact(&mut got).await.unwrap();
        b.write_all(b"123456").await.unwrap();
        let mut back = [0u8; 6];
        metered.read_exact(&mut back).await.unwrap();
        assert_eq!(counts.sent.load(Ordering::Relaxed), 4);
        assert_eq!(counts.received.load(Ordering::Relaxed), 6);
        assert_eq!(meter.used(), 10);
        assert!(meter.spent());
        assert!(metered.write_all(b"x").await.is_err());
        b.write_all(b"more").await.unwrap();
        let mut one = [0u8; 1];
        assert!(metered.read(&mut one).await.is_err());
    }
}
