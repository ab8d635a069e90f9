//! The console's sign-in rules over plain HTTP, no browser needed: the console with no
//! token configured (read-only pages, on loopback only), the login form's nonce, the
//! `Secure` cookie behind a TLS terminator, plain HTTP refused off loopback, and the edge's
//! Host rule in front of the console.

use super::{ADMIN, http};
use wharf::config::TokenScope;
use wharf_integration_tests::{bundled, start, start_with, token};

/// The login form's nonce and its cookie, from `GET /console/login`.
async fn login_nonce(url: &str, headers: &[(&str, &str)]) -> (String, String) {
    let mut request = http().get(format!("{url}/console/login"));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let reply = request.send().await.unwrap();
    let cookie = reply.headers()["set-cookie"].to_str().unwrap().to_string();
    let page = reply.text().await.unwrap();
    let nonce = page
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap()
        .to_string();
    (nonce, cookie)
}

/// Posts the login form with `token`, the nonce `form_nonce` and the cookie `cookie_nonce`.
async fn post_login(
    url: &str,
    token: &str,
    form_nonce: &str,
    cookie_nonce: Option<&str>,
    headers: &[(&str, &str)],
) -> reqwest::Response {
    let mut request = http()
        .post(format!("{url}/console/login"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("token={token}&csrf={form_nonce}"));
    if let Some(nonce) = cookie_nonce {
        request = request.header("cookie", format!("wharf_console_login={nonce}"));
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.unwrap()
}

/// Without a browser: the console with no token configured (read-only pages, on loopback
/// only), the login form's nonce, `Secure` behind a TLS terminator, plain HTTP refused off
/// loopback, and the edge's Host rule in front of the console.
#[tokio::test]
async fn sign_in_rules_without_a_browser() {
    // No token: the pages show, read-only, without a login.
    let open = start(vec![("echo", bundled("echo"))]).await;
    let page = http()
        .get(format!("{}/console", open.url))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let text = page.text().await.unwrap();
    assert!(
        text.contains("data-backend=\"echo\"") && !text.contains("<form"),
        "{text}"
    );
    let login = http()
        .get(format!("{}/console/login", open.url))
        .send()
        .await
        .unwrap();
    assert_eq!(login.status(), 303, "nobody to sign in");
    // A page of another name that resolves to the loopback host is refused at the edge.
    let rebound = http()
        .get(format!("{}/console", open.url))
        .header("host", "attacker.example")
        .send()
        .await
        .unwrap();
    assert_eq!(rebound.status(), 403);
    // No token off loopback: no console at all.
    let exposed = start_with(vec![("echo", bundled("echo"))], |s| {
        s.listen = "0.0.0.0:0".parse().unwrap();
    })
    .await;
    let url = format!("http://127.0.0.1:{}", exposed.addr.port());
    let page = http().get(format!("{url}/console")).send().await.unwrap();
    assert_eq!(page.status(), 403);

    // Tokens on loopback: the nonce must come back in the form and the cookie.
    let host = start_with(vec![("echo", bundled("echo"))], |s| {
        s.auth.tokens = vec![token("ops", ADMIN, &[TokenScope::Admin])];
    })
    .await;
    let (nonce, cookie) = login_nonce(&host.url, &[]).await;
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"));
    assert!(
        !cookie.contains("Secure"),
        "plain HTTP on loopback: {cookie}"
    );
    let refused = post_login(&host.url, ADMIN, &nonce, None, &[]).await;
    assert_eq!(
        refused.status(),
        403,
        "no nonce cookie: another site's form"
    );
    let refused = post_login(&host.url, ADMIN, "forged", Some(&nonce), &[]).await;
    assert_eq!(refused.status(), 403);
    let wrong = post_login(&host.url, "t-wrong", &nonce, Some(&nonce), &[]).await;
    assert_eq!(wrong.status(), 401);
    let signed = post_login(&host.url, ADMIN, &nonce, Some(&nonce), &[]).await;
    assert_eq!(signed.status(), 303);
    let cookie = signed.headers()["set-cookie"].to_str().unwrap();
    assert!(
        cookie.starts_with("wharf_console=") && !cookie.contains(ADMIN),
        "{cookie}"
    );
    assert!(!cookie.contains("Secure"));
    // Behind a TLS terminator the cookie is Secure.
    let tls = [("x-forwarded-proto", "https")];
    let (nonce, cookie) = login_nonce(&host.url, &tls).await;
    assert!(cookie.contains("; Secure"), "{cookie}");
    let signed = post_login(&host.url, ADMIN, &nonce, Some(&nonce), &tls).await;
    assert_eq!(signed.status(), 303);
    assert!(
        signed.headers()["set-cookie"]
            .to_str()
            .unwrap()
            .contains("; Secure")
    );

    // Off loopback: only through a TLS terminator, and the cookie is always Secure.
    let public = start_with(vec![("echo", bundled("echo"))], |s| {
        s.listen = "0.0.0.0:0".parse().unwrap();
        s.auth.tokens = vec![token("ops", ADMIN, &[TokenScope::Admin])];
    })
    .await;
    let url = format!("http://127.0.0.1:{}", public.addr.port());
    let (nonce, cookie) = login_nonce(&url, &[]).await;
    assert!(cookie.contains("; Secure"), "{cookie}");
    let plain = post_login(&url, ADMIN, &nonce, Some(&nonce), &[]).await;
    assert_eq!(plain.status(), 403, "plain HTTP off loopback");
    let signed = post_login(&url, ADMIN, &nonce, Some(&nonce), &tls).await;
    assert_eq!(signed.status(), 303);
    assert!(
        signed.headers()["set-cookie"]
            .to_str()
            .unwrap()
            .contains("; Secure")
    );
}
