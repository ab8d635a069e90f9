//! Tests of the CallToolResult mapping.

use super::*;
use wharf_sdk::json;

const PNG_B64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";

fn map(result: Value) -> (Result<Value, ToolError>, Call) {
    let mut call = Call::new(None);
    (call_output(result, &mut call), call)
}

#[test]
fn structured_content_wins() {
    let (out, _) = map(json!({
        "content": [{"type": "text", "text": "5"}],
        "structuredContent": {"result": 5}, "isError": false
    }));
    assert_eq!(out.unwrap(), json!({"result": 5}));
}

#[test]
fn one_text_item_is_parsed_as_json_or_kept_as_text() {
    let (out, _) = map(json!({"content": [{"type": "text", "text": "{\"a\": [1, 2]}"}]}));
    assert_eq!(out.unwrap(), json!({"a": [1, 2]}));
    let (out, _) = map(json!({"content": [{"type": "text", "text": "hello"}]}));
    assert_eq!(out.unwrap(), json!("hello"));
    let (out, _) = map(json!({"content": [{"type": "text", "text": "42"}]}));
    assert_eq!(out.unwrap(), json!(42));
}

#[test]
fn several_items_are_an_array_and_media_are_attached() {
    let image = json!({"type": "image", "data": PNG_B64, "mimeType": "image/png"});
    let (out, call) = map(json!({"content": [
        {"type": "text", "text": "a"},
        image.clone(),
        {"type": "audio", "data": "UklGRg", "mimeType": "audio/wav"},
        {"type": "image", "data": "not base64!!", "mimeType": "image/png"},
        {"type": "image", "data": PNG_B64, "mimeType": "bad\r\nmime"},
        {"type": "resource_link", "uri": "file:///x", "name": "x"}
    ]}));
    let out = out.unwrap();
    assert_eq!(out[0], json!("a"));
    assert_eq!(out[1], image);
    assert_eq!(out.as_array().unwrap().len(), 6);
    let names: Vec<_> = call
        .attachments()
        .iter()
        .map(|a| (a.name.as_str(), a.mime_type.as_str()))
        .collect();
    assert_eq!(
        names,
        vec![
            ("image-1.png", "image/png"),
            ("audio-1.wav", "audio/wav"),
            ("image-2.bin", "application/octet-stream"),
        ]
    );
    assert_eq!(&call.attachments()[0].data[1..4], b"PNG");
}

#[test]
fn one_image_alone_is_an_array_with_an_attachment() {
    let (out, call) =
        map(json!({"content": [{"type": "image", "data": PNG_B64, "mimeType": "image/png"}]}));
    assert!(out.unwrap().is_array());
    assert_eq!(call.attachments().len(), 1);
}

#[test]
fn is_error_is_5000_with_the_text_truncated() {
    let (out, call) = map(json!({"isError": true, "content": [
        {"type": "text", "text": "boom"}, {"type": "text", "text": "x".repeat(5000)},
        {"type": "image", "data": PNG_B64, "mimeType": "image/png"}
    ]}));
    let err = out.unwrap_err();
    assert_eq!(err.code, 5000);
    assert!(err.message.starts_with("boom\nxxx"));
    assert!(err.message.chars().count() <= ERROR_TEXT_CHARS + 1);
    assert!(call.attachments().is_empty());
    let (out, _) = map(json!({"isError": true, "content": []}));
    assert!(out.unwrap_err().message.contains("without a message"));
}

#[test]
fn empty_and_malformed_results() {
    assert_eq!(map(json!({"content": []})).0.unwrap(), json!([]));
    assert_eq!(map(json!({})).0.unwrap(), json!([]));
    assert_eq!(map(json!([1])).0.unwrap_err().code, 5000);
    assert_eq!(map(json!({"content": "x"})).0.unwrap_err().code, 5000);
}
