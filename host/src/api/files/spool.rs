//! An upload's body read to the end into an unnamed temporary file before the session's
//! turn is taken: the size is capped, a stalled body times out, and a slow client never
//! holds the session while it dawdles.

use crate::error_code::{Code, WharfError};
use axum::body::Body;
use futures::StreamExt;
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};

/// How much of an upload may arrive, and how long the next piece may take.
#[derive(Debug, Clone, Copy)]
pub struct UploadLimits {
    /// Largest body, in bytes (4013 beyond).
    pub max_bytes: u64,
    /// Longest wait for the next piece (5006 beyond).
    pub read_timeout: Duration,
}

/// The bytes each tenant's uploads may have spooled at once, all its uploads together
/// (`[server] max_spooled_bytes_per_tenant`): an upload reserves its declared length (or
/// the largest upload, when it declares none) before a byte is read.
pub struct SpoolBudget {
    per_tenant: u64,
    reserved: Arc<Mutex<HashMap<String, u64>>>,
}

/// One upload's reservation; given back when dropped.
pub struct Reservation {
    reserved: Arc<Mutex<HashMap<String, u64>>>,
    tenant: String,
    bytes: u64,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if let Ok(mut reserved) = self.reserved.lock()
            && let Some(n) = reserved.get_mut(&self.tenant)
        {
            *n = n.saturating_sub(self.bytes);
            if *n == 0 {
                reserved.remove(&self.tenant);
            }
        }
    }
}

impl SpoolBudget {
    /// A budget of `per_tenant` bytes for each tenant.
    pub fn new(per_tenant: u64) -> Self {
        Self {
            per_tenant,
            reserved: Arc::default(),
        }
    }

    /// Reserves `bytes` for `tenant`, or 4290 (retryable) past its budget.
    pub fn reserve(&self, tenant: &str, bytes: u64) -> Result<Reservation, WharfError> {
        let mut reserved = self
            .reserved
            .lock()
            .map_err(|_| WharfError::internal("the upload budget is poisoned"))?;
        let held = reserved.get(tenant).copied().unwrap_or(0);
        if held.saturating_add(bytes) > self.per_tenant {
            return Err(WharfError::new(
                Code::RateLimited,
                format!(
                    "tenant `{tenant}`'s uploads in progress hold {held} bytes; this one needs {bytes} more, past the cap of {} (server.max_spooled_bytes_per_tenant): retry when one finishes",
                    self.per_tenant
                ),
            )
            .retryable(true));
        }
        reserved.insert(tenant.to_string(), held + bytes);
        Ok(Reservation {
            reserved: self.reserved.clone(),
            tenant: tenant.to_string(),
            bytes,
        })
    }
}

/// A body spooled to disk, ready to be read back in pieces.
pub struct Spooled {
    file: tokio::fs::File,
    /// Bytes in it.
    pub len: u64,
}

fn too_large(max: u64) -> WharfError {
    WharfError::new(
        Code::PayloadTooLarge,
        format!("the upload is over the limit of {max} bytes"),
    )
}

fn disk(e: std::io::Error) -> WharfError {
    WharfError::internal(format!("could not spool the upload: {e}"))
}

/// Refuses a declared `Content-Length` over the limit before anything is read.
pub fn check_declared(declared: Option<u64>, limits: UploadLimits) -> Result<(), WharfError> {
    match declared {
        Some(n) if n > limits.max_bytes => Err(too_large(limits.max_bytes)),
        _ => Ok(()),
    }
}

/// Reads `body` to its end into a temporary file in `dir`.
pub async fn spool(body: Body, dir: &Path, limits: UploadLimits) -> Result<Spooled, WharfError> {
    let file = tempfile::tempfile_in(dir).map_err(disk)?;
    let mut file = tokio::fs::File::from_std(file);
    let mut stream = body.into_data_stream();
    let mut len: u64 = 0;
    loop {
        let next = tokio::time::timeout(limits.read_timeout, stream.next())
            .await
            .map_err(|_| {
                WharfError::new(
                    Code::Timeout,
                    format!(
                        "the upload stalled: nothing arrived for {} ms",
                        limits.read_timeout.as_millis()
                    ),
                )
            })?;
        let Some(chunk) = next else { break };
        let bytes = chunk
            .map_err(|e| WharfError::invalid_request(format!("the upload was interrupted: {e}")))?;
        len = len.saturating_add(bytes.len() as u64);
        if len > limits.max_bytes {
            return Err(too_large(limits.max_bytes));
        }
        file.write_all(&bytes).await.map_err(disk)?;
    }
    file.flush().await.map_err(disk)?;
    file.rewind().await.map_err(disk)?;
    Ok(Spooled { file, len })
}

impl Spooled {
    /// The next piece of at most `max` bytes; empty at the end.
    pub async fn next_piece(&mut self, max: usize) -> Result<Vec<u8>, WharfError> {
        let mut piece = Vec::new();
        (&mut self.file)
            .take(max as u64)
            .read_to_end(&mut piece)
            .await
            .map_err(disk)?;
        Ok(piece)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max_bytes: u64) -> UploadLimits {
        UploadLimits {
            max_bytes,
            read_timeout: Duration::from_secs(5),
        }
    }

    #[tokio::test]
    async fn a_body_over_the_limit_is_refused_and_one_within_it_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let e = spool(Body::from(vec![1u8; 11]), dir.path(), limits(10))
            .await
            .err()
            .unwrap();
        assert_eq!(e.code, Code::PayloadTooLarge);
        assert_eq!(
            check_declared(Some(u64::MAX), limits(10)).unwrap_err().code,
            Code::PayloadTooLarge
        );
        let mut s = spool(Body::from(vec![7u8; 10]), dir.path(), limits(10))
            .await
            .unwrap();
        assert_eq!(s.len, 10);
        assert_eq!(s.next_piece(4).await.unwrap(), vec![7u8; 4]);
        assert_eq!(s.next_piece(100).await.unwrap(), vec![7u8; 6]);
        assert!(s.next_piece(100).await.unwrap().is_empty());
    }

    #[test]
    fn the_budget_counts_each_tenant_and_gives_back() {
        let budget = SpoolBudget::new(100);
        let a = budget.reserve("a", 60).unwrap();
        assert_eq!(
            budget.reserve("a", 41).err().unwrap().code,
            Code::RateLimited
        );
        let _b = budget.reserve("b", 100).unwrap();
        drop(a);
        budget.reserve("a", 100).unwrap();
    }

    #[tokio::test]
    async fn a_stalled_body_times_out() {
        let dir = tempfile::tempdir().unwrap();
        let stalled = futures::stream::pending::<Result<bytes::Bytes, std::io::Error>>();
        let e = spool(
            Body::from_stream(stalled),
            dir.path(),
            UploadLimits {
                max_bytes: 10,
                read_timeout: Duration::from_millis(50),
            },
        )
        .await
        .err()
        .unwrap();
        assert_eq!(e.code, Code::Timeout);
    }
}
