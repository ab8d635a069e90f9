//! The operator's console (`/console`, docs/operators.md "Console") in a real headless
//! Chromium against a real `wharf serve`: sign in with a token through the form (the
//! cookie is HttpOnly, SameSite=Strict, for /console only; no token in any page), see the
//! bundled backends, watch a backend hot-loaded through the admin API appear, approve one
//! escalating upgrade and reject another, unload one, see a refused load, end a session;
//! and the attacker's cases: a cross-site form post, a stolen cookie without (or with a
//! wrong) CSRF token, a `read` token (and a `call` one) that has no buttons and whose
//! forged posts are refused, a `<script>` in a session key that stays text, a logged-out
//! cookie that opens nothing; live calls appearing as they end (a read token's page showing
//! only its own tenant's), filtered, their codes linked to the code table; a session's
//! terminal opened from the sessions page runs a
//! typed line in its sandbox (a ticket minted with the CSRF token). Screenshots of each
//! page go to
//! `target/console-screenshots/`. Without a browser: the
//! console with no token configured, the login form's nonce, and the `Secure` cookie and
//! plain-HTTP rules on and off loopback.

#[path = "console/browser.rs"]
mod browser;
#[path = "console/sign_in.rs"]
mod sign_in;

use browser::{Browser, attacker_site};
use serde_json::{Value, json};
use std::time::Duration;
use wharf_integration_tests::processes::WharfProcess;

const ADMIN: &str = "t-ops-9f2c61d0e4";
const VIEWER: &str = "t-view-5b7a03c2e8";
const AGENT: &str = "t-agent-7c1d9e44a0";
/// A session key that would run if a page rendered it as markup.
const XSS_KEY: &str = "<script>window.__pwned=1</script><img src=x onerror=\"window.__pwned=2\">";

fn config(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("wharf.toml");
    let mut text = format!(
        "[server]\ndata_dir = \"{}\"\n\n",
        dir.join("data").display()
    );
    for (name, value, scopes) in [
        ("ops", ADMIN, "[\"admin\"]"),
        ("viewer", VIEWER, "[\"read\"]"),
        ("agent", AGENT, "[\"read\", \"call\"]"),
    ] {
        text.push_str(&format!(
            "[[auth.tokens]]\nname = \"{name}\"\nvalue = \"{value}\"\nscopes = {scopes}\n\n"
        ));
    }
    for (name, bundled) in [
        ("echo", "echo"),
        ("scratchpad", "scratchpad"),
        ("tool", "echo"),
    ] {
        text.push_str(&format!(
            "[backends.{name}]\npath = \"bundled:{bundled}\"\n\n"
        ));
    }
    std::fs::write(&path, text).unwrap();
    path
}

/// A client that does not follow redirects (a 303 is an answer to check).
fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap()
}

async fn api(method: reqwest::Method, url: String, token: &str, body: Option<Value>) -> Value {
    let mut request = http().request(method, url).bearer_auth(token);
    if let Some(body) = body {
        request = request.json(&body);
    }
    request.send().await.unwrap().json().await.unwrap()
}

/// Uploads the bundled `component` as backend `name` through the admin API.
async fn upload(host: &WharfProcess, name: &str, component: &str) -> Value {
    http()
        .put(format!("{}/v1/admin/backends/{name}", host.url))
        .bearer_auth(ADMIN)
        .header("content-type", "application/octet-stream")
        .body(wharf::bundled::wasm(component).unwrap().to_vec())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// A form post to the console carrying `cookie` (a stolen or forged request).
async fn forged(host: &WharfProcess, path: &str, cookie: &str, form: &str) -> (u16, String) {
    let reply = http()
        .post(format!("{}{path}", host.url))
        .header("cookie", format!("wharf_console={cookie}"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form.to_string())
        .send()
        .await
        .unwrap();
    (reply.status().as_u16(), reply.text().await.unwrap())
}

async fn session_code(host: &WharfProcess, id: &str) -> u64 {
    let reply = api(
        reqwest::Method::GET,
        format!("{}/v1/sessions/{id}", host.url),
        AGENT,
        None,
    )
    .await;
    reply["code"].as_u64().unwrap()
}

async fn pending_of(host: &WharfProcess, name: &str) -> Value {
    let list = api(
        reqwest::Method::GET,
        format!("{}/v1/backends", host.url),
        ADMIN,
        None,
    )
    .await;
    list["data"]["backends"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["name"] == name)
        .map(|b| b["pending"].clone())
        .unwrap_or(Value::Null)
}

/// Signs in through the form with `token` and returns the console cookie's value.
async fn sign_in(b: &Browser, url: &str, token: &str) -> String {
    assert_eq!(b.open(&format!("{url}/console")).await, "/console/login");
    b.submit("#token", token, "#sign-in").await;
    b.wait_for_path("/console").await;
    let cookie = b
        .client
        .get_named_cookie("wharf_console")
        .await
        .expect("the console cookie");
    assert_eq!(cookie.http_only(), Some(true));
    assert_eq!(
        cookie.same_site().map(|s| s.to_string()).as_deref(),
        Some("Strict")
    );
    assert_eq!(cookie.path(), Some("/console"));
    cookie.value().to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_console_in_a_real_browser() {
    let Some((chromium, chromedriver)) = browser::installed() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let host = WharfProcess::start(&config(dir.path()));
    let url = host.url.clone();
    let b = Browser::start(&chromium, &chromedriver).await;

    // Signed out, every page leads to the login form; a wrong token is refused there.
    assert_eq!(
        b.open(&format!("{url}/console/sessions")).await,
        "/console/login"
    );
    b.shot("login").await;
    b.submit("#token", "not-a-token", "#sign-in").await;
    assert!(b.text("#login-error").await.contains("not valid"));

    // The admin signs in and sees the bundled backends; no token is in the page.
    let admin_cookie = sign_in(&b, &url, ADMIN).await;
    for name in ["echo", "scratchpad", "tool"] {
        b.one(&format!("section.backend[data-backend=\"{name}\"]"))
            .await;
    }
    assert!(
        b.text("section[data-backend=\"echo\"]")
            .await
            .contains("echo:say")
    );
    let source = b.client.source().await.unwrap();
    for token in [ADMIN, VIEWER, AGENT] {
        assert!(!source.contains(token), "a token in the page");
    }
    b.shot("backends").await;

    // The console's answers forbid framing, caching and inline script.
    let page = http()
        .get(format!("{url}/console"))
        .header("cookie", format!("wharf_console={admin_cookie}"))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let h = page.headers();
    assert!(
        h["content-security-policy"]
            .to_str()
            .unwrap()
            .contains("script-src 'self';")
    );
    assert_eq!(h["x-frame-options"], "DENY");
    assert_eq!(h["cache-control"], "no-store");

    // A backend hot-loaded through the admin API appears after a reload.
    assert!(b.all("section[data-backend=\"fresh\"]").await.is_empty());
    let loaded = upload(&host, "fresh", "text-index").await;
    assert_eq!(loaded["code"], 0, "{loaded}");
    b.client.refresh().await.unwrap();
    assert!(
        b.text("section[data-backend=\"fresh\"]")
            .await
            .contains("fresh:search")
    );
    // A component that does not load is listed as a refused load.
    let refused = http()
        .put(format!("{url}/v1/admin/backends/broken"))
        .bearer_auth(ADMIN)
        .header("content-type", "application/octet-stream")
        .body("<script>not a component</script>")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 400);
    b.client.refresh().await.unwrap();
    b.one("table.rejected tr[data-backend=\"broken\"]").await;

    // A component uploaded from the page's form serves; a file that is no component is
    // refused with its reason, and an upload without the CSRF header is refused.
    let wasm_file = dir.path().join("echo.wasm");
    std::fs::write(&wasm_file, wharf::bundled::wasm("echo").unwrap()).unwrap();
    let junk_file = dir.path().join("junk.wasm");
    std::fs::write(&junk_file, "<script>not a component</script>").unwrap();
    b.one("#upload-name")
        .await
        .send_keys("uploaded")
        .await
        .unwrap();
    b.one("#upload-file")
        .await
        .send_keys(junk_file.to_str().unwrap())
        .await
        .unwrap();
    b.one("#upload-button").await.click().await.unwrap();
    b.wait_text("#upload-result", "Refused (").await;
    b.one("#upload-file")
        .await
        .send_keys(wasm_file.to_str().unwrap())
        .await
        .unwrap();
    b.one("#upload-button").await.click().await.unwrap();
    b.wait_text("#upload-result", "now serves").await;
    b.wait_text("section[data-backend=\"uploaded\"]", "uploaded:say")
        .await;
    let said = api(
        reqwest::Method::POST,
        format!("{url}/v1/call"),
        AGENT,
        Some(json!({"tool": "uploaded:say", "args": {"text": "hi"}})),
    )
    .await;
    assert_eq!(said["code"], 0, "{said}");
    let unsigned = http()
        .post(format!("{url}/console/backends/upload?name=sneaky"))
        .header("cookie", format!("wharf_console={admin_cookie}"))
        .header("content-type", "application/octet-stream")
        .body(wharf::bundled::wasm("echo").unwrap().to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(unsigned.status(), 403);
    let tools = api(reqwest::Method::GET, format!("{url}/v1/tools"), AGENT, None).await;
    assert!(!tools.to_string().contains("sneaky:"), "nothing was loaded");

    // An escalating upgrade shows what it adds; Approve makes it serve.
    let held = upload(&host, "tool", "probe").await;
    assert_eq!(held["data"]["state"], "pending", "{held}");
    b.client.refresh().await.unwrap();
    let diff = b.text("section[data-backend=\"tool\"] .pending").await;
    assert!(diff.contains("wharf-sandbox:*"), "{diff}");
    b.client
        .execute(
            "document.querySelector('section[data-backend=\"tool\"] .pending').scrollIntoView();",
            vec![],
        )
        .await
        .unwrap();
    b.shot("backends-pending").await;
    b.press(
        "section[data-backend=\"tool\"] form[action=\"/console/backends/approve\"] button",
        false,
    )
    .await;
    b.wait_text("section[data-backend=\"tool\"] dd.declared", "probe")
        .await;
    b.wait_gone("section[data-backend=\"tool\"] .pending").await;
    let tools = api(reqwest::Method::GET, format!("{url}/v1/tools"), AGENT, None).await;
    assert!(
        tools.to_string().contains("\"tool:kv\""),
        "the approved version serves"
    );
    // Another one is rejected: the running version keeps serving, nothing waits.
    upload(&host, "echo", "probe").await;
    b.client.refresh().await.unwrap();
    b.press(
        "section[data-backend=\"echo\"] form[action=\"/console/backends/reject\"] button",
        false,
    )
    .await;
    b.wait_gone("section[data-backend=\"echo\"] .pending").await;
    assert!(pending_of(&host, "echo").await.is_null());
    assert!(
        b.text("section[data-backend=\"echo\"] dd.declared")
            .await
            .contains("echo")
    );

    // Unload (after the confirmation): the backend leaves the page and its tools go.
    b.press(
        "section[data-backend=\"fresh\"] form[action=\"/console/backends/unload\"] button",
        true,
    )
    .await;
    b.wait_gone("section[data-backend=\"fresh\"]").await;
    let tools = api(reqwest::Method::GET, format!("{url}/v1/tools"), AGENT, None).await;
    assert!(!tools.to_string().contains("fresh:"), "{tools}");

    // Sessions: a key holding markup is shown as text, and nothing of it runs.
    let mut ids = Vec::new();
    for key in [XSS_KEY, "plain-key"] {
        let made = api(
            reqwest::Method::POST,
            format!("{url}/v1/sessions"),
            AGENT,
            Some(json!({"backend": "scratchpad", "key": key})),
        )
        .await;
        assert_eq!(made["code"], 0, "{made}");
        ids.push(made["data"]["id"].as_str().unwrap().to_string());
    }
    let (xss_id, plain_id) = (ids[0].clone(), ids[1].clone());
    assert_eq!(
        b.open(&format!("{url}/console/sessions")).await,
        "/console/sessions"
    );
    let row = |id: &str| format!("tr[data-session=\"{id}\"]");
    assert_eq!(b.text(&format!("{} td.key", row(&xss_id))).await, XSS_KEY);
    assert_eq!(
        b.text(&format!("{} td.tenant", row(&xss_id))).await,
        "agent"
    );
    assert_eq!(
        b.text(&format!("{} td.state", row(&plain_id))).await,
        "ready"
    );
    let pwned = b
        .client
        .execute("return window.__pwned === undefined;", vec![])
        .await
        .unwrap();
    assert_eq!(pwned, json!(true), "the session key ran as script");
    b.shot("sessions").await;

    // End a session from the page (after the confirmation the script asks for).
    b.press(&format!("{} form button", row(&plain_id)), true)
        .await;
    b.wait_for_path("/console/sessions").await;
    b.wait_gone(&row(&plain_id)).await;
    assert_eq!(
        session_code(&host, &plain_id).await,
        4007,
        "the session ended"
    );

    // A stolen cookie without the CSRF token, or with a wrong one, ends nothing.
    let end_xss = format!("id={xss_id}");
    let (status, _) = forged(&host, "/console/sessions/end", &admin_cookie, &end_xss).await;
    assert_eq!(status, 403);
    let wrong = format!("{end_xss}&csrf={}", "0".repeat(64));
    let (status, body) = forged(&host, "/console/sessions/end", &admin_cookie, &wrong).await;
    assert_eq!(status, 403);
    assert!(body.contains("CSRF"), "{body}");
    assert_eq!(session_code(&host, &xss_id).await, 0);

    // A cross-site form post (another site's page submitting to the console) is refused
    // before any route runs.
    let attacker = attacker_site(format!(
        "<form id=\"f\" method=\"post\" action=\"{url}/console/sessions/end\">\
         <input name=\"id\" value=\"{xss_id}\"><input name=\"csrf\" value=\"guess\"></form>\
         <script>document.getElementById('f').submit();</script>"
    ));
    b.open(&format!("http://localhost:{attacker}/")).await;
    b.wait_for_path("/console/sessions/end").await;
    let answer = b.client.source().await.unwrap();
    assert!(answer.contains("4030"), "{answer}");
    b.shot("cross-site-refused").await;
    assert_eq!(session_code(&host, &xss_id).await, 0, "the session lives");

    // Logout ends the console session: its cookie opens nothing any more.
    b.open(&format!("{url}/console")).await;
    b.press("#logout", false).await;
    b.wait_for_path("/console/login").await;
    let after = http()
        .get(format!("{url}/console/sessions"))
        .header("cookie", format!("wharf_console={admin_cookie}"))
        .send()
        .await
        .unwrap();
    assert_eq!(after.status(), 303);
    assert_eq!(after.headers()["location"], "/console/login");

    // A read token sees, without a button; its forged posts are refused all the same.
    upload(&host, "echo", "probe").await;
    let viewer_cookie = sign_in(&b, &url, VIEWER).await;
    assert!(
        b.text("section[data-backend=\"echo\"] .pending")
            .await
            .contains("wharf-sandbox:*")
    );
    assert!(
        b.all("form.action").await.is_empty(),
        "no action for a read token"
    );
    assert!(b.text("header .who").await.contains("read-only"));
    b.client
        .execute(
            "document.querySelector('section[data-backend=\"echo\"] .pending').scrollIntoView();",
            vec![],
        )
        .await
        .unwrap();
    b.shot("backends-read-only").await;
    let csrf = b
        .one("form.logout input[name=\"csrf\"]")
        .await
        .attr("value")
        .await
        .unwrap()
        .unwrap();
    // A read token sees its own tenant's sessions only: the agent's are not listed.
    b.open(&format!("{url}/console/sessions")).await;
    assert!(
        b.all(&row(&xss_id)).await.is_empty(),
        "another tenant's session"
    );
    let with_csrf = format!("{end_xss}&csrf={csrf}");
    let (status, body) = forged(&host, "/console/sessions/end", &viewer_cookie, &with_csrf).await;
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("Admins only"), "{body}");
    let approve = format!("backend=echo&csrf={csrf}");
    let (status, _) = forged(&host, "/console/backends/approve", &viewer_cookie, &approve).await;
    assert_eq!(status, 403);
    assert_eq!(session_code(&host, &xss_id).await, 0);
    assert!(!pending_of(&host, "echo").await.is_null(), "still waiting");

    // A token that may call but is no admin sees its sessions, without an End button.
    b.press("#logout", false).await;
    sign_in(&b, &url, AGENT).await;
    b.open(&format!("{url}/console/sessions")).await;
    b.one(&row(&xss_id)).await;
    assert!(
        b.all("form.action").await.is_empty(),
        "no End for a non-admin"
    );
    b.shot("sessions-not-admin").await;

    b.close().await;
}

/// A host with the console's tokens and a docker-provider backend `box`.
fn terminal_config(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("wharf.toml");
    let text = format!(
        "[server]\ndata_dir = \"{}\"\n\n\
         [[auth.tokens]]\nname = \"ops\"\nvalue = \"{ADMIN}\"\nscopes = [\"admin\"]\n\n\
         [[auth.tokens]]\nname = \"viewer\"\nvalue = \"{VIEWER}\"\nscopes = [\"read\"]\n\n\
         [backends.box]\npath = \"bundled:docker-provider\"\n\
         [backends.box.grants]\nimages = [\"wharf-sandbox:test\"]\n",
        dir.join("data").display()
    );
    std::fs::write(&path, text).unwrap();
    path
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sessions_terminal_and_files_in_a_real_browser() {
    let Some((chromium, chromedriver)) = browser::installed() else {
        return;
    };
    if !wharf_integration_tests::docker_ready() {
        return;
    }
    wharf_integration_tests::remove_backend_containers("box");
    let dir = tempfile::tempdir().unwrap();
    let host = WharfProcess::start(&terminal_config(dir.path()));
    let url = host.url.clone();
    let made = api(
        reqwest::Method::POST,
        format!("{url}/v1/sessions"),
        ADMIN,
        Some(json!({"backend": "box"})),
    )
    .await;
    assert_eq!(made["code"], 0, "{made}");
    let id = made["data"]["id"].as_str().unwrap().to_string();
    let b = Browser::start(&chromium, &chromedriver).await;
    let admin_cookie = sign_in(&b, &url, ADMIN).await;

    // From the sessions page to the terminal: the page mints a ticket with its CSRF token
    // and opens the WebSocket; a line typed runs in the sandbox's shell.
    b.open(&format!("{url}/console/sessions")).await;
    b.one(&format!("tr[data-session=\"{id}\"] a.terminal"))
        .await
        .click()
        .await
        .unwrap();
    b.wait_for_path("/console/sessions/terminal").await;
    b.wait_text("#terminal-status", "Connected").await;
    let field = b.one("#terminal-input").await;
    field
        .send_keys("echo console-$((6*7)) && id -u\n")
        .await
        .unwrap();
    b.wait_text("#terminal-screen", "console-42").await;
    b.shot("terminal").await;

    // The ticket route wants the console session's CSRF token, like every form.
    let (status, body) = forged(
        &host,
        "/console/sessions/terminal-ticket",
        &admin_cookie,
        &format!("id={id}"),
    )
    .await;
    assert_eq!(status, 403, "{body}");
    // A page of another site cannot open the terminal: its upgrade carries neither a
    // token nor a ticket (the console's cookie is for /console only), and its Origin is
    // not the host's.
    let ws = url.replacen("http://", "ws://", 1);
    let attacker = attacker_site(format!(
        "<p id=\"r\">waiting</p><script>var s = new WebSocket(\"{ws}/v1/sessions/{id}/terminal\");\
         s.onopen = function () {{ document.getElementById('r').textContent = 'opened'; }};\
         s.onerror = function () {{ document.getElementById('r').textContent = 'refused'; }};</script>"
    ));
    b.open(&format!("http://localhost:{attacker}/")).await;
    b.wait_text("#r", "refused").await;

    // Files: browsed from the sessions page, a directory at a time, each file downloadable;
    // a name the sandbox chose stays text.
    let xss_name = "<img src=x onerror=window.__pwned=3>.txt";
    for (path, content) in [
        ("/work/notes.txt", "hello files"),
        (&*format!("/work/{xss_name}"), "x"),
    ] {
        let put = http()
            .put(format!("{url}/v1/sessions/{id}/files"))
            .query(&[("path", path)])
            .bearer_auth(ADMIN)
            .header("content-type", "application/octet-stream")
            .body(content.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(put.status(), 200, "{}", put.text().await.unwrap());
    }
    b.open(&format!("{url}/console/sessions")).await;
    b.one(&format!("tr[data-session=\"{id}\"] a.files"))
        .await
        .click()
        .await
        .unwrap();
    b.wait_for_path("/console/sessions/files").await;
    b.one("tr[data-name=\"work\"] a.dir")
        .await
        .click()
        .await
        .unwrap();
    b.wait_text("#files-path", "/work").await;
    assert_eq!(b.text("tr[data-name=\"notes.txt\"] td.size").await, "11");
    assert_eq!(
        b.text(&format!("tr[data-name=\"{xss_name}\"] td.name"))
            .await,
        xss_name
    );
    let pwned = b
        .client
        .execute("return window.__pwned === undefined;", vec![])
        .await
        .unwrap();
    assert_eq!(pwned, json!(true), "a sandbox's file name ran as markup");
    b.shot("files").await;
    let href = b
        .one("tr[data-name=\"notes.txt\"] a.download")
        .await
        .attr("href")
        .await
        .unwrap()
        .unwrap();
    let got = http()
        .get(format!("{url}{href}"))
        .header("cookie", format!("wharf_console={admin_cookie}"))
        .send()
        .await
        .unwrap();
    assert_eq!(got.status(), 200);
    assert_eq!(
        got.headers()["content-disposition"],
        "attachment; filename=\"notes.txt\""
    );
    assert_eq!(got.text().await.unwrap(), "hello files");
    // A relative path, a file as a directory, and an unknown session are refused.
    for (query, status) in [
        (format!("id={id}&path=work"), 400),
        (format!("id={id}&path=%2Fwork%2Fnotes.txt"), 400),
        ("id=no-such-session&path=%2F".to_string(), 404),
    ] {
        let reply = http()
            .get(format!("{url}/console/sessions/files?{query}"))
            .header("cookie", format!("wharf_console={admin_cookie}"))
            .send()
            .await
            .unwrap();
        assert_eq!(reply.status(), status, "{query}");
    }

    // Processes: the terminal's shell, started through the sandbox agent, is listed.
    b.open(&format!("{url}/console/sessions")).await;
    b.one(&format!("tr[data-session=\"{id}\"] a.processes"))
        .await
        .click()
        .await
        .unwrap();
    b.wait_for_path("/console/sessions/processes").await;
    let shells = b
        .client
        .execute(
            "return Array.from(document.querySelectorAll('table.processes tbody tr')).filter(r => r.querySelector('td.terminal').textContent === 'yes').length;",
            vec![],
        )
        .await
        .unwrap();
    assert!(
        shells.as_u64().unwrap() >= 1,
        "the terminal's shell is listed"
    );
    b.shot("processes").await;

    // A read token gets no terminal and no files.
    b.open(&format!("{url}/console")).await;
    b.press("#logout", false).await;
    sign_in(&b, &url, VIEWER).await;
    b.open(&format!("{url}/console/sessions/terminal?id={id}"))
        .await;
    assert!(b.client.source().await.unwrap().contains("Admins only"));
    b.open(&format!("{url}/console/sessions")).await;
    assert!(
        b.all("a.files").await.is_empty(),
        "a read token's Files link"
    );
    b.open(&format!("{url}/console/sessions/files?id={id}"))
        .await;
    assert!(
        b.client
            .source()
            .await
            .unwrap()
            .contains("lacks the `call` scope")
    );
    b.close().await;
    wharf_integration_tests::remove_backend_containers("box");
}

#[tokio::test(flavor = "multi_thread")]
async fn live_calls_in_a_real_browser() {
    let Some((chromium, chromedriver)) = browser::installed() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let host = WharfProcess::start(&config(dir.path()));
    let url = host.url.clone();
    let b = Browser::start(&chromium, &chromedriver).await;
    sign_in(&b, &url, ADMIN).await;
    b.open(&format!("{url}/console/calls")).await;
    b.wait_text("#calls-status", "Live").await;

    // A call made through the API appears as it ends; a refused one links its code.
    let said = api(
        reqwest::Method::POST,
        format!("{url}/v1/call"),
        AGENT,
        Some(json!({"tool": "echo:say", "args": {"text": "<b>secret-arg</b>"}})),
    )
    .await;
    assert_eq!(said["code"], 0, "{said}");
    b.wait_text("#calls tbody tr td.tool", "echo:say").await;
    assert_eq!(b.text("#calls tbody tr td.tenant").await, "agent");
    let unknown = api(
        reqwest::Method::POST,
        format!("{url}/v1/call"),
        AGENT,
        Some(json!({"tool": "echo:nope", "args": {}})),
    )
    .await;
    let code = unknown["code"].as_u64().expect("a code");
    assert_ne!(code, 0);
    b.wait_text("#calls tbody tr.failed td.code", &code.to_string())
        .await;
    let page = b.client.source().await.unwrap();
    assert!(!page.contains("secret-arg"), "arguments are never shown");
    b.shot("live-calls").await;

    // The filter hides what does not match (an unresolved tool is `-`, as in the audit
    // line: a name no backend has is the caller's text); the code links to the code table.
    b.one("#calls-filter")
        .await
        .send_keys(&code.to_string())
        .await
        .unwrap();
    let shown = b
        .client
        .execute(
            "return Array.from(document.querySelectorAll('#calls tbody tr')).filter(r => !r.hidden).map(r => r.querySelector('td.tool').textContent);",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(shown, json!(["-"]));
    b.one("#calls tbody tr.failed td.code a")
        .await
        .click()
        .await
        .unwrap();
    b.wait_for_path("/console/codes").await;
    b.one(&format!("tr#code-{code}")).await;

    // Health: the calls above, per backend, as charts of the last 15 minutes. "Now" is the
    // running 20-s interval: calls that end just before an interval's end are in the
    // previous point, and the new one reads 0 until the next call; so calls are made again
    // (twice at most) when the page opened across a boundary.
    let echo = "table.health tr[data-backend=\"echo\"]";
    let mut rate = String::new();
    for _ in 0..3 {
        for _ in 0..20 {
            api(
                reqwest::Method::POST,
                format!("{url}/v1/call"),
                AGENT,
                Some(json!({"tool": "echo:say", "args": {"text": "load"}})),
            )
            .await;
        }
        b.open(&format!("{url}/console/health")).await;
        rate = b.text(&format!("{echo} td.rate .now")).await;
        if rate != "0.00 calls/s" {
            break;
        }
    }
    let per_second: f64 = rate.trim_end_matches(" calls/s").parse().unwrap();
    assert!(per_second > 0.0, "{rate}");
    assert!(
        b.text(&format!("{echo} td.p50 .now"))
            .await
            .ends_with(" ms")
    );
    assert!(
        b.text(&format!("{echo} td.p99 .now"))
            .await
            .ends_with(" ms")
    );
    assert_eq!(
        b.all(&format!("{echo} svg polyline")).await.len(),
        4,
        "a chart per figure"
    );
    b.shot("health").await;

    // A read token's page shows only its own tenant's calls: the agent's are not there.
    b.open(&format!("{url}/console")).await;
    b.press("#logout", false).await;
    sign_in(&b, &url, VIEWER).await;
    b.open(&format!("{url}/console/calls")).await;
    b.wait_text("#calls-status", "Live").await;
    api(
        reqwest::Method::POST,
        format!("{url}/v1/call"),
        AGENT,
        Some(json!({"tool": "echo:say", "args": {"text": "again"}})),
    )
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        b.all("#calls tbody tr").await.is_empty(),
        "another tenant's call"
    );
    // Without a console session the stream answers nothing.
    let stream = http()
        .get(format!("{url}/console/calls/stream"))
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 401);
    b.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn tenants_and_their_refusals_in_a_real_browser() {
    let Some((chromium, chromedriver)) = browser::installed() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let path = config(dir.path());
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str("[quotas.tokens.agent]\ncalls_per_second = 1\nburst = 1\nsessions = 5\n");
    std::fs::write(&path, text).unwrap();
    let host = WharfProcess::start(&path);
    let url = host.url.clone();
    // The agent's second call within the second is refused by its rate.
    let mut codes = Vec::new();
    for _ in 0..3 {
        let reply = api(
            reqwest::Method::POST,
            format!("{url}/v1/call"),
            AGENT,
            Some(json!({"tool": "echo:say", "args": {"text": "hi"}})),
        )
        .await;
        codes.push(reply["code"].as_u64().unwrap());
    }
    assert!(codes.contains(&4290), "{codes:?}");
    let quotas = api(
        reqwest::Method::GET,
        format!("{url}/v1/quotas"),
        AGENT,
        None,
    )
    .await;
    assert!(
        quotas["data"]["refused_last_15_minutes"]["calls_per_second"]
            .as_u64()
            .is_some_and(|n| n >= 1),
        "{quotas}"
    );

    let b = Browser::start(&chromium, &chromedriver).await;
    sign_in(&b, &url, ADMIN).await;
    b.open(&format!("{url}/console/tenants")).await;
    let agent = "tr[data-tenant=\"agent\"]";
    b.shot("tenants").await;
    let limits = b.text(&format!("{agent} td.limits")).await;
    assert!(limits.contains("calls_per_second: 1"), "{limits}");
    assert!(
        b.text(&format!("{agent} td.refused"))
            .await
            .contains("calls_per_second:")
    );
    // Every token's tenant is listed for an admin.
    b.one("tr[data-tenant=\"viewer\"]").await;
    // A read token sees its own tenant only.
    b.press("#logout", false).await;
    sign_in(&b, &url, VIEWER).await;
    b.open(&format!("{url}/console/tenants")).await;
    b.one("tr[data-tenant=\"viewer\"]").await;
    assert!(b.all(agent).await.is_empty(), "another tenant's quotas");
    b.close().await;
}
