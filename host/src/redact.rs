//! What secrets look like, and copies of values with them taken out: config shown by
//! `/v1/backends` (secret-looking keys hide their whole value, nested or not, and URLs
//! lose their credentials) and tool arguments in the audit line (content and commands
//! are replaced by their length and sha256); text from outside kept on one log line.

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

/// Words that make a key name a secret wherever they appear in it.
const SECRET_PARTS: &[&str] = &[
    "secret",
    "token",
    "password",
    "passwd",
    "passphrase",
    "credential",
];

/// Whole words (between `_`, `-`, `.` or at the ends) that make a key name a secret.
const SECRET_WORDS: &[&str] = &[
    "pass",
    "pwd",
    "key",
    "apikey",
    "privatekey",
    "accesskey",
    "signingkey",
    "auth",
    "authorization",
    "cookie",
    "bearer",
    "jwt",
];

/// Argument keys whose values are content (files, commands, payloads): the audit line
/// carries their length and sha256, never the value.
const CONTENT_KEYS: &[&str] = &[
    "content", "contents", "command", "cmd", "data", "script", "body", "stdin", "payload",
];

/// Longest string argument the audit line carries as it is; longer ones become
/// `{len, sha256}`.
pub const AUDIT_STRING_MAX: usize = 128;

/// Whether a config key names a secret: a secret part anywhere in it, or a secret word
/// among its words, split at `_`, `-`, `.` and the like and where a lower-case letter or
/// digit meets an upper-case one (`masterKey`, `authKey` and `sessionKey` are secrets).
pub fn looks_secret(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    if SECRET_PARTS.iter().any(|part| k.contains(part)) {
        return true;
    }
    let mut word = String::new();
    let mut previous_lower = false;
    for c in key.chars() {
        let boundary = !c.is_ascii_alphanumeric() || (previous_lower && c.is_ascii_uppercase());
        if boundary {
            if SECRET_WORDS.contains(&word.as_str()) {
                return true;
            }
            word.clear();
        }
        if c.is_ascii_alphanumeric() {
            word.push(c.to_ascii_lowercase());
        }
        previous_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
    }
    SECRET_WORDS.contains(&word.as_str()) || SECRET_WORDS.contains(&k.as_str())
}

/// An outbound request's path as the audit line carries it: its length and sha256, never
/// the text (a path may carry a token, e.g. `/bot<token>/send`); `/` as it is.
pub fn url_path(path: &str) -> String {
    if path.is_empty() || path == "/" {
        return "/".into();
    }
    let digest = Sha256::digest(path.as_bytes());
    format!("len {} sha256 {}", path.len(), &hex::encode(digest)[..16])
}

/// A copy of `value` where every secret-looking key's whole value (nested tables
/// included) is `***`, and every URL in a string has its credentials replaced.
pub fn redact(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let v = if looks_secret(k) {
                        Value::String("***".into())
                    } else {
                        redact(v)
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(redact).collect()),
        Value::String(s) => Value::String(url_credentials(s)),
        other => other.clone(),
    }
}

/// `scheme://user:secret@host/…` → `scheme://user:***@host/…`, `scheme://token@host` →
/// `scheme://***@host`; every URL in `text` is handled, other text is unchanged.
pub fn url_credentials(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(found) = rest.find("://") {
        let (head, tail) = rest.split_at(found + 3);
        out.push_str(head);
        let authority_end = tail
            .find(|c: char| matches!(c, '/' | '?' | '#') || c.is_whitespace())
            .unwrap_or(tail.len());
        let authority = &tail[..authority_end];
        match authority.rfind('@') {
            Some(at) => {
                let userinfo = &authority[..at];
                match userinfo.split_once(':') {
                    Some((user, _)) => {
                        out.push_str(user);
                        out.push_str(":***");
                    }
                    None => out.push_str("***"),
                }
                out.push_str(&authority[at..]);
            }
            None => out.push_str(authority),
        }
        rest = &tail[authority_end..];
    }
    out.push_str(rest);
    out
}

/// What the audit line shows of a value it must not carry: its length in bytes and its
/// sha256 (enough to match it against a file or a command one already has).
pub fn digest(bytes: &[u8]) -> Value {
    json!({ "len": bytes.len(), "sha256": hex::encode(Sha256::digest(bytes)) })
}

/// Tool arguments as the audit line carries them: [`redact`]ed, then every value under a
/// content key ([`CONTENT_KEYS`]) and every string longer than [`AUDIT_STRING_MAX`]
/// replaced by its [`digest`]. Paths, names and small numbers stay readable.
pub fn for_audit(args: &Value) -> Value {
    // One walk that redacts and digests as it copies (the same as digesting a [`redact`]ed
    // copy, without the second copy): this runs on every call's audit line.
    match args {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let content = CONTENT_KEYS.iter().any(|c| c.eq_ignore_ascii_case(k));
                    let secret = looks_secret(k);
                    let v = match v {
                        _ if secret && content => digest(b"***"),
                        _ if secret => Value::String("***".into()),
                        Value::String(s) if content => digest(url_credentials(s).as_bytes()),
                        Value::Null | Value::Bool(_) | Value::Number(_) => v.clone(),
                        _ if content => digest(redact(v).to_string().as_bytes()),
                        _ => for_audit(v),
                    };
                    (k.clone(), v)
                })
                .collect::<Map<_, _>>(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(for_audit).collect()),
        Value::String(s) => {
            let s = url_credentials(s);
            if s.len() > AUDIT_STRING_MAX {
                digest(s.as_bytes())
            } else {
                Value::String(s)
            }
        }
        other => other.clone(),
    }
}

/// `text` on one line: control characters (`\n`, `\r`, ESC, …), Unicode line and
/// paragraph separators and bidi overrides written as escapes, so text from a guest or a
/// request cannot pass for another line of the host's log.
pub fn one_line(text: &str) -> String {
    // The usual case (JSON of plain arguments) is printable ASCII: nothing to look at.
    if text.bytes().all(|b| (0x20..0x7f).contains(&b)) {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        let hidden = c.is_control()
            || matches!(c, '\u{2028}' | '\u{2029}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}');
        if hidden {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_secret_looking_keys_only() {
        let v = json!({"api_key": "a", "token": "b", "db": {"password": "c"}, "documents": [{"id": "x"}], "keyboard": "k", "monkey": 1});
        let r = redact(&v);
        assert_eq!(r["api_key"], "***");
        assert_eq!(r["token"], "***");
        assert_eq!(r["db"]["password"], "***");
        assert_eq!(r["documents"][0]["id"], "x");
        assert_eq!(r["keyboard"], "k");
        assert_eq!(r["monkey"], 1);
    }

    #[test]
    fn secret_keys_hide_whole_subtrees_and_urls_lose_credentials() {
        let v = json!({
            "credentials": {"user": "u", "nested": {"x": "hidden-1"}},
            "upstream": {"pass": "hidden-2", "dbPassword": "hidden-3", "apiKey": ["hidden-4"]},
            "endpoints": ["https://bob:hidden-5@example.com/x?q=1", "https://hidden-6@example.com"],
            "note": "see postgres://svc:hidden-7@db:5432/wharf and https://example.com/a@b",
        });
        let text = redact(&v).to_string();
        for n in 1..=7 {
            assert!(
                !text.contains(&format!("hidden-{n}")),
                "hidden-{n} in {text}"
            );
        }
        assert!(text.contains("https://bob:***@example.com/x?q=1"), "{text}");
        assert!(text.contains("https://***@example.com"), "{text}");
        assert!(text.contains("https://example.com/a@b"), "{text}");
        assert_eq!(redact(&v)["credentials"], "***");
    }

    #[test]
    fn audit_args_carry_digests_of_content_and_commands() {
        let big = "x".repeat(AUDIT_STRING_MAX + 1);
        let args = json!({
            "path": "/work/a.txt",
            "content": "TOKEN=hunter2",
            "command": "export TOKEN=hunter2; run",
            "argv": ["sh", "-c", big],
            "times": 3,
        });
        let audited = for_audit(&args);
        let text = audited.to_string();
        assert!(!text.contains("hunter2") && !text.contains(&big), "{text}");
        assert_eq!(audited["path"], "/work/a.txt");
        assert_eq!(audited["times"], 3);
        assert_eq!(audited["content"], digest(b"TOKEN=hunter2"));
        assert_eq!(audited["command"]["len"], 25);
        assert_eq!(audited["argv"][2]["len"], AUDIT_STRING_MAX + 1);
    }

    /// What `for_audit` did before it was one walk: digest a redacted copy.
    fn digest_of_redacted(args: &Value) -> Value {
        fn walk(value: &Value) -> Value {
            match value {
                Value::Object(map) => Value::Object(
                    map.iter()
                        .map(|(k, v)| {
                            let content = CONTENT_KEYS.contains(&k.to_ascii_lowercase().as_str());
                            let v = match v {
                                Value::String(s) if content => digest(s.as_bytes()),
                                Value::Null | Value::Bool(_) | Value::Number(_) => v.clone(),
                                _ if content => digest(v.to_string().as_bytes()),
                                _ => walk(v),
                            };
                            (k.clone(), v)
                        })
                        .collect::<Map<_, _>>(),
                ),
                Value::Array(items) => Value::Array(items.iter().map(walk).collect()),
                Value::String(s) if s.len() > AUDIT_STRING_MAX => digest(s.as_bytes()),
                other => other.clone(),
            }
        }
        walk(&redact(args))
    }

    #[test]
    fn one_walk_is_the_digest_of_the_redacted_copy() {
        let long = format!("https://u:hunter2@h/{}", "y".repeat(AUDIT_STRING_MAX));
        let cases = [
            json!({}),
            json!("https://u:pw@host/x"),
            json!([long, "short", 1, null, {"token": "t"}]),
            json!({
                "Content": {"url": "https://u:pw@h", "n": [1, 2]},
                "DATA": ["https://t@h", {"password": "p"}],
                "stdin": "https://u:pw@h/in",
                "payload": 7,
                "api_key": {"nested": "x"},
                "db": {"password": "c", "script": ["a", "b"], "url": "ftp://a:b@c/d"},
                "list": [{"cmd": "rm -rf /"}, {"auth": null}, "x".repeat(AUDIT_STRING_MAX + 1)],
                "keyboard": "k",
                "times": 3.5,
            }),
        ];
        for args in cases {
            assert_eq!(for_audit(&args), digest_of_redacted(&args), "{args}");
        }
    }

    #[test]
    fn a_message_stays_on_one_line() {
        let forged = "ok\n2026-01-01T00:00:00Z INFO wharf::audit: event=\"tool_call\"\r\x1b[2K\u{2028}\u{202E}é";
        let shown = one_line(forged);
        assert!(
            !shown
                .chars()
                .any(|c| c.is_control() || c == '\u{2028}' || c == '\u{202E}'),
            "{shown}"
        );
        assert!(shown.starts_with("ok\\n2026"), "{shown}");
        assert!(shown.ends_with('é'), "{shown}");
        assert_eq!(one_line("plain {\"a\":1} ~"), "plain {\"a\":1} ~");
        assert_eq!(one_line("del\x7f"), "del\\u{7f}");
    }

    #[test]
    fn camel_case_and_token_words_are_secrets() {
        for key in [
            "masterKey",
            "encryptionKey",
            "authKey",
            "sessionKey",
            "bearer",
            "jwt",
            "APIKey",
            "x-api-key",
            "github_token",
            "Authorization",
            "myJwt",
            "accessKey",
        ] {
            assert!(looks_secret(key), "{key}");
        }
        for key in [
            "keyboard",
            "monkey",
            "session_id",
            "author",
            "path",
            "tokenizer_name",
        ] {
            assert_eq!(looks_secret(key), key.contains("token"), "{key}");
        }
    }

    #[test]
    fn an_outbound_path_is_digested() {
        let p = url_path("/bot123456:AAE-secret/sendMessage");
        assert!(!p.contains("secret"), "{p}");
        assert!(p.starts_with("len 33 sha256 "), "{p}");
        assert_eq!(url_path("/"), "/");
    }
}
