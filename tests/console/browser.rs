//! A headless Chromium driven over WebDriver (Debian's `chromium` and `chromium-driver`,
//! the `fantoccini` client), and a small HTTP server playing the attacker's site.

use fantoccini::{Client, ClientBuilder, Locator};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A program on `PATH`.
fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(program))
            .find(|p| p.is_file())
    })
}

/// Chromium and chromedriver, when both are installed. With `WHARF_REQUIRE_BROWSER=1`
/// (CI) a missing one fails the test instead of skipping it.
pub fn installed() -> Option<(PathBuf, PathBuf)> {
    let found = which("chromium").zip(which("chromedriver"));
    if found.is_none() {
        assert!(
            std::env::var("WHARF_REQUIRE_BROWSER").as_deref() != Ok("1"),
            "Chromium and chromedriver are required (WHARF_REQUIRE_BROWSER=1): apt-get install chromium chromium-driver"
        );
        eprintln!(
            "skipping: no chromium or chromedriver (apt-get install chromium chromium-driver)"
        );
    }
    found
}

/// A chromedriver process and a WebDriver session of a headless Chromium in it; the
/// process is killed when dropped.
pub struct Browser {
    pub client: Client,
    driver: Child,
    shots: PathBuf,
}

impl Browser {
    /// Starts chromedriver and opens a headless Chromium session.
    pub async fn start(chromium: &std::path::Path, chromedriver: &std::path::Path) -> Browser {
        let port = wharf_integration_tests::free_port();
        let driver = Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let deadline = Instant::now() + Duration::from_secs(30);
        while !wharf_integration_tests::processes::answers_http(port) {
            assert!(Instant::now() < deadline, "chromedriver did not start");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".into(),
            serde_json::json!({
                "binary": chromium,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", "--window-size=1280,1100"],
            }),
        );
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let client = ClientBuilder::new(connector)
            .capabilities(caps)
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
            .expect("a WebDriver session");
        let exe = std::env::current_exe().expect("test exe");
        let target = exe.ancestors().nth(3).expect("target dir").to_path_buf();
        let shots = target.join("console-screenshots");
        std::fs::create_dir_all(&shots).expect("screenshot dir");
        Browser {
            client,
            driver,
            shots,
        }
    }

    /// Goes to `url` and returns the page's path (after redirects).
    pub async fn open(&self, url: &str) -> String {
        self.client.goto(url).await.expect("navigates");
        self.path().await
    }

    /// The current page's path.
    pub async fn path(&self) -> String {
        self.client
            .current_url()
            .await
            .expect("url")
            .path()
            .to_string()
    }

    /// Saves a screenshot of the page as `target/console-screenshots/NAME.png`.
    pub async fn shot(&self, name: &str) {
        let png = self.client.screenshot().await.expect("screenshot");
        std::fs::write(self.shots.join(format!("{name}.png")), png).expect("screenshot saved");
    }

    /// The elements matching `css`.
    pub async fn all(&self, css: &str) -> Vec<fantoccini::elements::Element> {
        self.client
            .find_all(Locator::Css(css))
            .await
            .expect("find_all")
    }

    /// The one element matching `css` (fails when there is none).
    pub async fn one(&self, css: &str) -> fantoccini::elements::Element {
        match self.client.find(Locator::Css(css)).await {
            Ok(e) => e,
            Err(e) => panic!("no `{css}` on {}: {e}", self.path().await),
        }
    }

    /// The text of the element matching `css`.
    pub async fn text(&self, css: &str) -> String {
        self.one(css).await.text().await.expect("text")
    }

    /// Types `text` into the field `css` and submits its form with the button `button`.
    pub async fn submit(&self, css: &str, text: &str, button: &str) {
        let field = self.one(css).await;
        field.clear().await.expect("clear");
        field.send_keys(text).await.expect("typed");
        self.press(button, false).await;
    }

    /// Clicks the button `css` (accepting the confirmation the page asks for, when
    /// `confirm`) and waits until the page it loads replaced this one.
    pub async fn press(&self, css: &str, confirm: bool) {
        let old = self.one("html").await;
        self.one(css).await.click().await.expect("clicked");
        if confirm {
            self.client.accept_alert().await.expect("a confirmation");
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        while old.tag_name().await.is_ok() {
            assert!(Instant::now() < deadline, "pressing `{css}` loaded no page");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until the element matching `css` shows `needle` (a page may still be loading).
    pub async fn wait_text(&self, css: &str, needle: &str) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(e) = self.client.find(Locator::Css(css)).await
                && e.text().await.is_ok_and(|t| t.contains(needle))
            {
                return;
            }
            assert!(Instant::now() < deadline, "`{css}` never showed `{needle}`");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until nothing matches `css`, reloading the page between looks.
    pub async fn wait_gone(&self, css: &str) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !self.all(css).await.is_empty() {
            assert!(Instant::now() < deadline, "`{css}` stayed");
            tokio::time::sleep(Duration::from_millis(200)).await;
            self.client.refresh().await.expect("reload");
        }
    }

    /// Waits until the page's path is `path`.
    pub async fn wait_for_path(&self, path: &str) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if self
                .client
                .current_url()
                .await
                .is_ok_and(|u| u.path() == path)
            {
                return;
            }
            assert!(Instant::now() < deadline, "never reached {path}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Closes the session.
    pub async fn close(self) {
        let _ = self.client.clone().close().await;
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// An attacker's site on loopback (reached as `localhost`, another site than the host's
/// `127.0.0.1`): every request is answered with `page` as HTML. Returns its port.
pub fn attacker_site(page: String) -> u16 {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut buf = [0u8; 8192];
            let _ = stream.read(&mut buf);
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{page}",
                page.len()
            );
        }
    });
    port
}
