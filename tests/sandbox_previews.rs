//! Previews of a sandbox's ports (docs/operators.md, "Previews"), against a real host, real
//! Docker and servers running inside a docker-provider sandbox with no network: busybox
//! `httpd` and a WebSocket handshake answered by a shell script, reached through the
//! sandbox agent. The session's tenant token and a signed URL let a person in; another
//! tenant's token, no token, a port the session does not expose, a tampered, expired or
//! revoked signature are refused; the API refuses a request from the preview's origin.
//! In a real headless Chromium: the signed URL opens the page and its cookie the page's
//! next request; the preview's page reads nothing of the API or the console (signed in);
//! another site's page reads nothing of the preview, with the cookie or a token.

#[allow(dead_code)]
#[path = "console/browser.rs"]
mod browser;

use serde_json::{Value, json};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use wharf::config::TokenScope::{Admin, Call, Read};
use wharf_integration_tests::http_head::read_http_head;
use wharf_integration_tests::{
    GVISOR_RUNTIME, TestHost, docker_provider, docker_ready, gvisor_docker_provider, gvisor_ready,
    remove_backend_containers, start_with, token,
};

const ALICE: &str = "alice-token";
const BOB: &str = "bob-token";
/// An admin's token kept to another backend: it sees every session, opens none of `web`'s.
const OPS: &str = "ops-token";

/// The RFC 6455 example handshake: this key's accept value.
const WS_KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";
const WS_ACCEPT: &str = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=";

/// Answers one WebSocket handshake, then echoes the connection's bytes.
const WS_SCRIPT: &str = "#!/bin/sh\n\
while read -r line; do line=$(printf '%s' \"$line\" | tr -d '\\r'); [ -z \"$line\" ] && break; done\n\
printf 'HTTP/1.1 101 Switching Protocols\\r\\nUpgrade: websocket\\r\\nConnection: Upgrade\\r\\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\\r\\n\\r\\n'\n\
exec cat\n";

async fn host(backend: &str, domain: Option<&str>) -> TestHost {
    let domain = domain.map(str::to_string);
    start_with(vec![(backend, docker_provider())], move |s| {
        s.preview_listen = Some("127.0.0.1:0".parse().expect("addr"));
        s.preview_domain = domain;
        s.auth.tokens = vec![
            token("alice", ALICE, &[Call, Read]),
            token("bob", BOB, &[Call, Read]),
            wharf::config::TokenConfig {
                backends: Some(vec!["elsewhere".into()]),
                ..token("ops", OPS, &[Call, Read, Admin])
            },
        ];
    })
    .await
}

async fn api(h: &TestHost, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
    let mut request = reqwest::Client::new()
        .request(method, format!("{}{path}", h.url))
        .bearer_auth(ALICE);
    if let Some(body) = body {
        request = request.json(&body);
    }
    request
        .send()
        .await
        .expect("the API answers")
        .json()
        .await
        .expect("JSON")
}

async fn call(h: &TestHost, session: &str, tool: &str, args: Value) -> Value {
    let reply = api(
        h,
        reqwest::Method::POST,
        "/v1/call",
        Some(json!({"tool": tool, "args": args, "session_id": session})),
    )
    .await;
    assert_eq!(reply["code"], 0, "{tool}: {reply}");
    reply["data"]["result"].clone()
}

/// A session exposing 8080 (busybox httpd) and 9000 (the WebSocket script), both running.
async fn serving_session(h: &TestHost, backend: &str) -> String {
    serving_session_with(h, backend, json!({"expose_ports": [8080, 9000]})).await
}

/// The same, with the session's `config`.
async fn serving_session_with(h: &TestHost, backend: &str, config: Value) -> String {
    let created = api(
        h,
        reqwest::Method::POST,
        "/v1/sessions",
        Some(json!({"backend": backend, "config": config})),
    )
    .await;
    assert_eq!(created["code"], 0, "{created}");
    let session = created["data"]["id"].as_str().unwrap().to_string();
    call(
        h,
        &session,
        &format!("{backend}:write_file"),
        json!({"path": "/work/www/index.html", "content": "hello-preview\n"}),
    )
    .await;
    call(
        h,
        &session,
        &format!("{backend}:write_file"),
        json!({"path": "/work/ws.sh", "content": WS_SCRIPT}),
    )
    .await;
    call(
        h,
        &session,
        &format!("{backend}:start_process"),
        json!({"command": "httpd -f -p 8080 -h /work/www"}),
    )
    .await;
    call(
        h,
        &session,
        &format!("{backend}:start_process"),
        json!({"command": "chmod +x /work/ws.sh && nc -ll -p 9000 -e /work/ws.sh"}),
    )
    .await;
    session
}

/// GETs a preview URL with an optional bearer token and cookie, retrying while the
/// sandbox's server is still starting; (status, body, set-cookie).
async fn get(
    url: &str,
    bearer: Option<&str>,
    cookie: Option<&str>,
) -> (u16, String, Option<String>) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut request = reqwest::Client::new().get(url);
        if let Some(b) = bearer {
            request = request.bearer_auth(b);
        }
        if let Some(c) = cookie {
            request = request.header("cookie", c);
        }
        let response = request.send().await.expect("the preview listener answers");
        let status = response.status().as_u16();
        let cookie = response
            .headers()
            .get("set-cookie")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let body = response.text().await.unwrap_or_default();
        // 5012 while the server inside is not up yet (nothing listens).
        if status < 500 || Instant::now() > deadline {
            return (status, body, cookie);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn preview_addr(h: &TestHost) -> SocketAddr {
    h.wharf.preview_addr().expect("a preview listener")
}

async fn mint(h: &TestHost, session: &str, port: u16, ttl: u64) -> Value {
    api(
        h,
        reqwest::Method::POST,
        &format!("/v1/sessions/{session}/previews"),
        Some(json!({"port": port, "ttl_seconds": ttl})),
    )
    .await
}

/// Opens a WebSocket at `path` of the preview listener (with `bearer`, if given), retrying
/// while the sandbox's server is still starting, and checks the handshake's answer: the
/// upgraded connection.
async fn websocket_opens(h: &TestHost, path: &str, bearer: Option<&str>) -> tokio::net::TcpStream {
    let authorization = bearer
        .map(|b| format!("Authorization: Bearer {b}\r\n"))
        .unwrap_or_default();
    let deadline = Instant::now() + Duration::from_secs(10);
    let (socket, head) = loop {
        let mut socket = tokio::net::TcpStream::connect(preview_addr(h))
            .await
            .unwrap();
        socket
            .write_all(
                format!(
                    "GET {path} HTTP/1.1\r\nHost: {}\r\n{authorization}Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {WS_KEY}\r\nSec-WebSocket-Version: 13\r\n\r\n",
                    preview_addr(h)
                )
                .as_bytes(),
            )
            .await
            .unwrap();
        let head = read_http_head(&mut socket, 8192).await;
        let head = String::from_utf8_lossy(&head).to_string();
        // A 5xx while the server inside is not up yet (nothing listens), as for `get`.
        if !head.starts_with("HTTP/1.1 5") || Instant::now() > deadline {
            break (socket, head);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        head.ends_with("\r\n\r\n"),
        "the handshake's whole answer: {head}"
    );
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    assert!(head.contains(WS_ACCEPT), "{head}");
    socket
}

/// Reads `frame` off `socket` within 5 s.
async fn frame_comes(socket: &mut tokio::net::TcpStream, frame: &[u8]) {
    let mut got = vec![0u8; frame.len()];
    tokio::time::timeout(Duration::from_secs(5), socket.read_exact(&mut got))
        .await
        .expect("the frame comes")
        .unwrap();
    assert_eq!(got, frame);
}

/// A WebSocket at `path` whose server echoes: a frame sent comes back.
async fn websocket_echoes(h: &TestHost, path: &str, bearer: Option<&str>) {
    let mut socket = websocket_opens(h, path, bearer).await;
    socket.write_all(b"\x81\x04ping").await.unwrap();
    frame_comes(&mut socket, b"\x81\x04ping").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preview_serves_the_sandbox_to_its_tenant_and_signed_urls_only() {
    if !docker_ready() {
        return;
    }
    remove_backend_containers("web");
    let h = host("web", None).await;
    let session = serving_session(&h, "web").await;
    let base = format!("http://{}/{session}", preview_addr(&h));

    let (status, body, _) = get(&format!("{base}/8080/"), Some(ALICE), None).await;
    assert_eq!((status, body.as_str()), (200, "hello-preview\n"));
    // Previews trust a session record checked within the last second; a pause on this
    // node is seen at once all the same, and a resume too.
    for (action, want) in [("pause", 409), ("resume", 200)] {
        let done = api(
            &h,
            reqwest::Method::POST,
            &format!("/v1/sessions/{session}/{action}"),
            None,
        )
        .await;
        assert_eq!(done["code"], 0, "{action}: {done}");
        let (status, body, _) = get(&format!("{base}/8080/"), Some(ALICE), None).await;
        assert_eq!(status, want, "after {action}: {body}");
    }
    let (status, body, _) = get(&format!("{base}/8080/"), Some(BOB), None).await;
    assert_eq!(status, 404, "another tenant's token: {body}");
    let (status, body, _) = get(&format!("{base}/8080/"), Some(OPS), None).await;
    assert_eq!(status, 403, "a token kept to other backends: {body}");
    let (status, _, _) = get(&format!("{base}/8080/"), None, None).await;
    assert_eq!(status, 401, "no token");
    let (status, body, _) = get(&format!("{base}/8081/"), Some(ALICE), None).await;
    assert_eq!(status, 403, "a port the session does not expose: {body}");
    assert!(body.contains("not exposed"), "{body}");
    // The host's own routes are not on the preview listener.
    let addr = preview_addr(&h);
    for route in ["/v1/backends", "/v1/sessions", "/healthz", "/openapi.json"] {
        let (status, body, _) = get(&format!("http://{addr}{route}"), Some(ALICE), None).await;
        assert_eq!(status, 400, "{route}: {body}");
    }

    // A signed URL needs no token, and leaves a cookie for the page's other requests.
    let link = mint(&h, &session, 8080, 600).await;
    let url = link["data"]["url"].as_str().expect("a URL").to_string();
    assert!(url.starts_with(&format!("{base}/8080/?")), "{url}");
    let (status, body, cookie) = get(&url, None, None).await;
    assert_eq!((status, body.as_str()), (200, "hello-preview\n"));
    let cookie = cookie.expect("a cookie");
    assert!(cookie.contains("HttpOnly") && cookie.contains(&format!("Path=/{session}/8080/")));
    let pair = cookie.split(';').next().unwrap().to_string();
    let (status, body, _) = get(&format!("{base}/8080/index.html"), None, Some(&pair)).await;
    assert_eq!((status, body.as_str()), (200, "hello-preview\n"));

    let flipped = if url.ends_with('0') { '1' } else { '0' };
    let tampered = format!("{}{flipped}", &url[..url.len() - 1]);
    assert_eq!(
        get(&tampered, None, None).await.0,
        403,
        "a tampered signature"
    );
    let other_port = url.replace("/8080/", "/9000/");
    assert_eq!(
        get(&other_port, None, None).await.0,
        403,
        "another port's URL"
    );
    let other_session = url.replace(&session, "ses_00000000000000000000000000000000");
    assert_ne!(
        get(&other_session, None, None).await.0,
        200,
        "another session's URL"
    );
    assert_eq!(
        mint(&h, &session, 8081, 600).await["code"],
        4030,
        "minting for an unexposed port"
    );

    // The toolset's `preview_url` tool mints the same kind of URL for the agent.
    let minted = call(
        &h,
        &session,
        "web:preview_url",
        json!({"port": 8080, "ttl_seconds": 600}),
    )
    .await;
    let tool_url = minted["url"].as_str().expect("a URL").to_string();
    assert!(tool_url.starts_with(&format!("{base}/8080/?")), "{minted}");
    assert_eq!(minted["port"], 8080);
    let (status, body, _) = get(&tool_url, None, None).await;
    assert_eq!((status, body.as_str()), (200, "hello-preview\n"));
    // A port not exposed is 4030; arguments outside the schema are the 400x of any tool.
    for (args, codes) in [
        (json!({"port": 8081}), 4030..=4030),
        (json!({"port": 8080, "ttl_seconds": 0}), 4000..=4004),
        (json!({"port": 70000}), 4000..=4004),
        (json!({"port": 8080, "extra": 1}), 4000..=4004),
    ] {
        let refused = api(
            &h,
            reqwest::Method::POST,
            "/v1/call",
            Some(json!({"tool": "web:preview_url", "args": args, "session_id": session})),
        )
        .await;
        let code = refused["code"].as_u64().unwrap_or_default();
        assert!(codes.contains(&code), "{args}: {refused}");
    }

    let short = mint(&h, &session, 8080, 1).await;
    let short = short["data"]["url"].as_str().unwrap().to_string();
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let (status, body, _) = get(&short, None, None).await;
    assert_eq!(status, 403, "expired: {body}");
    assert!(body.contains("expired"), "{body}");

    // Revoking moves the session's epoch on: the URL and its cookie stop working.
    let revoked = api(
        &h,
        reqwest::Method::DELETE,
        &format!("/v1/sessions/{session}/previews"),
        None,
    )
    .await;
    assert_eq!(revoked["data"]["epoch"], 1, "{revoked}");
    assert_eq!(get(&url, None, None).await.0, 403, "a revoked URL");
    assert_eq!(
        get(&format!("{base}/8080/"), None, Some(&pair)).await.0,
        403
    );

    // A WebSocket through a fresh signed URL: the handshake, then bytes both ways.
    let ws = mint(&h, &session, 9000, 600).await;
    let ws = ws["data"]["url"].as_str().unwrap().to_string();
    let path_and_query = ws.splitn(4, '/').nth(3).unwrap().to_string();
    websocket_echoes(&h, &format!("/{path_and_query}"), None).await;

    // A page served from the preview cannot call the API with the tenant's token.
    let preview_origin = format!("http://{}", preview_addr(&h));
    let from_preview = reqwest::Client::new()
        .get(format!("{}/v1/sessions", h.url))
        .bearer_auth(ALICE)
        .header("origin", &preview_origin)
        .send()
        .await
        .unwrap();
    assert_eq!(
        from_preview.status().as_u16(),
        403,
        "the API refuses the preview's origin"
    );
    remove_backend_containers("web");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_preview_domain_each_preview_is_an_origin_of_its_own() {
    if !docker_ready() {
        return;
    }
    remove_backend_containers("webdomain");
    let h = host("webdomain", Some("preview.test")).await;
    let session = serving_session(&h, "webdomain").await;
    let link = mint(&h, &session, 8080, 600).await;
    let url = link["data"]["url"].as_str().expect("a URL").to_string();
    let label = format!("8080-{}", session.replace('_', "-"));
    let addr = preview_addr(&h);
    assert!(
        url.starts_with(&format!("http://{label}.preview.test:{}/?", addr.port())),
        "{url}"
    );
    let client = reqwest::Client::builder()
        .resolve(&format!("{label}.preview.test"), addr)
        .resolve(
            &format!("9000-{}.preview.test", session.replace('_', "-")),
            addr,
        )
        .build()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let body = loop {
        let response = client.get(&url).send().await.unwrap();
        if response.status() == 200 || Instant::now() > deadline {
            break response.text().await.unwrap();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(body, "hello-preview\n");
    // The same signature on another port's host is refused.
    let moved = url.replace(&label, &format!("9000-{}", session.replace('_', "-")));
    assert_eq!(client.get(&moved).send().await.unwrap().status(), 403);
    // A host that names no preview is not one.
    let plain = reqwest::Client::new()
        .get(format!("http://{addr}/"))
        .send()
        .await
        .unwrap();
    assert_eq!(plain.status().as_u16(), 400);
    remove_backend_containers("webdomain");
}

/// What a script of the page the browser shows gets from `fetch(url)` with the browser's
/// cookies (and `bearer` as a token, when given): `read:STATUS:BODY` or `blocked:ERROR`.
async fn fetch_from_page(b: &browser::Browser, url: &str, bearer: Option<&str>) -> String {
    let script = "const [url, bearer, done] = arguments;
        const init = {credentials: 'include'};
        if (bearer) { init.headers = {'Authorization': 'Bearer ' + bearer}; }
        fetch(url, init)
          .then(r => r.text().then(t => done('read:' + r.status + ':' + t.slice(0, 300))))
          .catch(e => done('blocked:' + e.name));";
    let got = b
        .client
        .execute_async(script, vec![json!(url), json!(bearer)])
        .await
        .expect("the script ran");
    got.as_str().unwrap_or_default().to_string()
}

/// The text of the page the browser shows, once it has some.
async fn page_text(b: &browser::Browser) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = b
            .client
            .execute(
                "return document.body ? document.body.innerText : ''",
                vec![],
            )
            .await
            .expect("the script ran");
        let text = text.as_str().unwrap_or_default().to_string();
        if !text.is_empty() || Instant::now() > deadline {
            return text;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_real_browser_a_preview_reads_nothing_of_the_api_and_no_other_site_reads_it() {
    if !docker_ready() {
        return;
    }
    let Some((chromium, chromedriver)) = browser::installed() else {
        return;
    };
    remove_backend_containers("webpage");
    let h = host("webpage", None).await;
    let session = serving_session(&h, "webpage").await;
    let base = format!("http://{}/{session}", preview_addr(&h));
    // The server inside is up before the browser looks.
    let (status, _, _) = get(&format!("{base}/8080/"), Some(ALICE), None).await;
    assert_eq!(status, 200);
    let link = mint(&h, &session, 8080, 600).await;
    let url = link["data"]["url"].as_str().expect("a URL").to_string();
    let b = browser::Browser::start(&chromium, &chromedriver).await;

    // The person is signed in to the console, on the API's origin.
    assert_eq!(
        b.open(&format!("{}/console", h.url)).await,
        "/console/login"
    );
    b.submit("#token", ALICE, "#sign-in").await;
    b.wait_for_path("/console").await;
    // The control: a script on the API's own origin reads the console and the API, so
    // the refusals below are the origins', not a broken script's.
    let own = fetch_from_page(&b, &format!("{}/console/sessions", h.url), None).await;
    assert!(own.starts_with("read:200:"), "{own}");
    let own = fetch_from_page(&b, &format!("{}/v1/sessions", h.url), Some(ALICE)).await;
    assert!(own.starts_with("read:200:"), "{own}");

    // The signed URL opens the sandbox's page, and its cookie the page's next request.
    b.open(&url).await;
    assert_eq!(page_text(&b).await.trim(), "hello-preview");
    b.open(&format!("{base}/8080/index.html")).await;
    assert_eq!(page_text(&b).await.trim(), "hello-preview");
    let same_preview = fetch_from_page(&b, &format!("{base}/8080/index.html"), None).await;
    assert!(
        same_preview.starts_with("read:200:hello-preview"),
        "{same_preview}"
    );
    // The sandbox's page is another origin than the API: with the browser's console
    // cookie, and even holding the token, it reads neither the console nor the API.
    for (target, bearer) in [
        (format!("{}/console/sessions", h.url), None),
        (format!("{}/console", h.url), None),
        (format!("{}/v1/sessions", h.url), None),
        (format!("{}/v1/sessions", h.url), Some(ALICE)),
    ] {
        let got = fetch_from_page(&b, &target, bearer).await;
        assert!(
            got.starts_with("blocked:"),
            "the preview's page read {target}: {got}"
        );
    }

    // Another site's page (`localhost`, not `127.0.0.1`) reads nothing of the preview:
    // not with the preview's cookie, not with the tenant's token.
    let attacker = browser::attacker_site("<html><body>elsewhere</body></html>".into());
    b.open(&format!("http://localhost:{attacker}/")).await;
    for bearer in [None, Some(ALICE)] {
        let got = fetch_from_page(&b, &format!("{base}/8080/index.html"), bearer).await;
        assert!(
            got.starts_with("blocked:"),
            "another site read the preview: {got}"
        );
    }
    b.close().await;
    remove_backend_containers("webpage");
}

/// Under gVisor the runtime's host sockets drop a descriptor sent over them: the agent
/// relays the port instead of handing its connection over, and the preview works the same.
/// The WebSocket's server pushes a frame rather than echoing one: under this runsc a
/// blocking read in the sandbox that finds no data yet fails with EAGAIN (see
/// `sandbox_egress`), so `cat` reading a frame not yet arrived would end the echo.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gvisor_sandbox_is_previewed_through_its_agents_relay() {
    if !docker_ready() || !gvisor_ready() {
        return;
    }
    remove_backend_containers("web-gvisor");
    let provider = gvisor_docker_provider();
    let h = start_with(vec![("web-gvisor", provider)], |s| {
        s.preview_listen = Some("127.0.0.1:0".parse().expect("addr"));
        s.runtimes.insert("gvisor".into(), GVISOR_RUNTIME.into());
        s.auth.tokens = vec![token("alice", ALICE, &[Call, Read])];
    })
    .await;
    let session = serving_session_with(
        &h,
        "web-gvisor",
        json!({"isolation": "gvisor", "expose_ports": [8080, 9000, 9001]}),
    )
    .await;
    let kernel = call(
        &h,
        &session,
        "web-gvisor:run_command",
        json!({"command": "dmesg 2>/dev/null | head -1"}),
    )
    .await;
    assert!(
        kernel.to_string().contains("gVisor"),
        "the sandbox runs under gVisor: {kernel}"
    );
    let pushing = WS_SCRIPT.replace("exec cat", "printf '\\201\\004pong'; sleep 5");
    call(
        &h,
        &session,
        "web-gvisor:write_file",
        json!({"path": "/work/ws-push.sh", "content": pushing}),
    )
    .await;
    call(
        &h,
        &session,
        "web-gvisor:start_process",
        json!({"command": "chmod +x /work/ws-push.sh && nc -ll -p 9001 -e /work/ws-push.sh"}),
    )
    .await;
    let base = format!("http://{}/{session}", preview_addr(&h));
    let (status, body, _) = get(&format!("{base}/8080/"), Some(ALICE), None).await;
    assert_eq!((status, body.as_str()), (200, "hello-preview\n"));
    let mut socket = websocket_opens(&h, &format!("/{session}/9001/"), Some(ALICE)).await;
    frame_comes(&mut socket, b"\x81\x04pong").await;
    remove_backend_containers("web-gvisor");
}
