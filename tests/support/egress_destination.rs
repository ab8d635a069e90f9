//! An HTTP destination for egress tests: on every address of this host, answering
//! `hello-egress` for any path and [`BIG_BYTES`] bytes for `/big`.

use tokio::io::AsyncWriteExt;

use crate::http_head::read_http_head;

/// What the destination answers on `/big`.
pub const BIG_BYTES: usize = 256 * 1024;

/// A destination on every address of this host: `hello-egress` for any path, `BIG_BYTES`
/// bytes for `/big`. Returns its port.
pub async fn destination() -> u16 {
    let listener = tokio::net::TcpListener::bind("0.0.0.0:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let head = read_http_head(&mut socket, 8192).await;
                let big = String::from_utf8_lossy(&head).contains(" /big ");
                let body = if big {
                    vec![b'x'; BIG_BYTES]
                } else {
                    b"hello-egress".to_vec()
                };
                let answer = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = socket.write_all(answer.as_bytes()).await;
                let _ = socket.write_all(&body).await;
            });
        }
    });
    port
}
