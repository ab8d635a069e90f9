//! A proxy request's head: read from the program (bounded), parsed with `httparse`, where
//! it goes, and — for an absolute `http://` URL — the head sent on to the destination in
//! origin form, asking it to close the connection after its answer, so that each proxy
//! connection carries one checked request.

use http::Uri;
use tokio::io::{AsyncRead, AsyncReadExt as _};

/// The largest request head the proxy reads.
pub(super) const MAX_HEAD_BYTES: usize = 64 * 1024;
/// The most header fields a head may have.
const MAX_FIELDS: usize = 100;
/// Header fields a proxy answers itself or that name this hop only, never sent on.
const HOP_FIELDS: [&str; 5] = [
    "connection",
    "proxy-connection",
    "proxy-authorization",
    "keep-alive",
    "te",
];

/// A request head as the proxy needs it.
#[derive(Debug)]
pub(super) struct RequestHead {
    /// The method, as sent.
    pub(super) method: String,
    /// `host:port`, when the head names a target a proxy serves (`CONNECT host:port`, or
    /// an absolute `http://` URL, port 80 by default).
    pub(super) target: Option<(String, u16)>,
    /// For an `http://` URL: the head to send to the destination.
    pub(super) forwarded: Option<Vec<u8>>,
    /// Bytes the program sent after the head (the start of a body or of a tunnel).
    pub(super) rest: Vec<u8>,
}

impl RequestHead {
    /// Whether this is a `CONNECT`.
    pub(super) fn is_connect(&self) -> bool {
        self.method == "CONNECT"
    }
}

/// Why no head was read.
#[derive(Debug, thiserror::Error)]
pub(super) enum HeadError {
    /// The program closed before a whole head.
    #[error("the connection closed before a whole request head")]
    Closed,
    /// Not an HTTP/1 request head, or one larger than the proxy reads.
    #[error("{0}")]
    Malformed(String),
    /// Reading failed.
    #[error("reading the request head: {0}")]
    Io(#[from] std::io::Error),
}

/// Reads one request head from `program`: at most [`MAX_HEAD_BYTES`]. The bytes read so
/// far are parsed again only when a read may have ended the head (or on the first, so
/// that what is no HTTP is refused at once): a program sending a byte at a time does not
/// make the proxy parse the growing head for each byte.
pub(super) async fn read<S: AsyncRead + Unpin + ?Sized>(
    program: &mut S,
) -> Result<RequestHead, HeadError> {
    let mut read = Vec::with_capacity(8 * 1024);
    loop {
        let before = read.len();
        let room = (MAX_HEAD_BYTES - before) as u64;
        if (&mut *program).take(room).read_buf(&mut read).await? == 0 {
            return Err(HeadError::Closed);
        }
        if (before == 0 || may_end_a_head(&read[before.saturating_sub(3)..]))
            && let Some(head) = parse(&read)?
        {
            return Ok(head);
        }
        if read.len() >= MAX_HEAD_BYTES {
            return Err(HeadError::Malformed(format!(
                "a request head larger than {MAX_HEAD_BYTES} bytes"
            )));
        }
    }
}

/// Whether `bytes` hold an empty line's end (`httparse` takes `\r\n` and a bare `\n`).
fn may_end_a_head(bytes: &[u8]) -> bool {
    bytes.windows(2).any(|w| w == b"\n\n") || bytes.windows(3).any(|w| w == b"\n\r\n")
}

/// The head in `read`, if it is whole.
fn parse(read: &[u8]) -> Result<Option<RequestHead>, HeadError> {
    let mut fields = [httparse::EMPTY_HEADER; MAX_FIELDS];
    let mut request = httparse::Request::new(&mut fields);
    let length = match request.parse(read) {
        Ok(httparse::Status::Complete(length)) => length,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => {
            return Err(HeadError::Malformed(format!(
                "not an HTTP/1 request head: {e}"
            )));
        }
    };
    let (Some(method), Some(path), Some(version)) = (request.method, request.path, request.version)
    else {
        return Ok(None);
    };
    let uri: Option<Uri> = path.parse().ok();
    let target = uri.as_ref().and_then(|uri| target(method, uri));
    let forwarded = match (&uri, &target) {
        (Some(uri), Some(_)) if method != "CONNECT" => {
            Some(forwarded_head(method, uri, version, request.headers))
        }
        _ => None,
    };
    Ok(Some(RequestHead {
        method: method.to_string(),
        target,
        forwarded,
        rest: read[length..].to_vec(),
    }))
}

/// Where a request goes: `CONNECT`'s authority, or an absolute `http://` URL's host and
/// port (80 by default).
fn target(method: &str, uri: &Uri) -> Option<(String, u16)> {
    let authority = uri.authority()?;
    let host = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']');
    if host.is_empty() {
        return None;
    }
    let port = if method == "CONNECT" {
        authority.port_u16()?
    } else if uri.scheme_str() == Some("http") {
        authority.port_u16().unwrap_or(80)
    } else {
        return None;
    };
    (port != 0).then(|| (host.to_ascii_lowercase(), port))
}

/// The head sent to the destination: origin form, this hop's fields left out (and those
/// the program's `Connection` names), `Host` added where missing, and `Connection: close`
/// — or `Connection: upgrade` with the program's `Upgrade` where it asks to switch
/// protocols, whose bytes then flow both ways as they are.
fn forwarded_head(method: &str, uri: &Uri, version: u8, fields: &[httparse::Header]) -> Vec<u8> {
    let named_by_connection: Vec<String> = fields
        .iter()
        .filter(|f| {
            f.name.eq_ignore_ascii_case("connection")
                || f.name.eq_ignore_ascii_case("proxy-connection")
        })
        .flat_map(|f| {
            String::from_utf8_lossy(f.value)
                .split(',')
                .map(|t| t.trim().to_ascii_lowercase())
                .collect::<Vec<_>>()
        })
        .filter(|t| !t.is_empty())
        .collect();
    let upgrade = named_by_connection.iter().any(|t| t == "upgrade")
        && fields
            .iter()
            .any(|f| f.name.eq_ignore_ascii_case("upgrade"));
    let origin_form = uri.path_and_query().map_or("/", |pq| pq.as_str());
    let mut head = format!("{method} {origin_form} HTTP/1.{version}\r\n").into_bytes();
    let mut has_host = false;
    for field in fields {
        let name = field.name.to_ascii_lowercase();
        let kept_upgrade = upgrade && name == "upgrade";
        if !kept_upgrade
            && (HOP_FIELDS.contains(&name.as_str()) || named_by_connection.contains(&name))
        {
            continue;
        }
        has_host |= name == "host";
        head.extend_from_slice(field.name.as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(field.value);
        head.extend_from_slice(b"\r\n");
    }
    if !has_host && let Some(authority) = uri.authority() {
        head.extend_from_slice(format!("Host: {authority}\r\n").as_bytes());
    }
    head.extend_from_slice(if upgrade {
        b"Connection: upgrade\r\n\r\n"
    } else {
        b"Connection: close\r\n\r\n"
    });
    head
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(text: &str) -> RequestHead {
        parse(text.as_bytes()).expect("parses").expect("whole")
    }

    #[test]
    fn an_absolute_url_is_sent_on_in_origin_form_without_this_hops_fields() {
        let h = head(
            "GET http://Example.test:8080/a?b=1 HTTP/1.1\r\nProxy-Connection: keep-alive\r\nProxy-Authorization: Basic eA==\r\nConnection: keep-alive, X-Secret\r\nX-Secret: s\r\nAccept: */*\r\n\r\nrest",
        );
        assert_eq!(h.target, Some(("example.test".into(), 8080)));
        let sent = String::from_utf8(h.forwarded.expect("forwarded")).expect("text");
        assert_eq!(
            sent,
            "GET /a?b=1 HTTP/1.1\r\nAccept: */*\r\nHost: Example.test:8080\r\nConnection: close\r\n\r\n"
        );
        assert_eq!(h.rest, b"rest");
    }

    #[test]
    fn connect_names_its_authority_and_sends_no_head() {
        let h = head("CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n");
        assert!(h.is_connect());
        assert_eq!(h.target, Some(("allowed.test".into(), 443)));
        assert!(h.forwarded.is_none());
        let v6 = head("CONNECT [::1]:8443 HTTP/1.1\r\n\r\n");
        assert_eq!(v6.target, Some(("::1".into(), 8443)));
    }

    #[test]
    fn an_upgrade_keeps_its_fields() {
        let h = head(
            "GET http://a.test/ws HTTP/1.1\r\nHost: a.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
        );
        let sent = String::from_utf8(h.forwarded.expect("forwarded")).expect("text");
        assert_eq!(
            sent,
            "GET /ws HTTP/1.1\r\nHost: a.test\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n"
        );
    }

    #[test]
    fn what_a_proxy_does_not_serve_has_no_target() {
        for text in [
            "GET /relative HTTP/1.1\r\nHost: a.test\r\n\r\n",
            "GET https://a.test/ HTTP/1.1\r\n\r\n",
            "CONNECT a.test HTTP/1.1\r\n\r\n",
            "CONNECT a.test:0 HTTP/1.1\r\n\r\n",
            "GET http://:80/ HTTP/1.1\r\n\r\n",
        ] {
            assert_eq!(head(text).target, None, "{text}");
        }
    }

    #[test]
    fn a_partial_head_waits_and_garbage_is_refused() {
        assert!(
            parse(b"GET http://a.test/ HTTP/1.1\r\nAccept")
                .expect("ok")
                .is_none()
        );
        assert!(matches!(
            parse(b"\x16\x03\x01\x02\x00 binary"),
            Err(HeadError::Malformed(_))
        ));
    }

    #[tokio::test]
    async fn a_head_sent_a_byte_at_a_time_is_read_whole() {
        use tokio::io::AsyncWriteExt as _;
        let (mut program, mut proxy) = tokio::io::duplex(1);
        tokio::spawn(async move {
            for byte in b"GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n" {
                program.write_all(&[*byte]).await.expect("write");
            }
        });
        let head = read(&mut proxy).await.expect("a head");
        assert_eq!(head.target, Some(("a.test".into(), 80)));
        assert!(may_end_a_head(b"x\n\n") && may_end_a_head(b"\n\r\n"));
        assert!(!may_end_a_head(b"a\r\nb\r\n"));
    }

    #[tokio::test]
    async fn a_head_too_large_or_cut_short_is_an_error() {
        let mut huge = b"GET http://a.test/ HTTP/1.1\r\n".to_vec();
        while huge.len() <= MAX_HEAD_BYTES {
            huge.extend_from_slice(b"X-Pad: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n");
        }
        let mut stream = &huge[..];
        let refused = read(&mut stream).await.expect_err("too large");
        assert!(matches!(refused, HeadError::Malformed(_)), "{refused}");
        let mut short = &b"GET http://a.test/ HTTP/1.1\r\n"[..];
        assert!(matches!(read(&mut short).await, Err(HeadError::Closed)));
    }
}
