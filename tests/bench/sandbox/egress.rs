//! The egress rows: busybox `wget` in a sandbox downloading 100 MB from a server on this
//! host, through the host's egress proxy (a session with `allow_egress_to`: no network of
//! its own) against the same download at the bridge gateway's address from a session with
//! an open network; and 200 small requests in a row each way, whose difference per request
//! is what the proxy adds to a connection. Same client, same server, same run.

use super::{Cleanup, Client, ms};
use serde_json::json;
use std::time::Instant;
use tokio::io::AsyncWriteExt;
use wharf_integration_tests::http_head::read_http_head;
use wharf_integration_tests::{docker_provider, start_with};

/// The download's size.
const BIG_BYTES: usize = 100 << 20;
/// Small requests timed per path.
const SMALL: usize = 200;
/// Downloads timed per path (the best counts: the machine's other work only slows one).
const DOWNLOADS: usize = 7;

/// A server on every address: `BIG_BYTES` for `/big`, two bytes for anything else.
async fn destination() -> u16 {
    let listener = tokio::net::TcpListener::bind("0.0.0.0:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move {
        let chunk = vec![b'x'; 1 << 20];
        while let Ok((mut socket, _)) = listener.accept().await {
            let chunk = chunk.clone();
            tokio::spawn(async move {
                let head = read_http_head(&mut socket, 8192).await;
                let big = String::from_utf8_lossy(&head).contains(" /big ");
                let len = if big { BIG_BYTES } else { 2 };
                let answer = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {len}\r\nConnection: close\r\n\r\n"
                );
                let _ = socket.write_all(answer.as_bytes()).await;
                if big {
                    for _ in 0..(BIG_BYTES / chunk.len()) {
                        if socket.write_all(&chunk).await.is_err() {
                            return;
                        }
                    }
                } else {
                    let _ = socket.write_all(b"ok").await;
                }
            });
        }
    });
    port
}

/// Wall-clock ms of `command` in `session` (the call's own overhead is a few ms).
async fn timed(client: &Client, session: &str, command: &str) -> f64 {
    let t = Instant::now();
    client.run(session, command).await;
    ms(t.elapsed())
}

/// The egress rows.
pub(super) async fn rows(cleanup: &mut Cleanup) -> Vec<(String, String)> {
    let port = destination().await;
    let mut provider = docker_provider();
    provider.grants.egress_to = vec!["*.test:*".into()];
    provider.grants.egress_cidrs = vec!["127.0.0.1/32".into()];
    provider.grants.max_egress_bytes_per_session = 1 << 40;
    let host = start_with(vec![("docker", provider)], |s| {
        s.egress_resolve.insert(
            "bench.test".into(),
            vec!["127.0.0.1".parse().expect("an address")],
        );
    })
    .await;
    let client = Client::new(&host);
    let proxied = client
        .create_session_with(
            "bench-egress",
            &json!({"network": {"allow_egress_to": [format!("bench.test:{port}")], "allow_egress_to_cidrs": ["127.0.0.1/32"]}}),
        )
        .await;
    let direct = client
        .create_session_with(
            "bench-direct",
            &json!({"network": {"block_network": false}}),
        )
        .await;
    cleanup.sessions.push(proxied.clone());
    cleanup.sessions.push(direct.clone());
    // The bridge's address on this host (`docker0`): the engine's IPAM may not name it.
    let ip = std::process::Command::new("ip")
        .args(["-4", "-o", "addr", "show", "docker0"])
        .output()
        .expect("ip addr");
    let gateway = String::from_utf8_lossy(&ip.stdout)
        .split_whitespace()
        .skip_while(|w| *w != "inet")
        .nth(1)
        .and_then(|cidr| cidr.split('/').next())
        .expect("a docker0 address")
        .to_string();
    let via_proxy = format!("http://bench.test:{port}");
    let at_gateway = format!("http://{gateway}:{port}");
    let download = |base: &str| format!("wget -q -O /dev/null {base}/big");
    let small = |base: &str| {
        format!(
            "i=0; while [ $i -lt {SMALL} ]; do wget -q -O /dev/null {base}/s || exit 1; i=$((i+1)); done"
        )
    };
    // Warm-up: both paths once.
    client
        .run(
            &proxied,
            &small(&via_proxy).replace(&SMALL.to_string(), "5"),
        )
        .await;
    client
        .run(
            &direct,
            &small(&at_gateway).replace(&SMALL.to_string(), "5"),
        )
        .await;
    let (mut proxy_best, mut direct_best) = (f64::MAX, f64::MAX);
    for _ in 0..DOWNLOADS {
        direct_best = direct_best.min(timed(&client, &direct, &download(&at_gateway)).await);
        proxy_best = proxy_best.min(timed(&client, &proxied, &download(&via_proxy)).await);
    }
    let direct_small = timed(&client, &direct, &small(&at_gateway)).await;
    let proxy_small = timed(&client, &proxied, &small(&via_proxy)).await;
    client.delete_all(&[proxied, direct], cleanup).await;
    drop(host);
    let mb_s = |t: f64| (BIG_BYTES as f64 / (1 << 20) as f64) / (t / 1e3);
    vec![
        (
            format!(
                "egress: 100 MB download (busybox wget) through the egress proxy, best of {DOWNLOADS}, alternating with the direct one"
            ),
            format!("{proxy_best:.0} ms ({:.0} MB/s)", mb_s(proxy_best)),
        ),
        (
            "egress: the same download at the bridge gateway from an open-network sandbox".into(),
            format!("{direct_best:.0} ms ({:.0} MB/s)", mb_s(direct_best)),
        ),
        (
            "ratio proxy / direct, throughput".into(),
            format!("{:.2}x", direct_best / proxy_best),
        ),
        (
            format!("egress: {SMALL} small requests in a row (a connection each), proxy vs direct"),
            format!("{proxy_small:.0} ms vs {direct_small:.0} ms"),
        ),
        (
            "egress: added per connection by the proxy".into(),
            format!("{:.2} ms", (proxy_small - direct_small) / SMALL as f64),
        ),
    ]
}
