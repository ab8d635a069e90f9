//! The console's Files page (`/console/sessions/files?id=&path=`): a directory of a
//! session's sandbox, browsed one level at a time, each regular file downloadable
//! (`/console/sessions/files/download`, streamed as `GET /v1/sessions/{id}/files` does).
//! For viewers whose token may call (moving files is using the backend, as on the REST
//! route) and whose allowlist names the session's backend. Every name is the sandbox's
//! text, shown escaped; a download's file name is reduced to safe characters.

use super::Console;
use super::pages::{html, layout, span};
use super::sandbox_access::{NamesSession, SandboxPage, failed};
use crate::front_door::{EntryKind, SandboxEntry, SandboxListing};
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};
use serde::Deserialize;
use std::sync::Arc;

/// `?id=&path=`.
#[derive(Deserialize)]
pub struct FilesQuery {
    #[serde(default)]
    id: String,
    #[serde(default)]
    path: Option<String>,
}

impl NamesSession for FilesQuery {
    fn session_id(&self) -> &str {
        &self.id
    }
}

/// `GET /console/sessions/files?id=&path=` (`/` by default).
pub async fn page(
    State(console): State<Arc<Console>>,
    SandboxPage { viewer, query: q }: SandboxPage<FilesQuery>,
) -> Response {
    let path = q.path.unwrap_or_else(|| "/".to_string());
    let listing = match console
        .wharf
        .list_sandbox_dir(viewer.caller.session_tenant(), &q.id, &path)
        .await
    {
        Ok(listing) => listing,
        Err(e) => return failed(&e),
    };
    let body = listing_markup(&q.id, &path, &listing, crate::clock::now_ms() / 1000);
    html(StatusCode::OK, layout("Files", Some(&viewer), body))
}

/// `path` joined with `name`.
fn child(path: &str, name: &str) -> String {
    if path.ends_with('/') {
        format!("{path}{name}")
    } else {
        format!("{path}/{name}")
    }
}

/// The directory above `path`, if any.
fn parent(path: &str) -> Option<String> {
    let trimmed = path.trim_end_matches('/');
    if trimmed.is_empty() {
        return None;
    }
    let up = &trimmed[..trimmed.rfind('/').unwrap_or(0)];
    Some(if up.is_empty() { "/".into() } else { up.into() })
}

/// A query string value, percent-encoded.
fn encoded(value: &str) -> String {
    url::form_urlencoded::byte_serialize(value.as_bytes()).collect()
}

fn listing_markup(id: &str, path: &str, listing: &SandboxListing, now_s: u64) -> Markup {
    let link = |to: &str| {
        format!(
            "/console/sessions/files?id={}&path={}",
            encoded(id),
            encoded(to)
        )
    };
    html! {
        h1 { "Files " span.count { "(" (listing.entries.len()) ")" } }
        p { "Session " code { (id) } ", directory " code #files-path { (path) } }
        @if let Some(up) = parent(path) {
            p { a #files-up href=(link(&up)) { "↑ Up to " (up) } }
        }
        @if listing.left_off > 0 {
            p.refusal { (listing.left_off) " entries not shown (over "
                (crate::front_door::MAX_ENTRIES) ", or names the listing could not read)." }
        }
        @if listing.entries.is_empty() {
            p.empty { "Empty, or nothing this sandbox's user may see." }
        } @else {
            table.files {
                thead { tr { th { "Name" } th { "Kind" } th { "Size" } th { "Changed" } } }
                tbody {
                    @for e in &listing.entries {
                        (entry_row(id, path, e, now_s, &link))
                    }
                }
            }
        }
    }
}

fn entry_row(
    id: &str,
    path: &str,
    e: &SandboxEntry,
    now_s: u64,
    link: &impl Fn(&str) -> String,
) -> Markup {
    let full = child(path, &e.name);
    let (kind, size) = match e.kind {
        EntryKind::Directory => ("directory", String::new()),
        EntryKind::File => ("file", e.size.to_string()),
        EntryKind::Link => ("link", String::new()),
        EntryKind::Other => ("other", String::new()),
    };
    let ago = now_s.saturating_sub(e.modified_s).saturating_mul(1000);
    html! {
        tr data-name=(e.name) {
            td.name {
                @match e.kind {
                    EntryKind::Directory => { a.dir href=(link(&full)) { (e.name) "/" } }
                    EntryKind::File => {
                        a.download href={ "/console/sessions/files/download?id=" (encoded(id)) "&path=" (encoded(&full)) } { (e.name) }
                    }
                    _ => { (e.name) }
                }
            }
            td.kind { (kind) }
            td.size { (size) }
            td.changed { (span(ago)) " ago" }
        }
    }
}

/// `GET /console/sessions/files/download?id=&path=`: the file as an attachment.
pub async fn download(
    State(console): State<Arc<Console>>,
    SandboxPage { viewer, query: q }: SandboxPage<FilesQuery>,
) -> Response {
    let path = q.path.unwrap_or_default();
    let streamed = async {
        let held = console
            .wharf
            .sandbox_transfer(viewer.caller.session_tenant(), &q.id)
            .await?;
        crate::api::files::stream_file(&console.wharf, held, path.clone()).await
    }
    .await;
    match streamed {
        Ok(mut response) => {
            let disposition = format!("attachment; filename=\"{}\"", safe_file_name(&path));
            if let Ok(value) = HeaderValue::from_str(&disposition) {
                response
                    .headers_mut()
                    .insert(header::CONTENT_DISPOSITION, value);
            }
            response.into_response()
        }
        Err(e) => failed(&e),
    }
}

/// The last part of `path`, with anything but letters, digits, `.`, `-` and `_` as `_`
/// (a header and a file name the browser takes as they are).
fn safe_file_name(path: &str) -> String {
    let name = path.rsplit('/').next().unwrap_or_default();
    let safe: String = name
        .chars()
        .take(128)
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect();
    match safe.trim_matches('.') {
        "" => "download".into(),
        _ => safe,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_go_up_and_down() {
        assert_eq!(child("/", "a"), "/a");
        assert_eq!(child("/work", "a b"), "/work/a b");
        assert_eq!(parent("/"), None);
        assert_eq!(parent("/work"), Some("/".into()));
        assert_eq!(parent("/work/src/"), Some("/work".into()));
        assert_eq!(encoded("/a b&c=d"), "%2Fa+b%26c%3Dd");
    }

    #[test]
    fn download_names_are_safe() {
        assert_eq!(safe_file_name("/work/notes.txt"), "notes.txt");
        assert_eq!(safe_file_name("/work/a\"b\r\n.sh"), "a_b__.sh");
        assert_eq!(safe_file_name("/work/.."), "download");
        assert_eq!(safe_file_name(""), "download");
    }

    #[test]
    fn sandbox_names_are_text() {
        let listing = SandboxListing {
            entries: vec![SandboxEntry {
                name: "<img src=x onerror=alert(1)>".into(),
                kind: EntryKind::File,
                size: 3,
                modified_s: 0,
            }],
            left_off: 0,
        };
        let m = listing_markup("s1", "/", &listing, 0).into_string();
        assert!(!m.contains("<img"), "{m}");
        assert!(m.contains("path=%2F%3Cimg"), "{m}");
    }
}
