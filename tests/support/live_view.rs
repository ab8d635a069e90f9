//! The console's live view driven from outside, as a browser would: sign in with a token
//! through the login form (its nonce and cookie), watch `/console/calls/stream`, and a soak
//! of tool calls with a watcher attached that samples the host's resident memory (the
//! 10-minute test in CI, `tests/console_soak.rs`, and the bench's one-hour run).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A client that keeps cookies out of its own hands and follows no redirect.
fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(30))
        .build()
        .expect("a client")
}

/// Signs in at `url` with `token` through the login form; the console cookie
/// (`wharf_console=…`) to send with later requests.
pub async fn console_cookie(url: &str, token: &str) -> String {
    let http = client();
    let form = http
        .get(format!("{url}/console/login"))
        .send()
        .await
        .expect("the login form");
    let nonce_cookie = form
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .expect("the login cookie")
        .to_string();
    let page = form.text().await.expect("the form's page");
    let nonce = page
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("the form's nonce")
        .to_string();
    let signed_in = http
        .post(format!("{url}/console/login"))
        .header("cookie", nonce_cookie)
        .header("origin", url)
        .header("content-type", "application/x-www-form-urlencoded")
        // The tests' tokens and the hex nonce need no escaping.
        .body(format!("token={token}&csrf={nonce}"))
        .send()
        .await
        .expect("the login post");
    assert_eq!(signed_in.status(), 303, "signing in");
    signed_in
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with("wharf_console="))
        .and_then(|v| v.split(';').next())
        .expect("the console cookie")
        .to_string()
}

/// An open live view reading every event as it comes.
pub struct LiveWatcher {
    /// Calls read (each `calls` event carries the calls of its window).
    pub calls: Arc<AtomicU64>,
    /// Calls the host said this watcher skipped (an event's `skipped`).
    pub skipped: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl LiveWatcher {
    /// Opens `/console/calls/stream` at `url` with the console `cookie`.
    pub async fn open(url: &str, cookie: &str) -> LiveWatcher {
        let mut stream = reqwest::Client::new()
            .get(format!("{url}/console/calls/stream"))
            .header("cookie", cookie)
            .header("accept", "text/event-stream")
            .send()
            .await
            .expect("the live view");
        assert_eq!(stream.status(), 200, "the live view opens");
        let (calls, skipped, stop) = (
            Arc::new(AtomicU64::new(0)),
            Arc::new(AtomicU64::new(0)),
            Arc::new(AtomicBool::new(false)),
        );
        let (c, s, halt) = (calls.clone(), skipped.clone(), stop.clone());
        let task = tokio::spawn(async move {
            let mut pending = String::new();
            while !halt.load(Ordering::Relaxed) {
                let Ok(Some(chunk)) = stream.chunk().await else {
                    return;
                };
                pending.push_str(&String::from_utf8_lossy(&chunk));
                while let Some(end) = pending.find("\n\n") {
                    let event: String = pending.drain(..end + 2).collect();
                    if !event.contains("event: calls") {
                        continue;
                    }
                    let batch: serde_json::Value = event
                        .lines()
                        .find_map(|l| l.strip_prefix("data: "))
                        .and_then(|d| serde_json::from_str(d).ok())
                        .unwrap_or_default();
                    let read = batch["calls"].as_array().map_or(0, Vec::len);
                    c.fetch_add(read as u64, Ordering::Relaxed);
                    s.fetch_add(batch["skipped"].as_u64().unwrap_or(0), Ordering::Relaxed);
                }
            }
        });
        LiveWatcher {
            calls,
            skipped,
            stop,
            task,
        }
    }

    /// Waits until more than `seen` calls were read (at most `within`); how long it took.
    pub async fn wait_past(&self, seen: u64, within: Duration) -> Option<Duration> {
        let started = Instant::now();
        while started.elapsed() < within {
            if self.calls.load(Ordering::Relaxed) > seen {
                return Some(started.elapsed());
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        None
    }

    /// Closes the stream.
    pub fn close(self) {
        self.stop.store(true, Ordering::Relaxed);
        self.task.abort();
    }
}

/// What a soak saw.
#[derive(Debug)]
pub struct SoakReport {
    /// The host's resident memory (KiB) once a minute, the first after a minute of load.
    pub rss_kib: Vec<u64>,
    /// Calls made, and how many did not answer code 0.
    pub calls: u64,
    pub failed: u64,
    /// Events the watcher read and calls it was told it skipped.
    pub events: u64,
    pub skipped: u64,
}

impl SoakReport {
    /// Growth from the first sample to the largest of the last half, KiB (0 when it fell).
    pub fn growth_kib(&self) -> u64 {
        let first = self.rss_kib.first().copied().unwrap_or(0);
        let late = &self.rss_kib[self.rss_kib.len() / 2..];
        late.iter()
            .max()
            .copied()
            .unwrap_or(first)
            .saturating_sub(first)
    }
}

/// `clients` callers each call `tool` (with `args`) at `url` as `token` for `duration`,
/// pausing `pause` between calls, while a live view signed in as `token` watches; the
/// host's (`pid`) memory is sampled once a minute after the first minute.
pub async fn live_view_soak(
    url: &str,
    token: &str,
    pid: u32,
    duration: Duration,
    clients: usize,
    pause: Duration,
) -> SoakReport {
    let cookie = console_cookie(url, token).await;
    let watcher = LiveWatcher::open(url, &cookie).await;
    let (calls, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let until = Instant::now() + duration;
    let mut callers = Vec::new();
    for _ in 0..clients {
        let (url, token) = (url.to_string(), token.to_string());
        let (calls, failed) = (calls.clone(), failed.clone());
        callers.push(tokio::spawn(async move {
            let http = reqwest::Client::new();
            let body = serde_json::json!({"tool": "echo:say", "args": {"text": "soak"}});
            while Instant::now() < until {
                let ok = match http
                    .post(format!("{url}/v1/call"))
                    .bearer_auth(&token)
                    .json(&body)
                    .send()
                    .await
                {
                    Ok(r) => r
                        .json::<serde_json::Value>()
                        .await
                        .is_ok_and(|v| v["code"] == 0),
                    Err(_) => false,
                };
                calls.fetch_add(1, Ordering::Relaxed);
                if !ok {
                    failed.fetch_add(1, Ordering::Relaxed);
                }
                if !pause.is_zero() {
                    tokio::time::sleep(pause).await;
                }
            }
        }));
    }
    let mut rss = Vec::new();
    let mut next = Instant::now() + Duration::from_secs(60);
    while next <= until {
        tokio::time::sleep_until(next.into()).await;
        rss.push(crate::processes::rss_kib(pid));
        next += Duration::from_secs(60);
    }
    for caller in callers {
        let _ = caller.await;
    }
    // The last calls' events are through.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let report = SoakReport {
        rss_kib: rss,
        calls: calls.load(Ordering::Relaxed),
        failed: failed.load(Ordering::Relaxed),
        events: watcher.calls.load(Ordering::Relaxed),
        skipped: watcher.skipped.load(Ordering::Relaxed),
    };
    watcher.close();
    report
}
