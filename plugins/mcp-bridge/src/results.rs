//! An MCP `CallToolResult` as a Wharf tool output: `isError` as a 5000, `structuredContent`
//! or the content items as the output, image and audio items as attachments too.

use base64::Engine as _;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use wharf_sdk::serde_json::{self, Value};
use wharf_sdk::{Call, ToolError};

/// How much of a tool's error text goes into the error message.
pub const ERROR_TEXT_CHARS: usize = 2048;

/// Standard base64, padded or not.
const BASE64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

fn not_a_result(why: &str) -> ToolError {
    ToolError::execution(format!("the MCP server's tools/call result {why}"))
}

/// The tool output of `result`; image and audio items are attached to `call`.
pub fn call_output(result: Value, call: &mut Call) -> Result<Value, ToolError> {
    let Value::Object(mut result) = result else {
        return Err(not_a_result("is not an object"));
    };
    let content = match result.remove("content") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items,
        Some(_) => return Err(not_a_result("has a `content` that is not an array")),
    };
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        let text: Vec<&str> = content.iter().filter_map(text_of).collect();
        let text = text.join("\n");
        let message = if text.trim().is_empty() {
            "the MCP tool reported an error without a message".to_string()
        } else {
            crate::jsonrpc::truncate(&text, ERROR_TEXT_CHARS)
        };
        return Err(ToolError::execution(message));
    }
    attach_media(&content, call);
    if let Some(structured) = result.remove("structuredContent").filter(|v| !v.is_null()) {
        return Ok(structured);
    }
    if let [only] = content.as_slice()
        && let Some(text) = text_of(only)
    {
        return Ok(serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.into())));
    }
    Ok(Value::Array(
        content
            .into_iter()
            .map(|item| match text_of(&item) {
                Some(text) => Value::String(text.to_string()),
                None => item,
            })
            .collect(),
    ))
}

/// The text of a `text` item.
fn text_of(item: &Value) -> Option<&str> {
    if item.get("type").and_then(Value::as_str) == Some("text") {
        item.get("text").and_then(Value::as_str)
    } else {
        None
    }
}

/// Attaches every `image` and `audio` item whose base64 decodes (the others are skipped).
fn attach_media(content: &[Value], call: &mut Call) {
    let (mut images, mut audio) = (0, 0);
    for item in content {
        let kind = item.get("type").and_then(Value::as_str);
        let counter = match kind {
            Some("image") => &mut images,
            Some("audio") => &mut audio,
            _ => continue,
        };
        let Some(data) = item.get("data").and_then(Value::as_str) else {
            continue;
        };
        let Ok(bytes) = BASE64.decode(data.trim()) else {
            continue;
        };
        let mime = item
            .get("mimeType")
            .and_then(Value::as_str)
            .filter(|m| is_mime(m))
            .unwrap_or("application/octet-stream");
        *counter += 1;
        let name = format!("{}-{}.{}", kind.unwrap_or("file"), counter, extension(mime));
        call.attach(name, mime, bytes);
    }
}

/// Whether `mime` looks like `type/subtype`, short and without odd characters.
fn is_mime(mime: &str) -> bool {
    let ok = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "!#$&^_.+-".contains(c))
    };
    mime.len() <= 127 && mime.split_once('/').is_some_and(|(t, s)| ok(t) && ok(s))
}

/// A file extension for `mime`.
fn extension(mime: &str) -> &'static str {
    match mime.to_ascii_lowercase().as_str() {
        "image/png" => "png",
        "image/jpeg" | "image/jpg" => "jpg",
        "image/gif" => "gif",
        "image/webp" => "webp",
        "image/svg+xml" => "svg",
        "audio/wav" | "audio/x-wav" | "audio/wave" => "wav",
        "audio/mpeg" | "audio/mp3" => "mp3",
        "audio/ogg" => "ogg",
        "audio/webm" => "webm",
        "audio/flac" => "flac",
        _ => "bin",
    }
}

#[cfg(test)]
#[path = "results_tests.rs"]
mod tests;
