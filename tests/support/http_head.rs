//! Reading an HTTP message's head off a raw connection, as a test's server or client does.

use tokio::io::{AsyncRead, AsyncReadExt};

/// The head on `stream`, read a byte at a time up to its empty line (so nothing after it
/// is taken), at most `limit` bytes; shorter when the stream ends or fails first.
pub async fn read_http_head<S: AsyncRead + Unpin>(stream: &mut S, limit: usize) -> Vec<u8> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n")
        && head.len() < limit
        && stream.read(&mut byte).await.unwrap_or(0) == 1
    {
        head.push(byte[0]);
    }
    head
}
