//! Tests of the line scanner: partial lines, CRLF, noise, other ids, bounds.

use super::*;
use wharf_sdk::json;

const ID: &str = "wharf-00112233aabbccdd-7";

fn reply_line(id: &str, result: Value) -> Vec<u8> {
    let mut line = json!({"jsonrpc": "2.0", "id": id, "result": result})
        .to_string()
        .into_bytes();
    line.push(b'\n');
    line
}

fn scan_in_pieces(output: &[u8], piece: usize) -> Result<Option<Reply>, ToolError> {
    let mut scanner = LineScanner::new(ID);
    for chunk in output.chunks(piece) {
        if let Some(reply) = scanner.feed(chunk)? {
            return Ok(Some(reply));
        }
    }
    scanner.finish()
}

#[test]
fn the_reply_is_found_among_noise_in_any_chunking() {
    let mut output = Vec::new();
    output.extend_from_slice(b"INFO: server starting\n");
    output.extend_from_slice(&reply_line("wharf-00112233aabbccdd-70", json!("longer id")));
    output.extend_from_slice(&reply_line("wharf-ffff-7", json!("other instance")));
    output.extend_from_slice(
        br#"{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"wharf-00112233aabbccdd-7"}}"#,
    );
    output.extend_from_slice(
        b"\n\n   \nTraceback (most recent call last): \"wharf-00112233aabbccdd-7\" {\n",
    );
    output.extend_from_slice(b"[\"wharf-00112233aabbccdd-7\"]\n\xff\xfe not utf-8\n");
    let before_ours = output.len();
    let mut ours = reply_line(ID, json!({"content": []}));
    ours.insert(ours.len() - 1, b'\r');
    output.extend_from_slice(&ours);
    output.extend_from_slice(&reply_line(ID, json!("a second reply is never read")));
    for piece in [1, 2, 3, 7, 64, 4096, output.len()] {
        let reply = scan_in_pieces(&output, piece).unwrap();
        assert_eq!(
            reply,
            Some(Reply::Result(json!({"content": []}))),
            "pieces of {piece}"
        );
    }
    let mut scanner = LineScanner::new(ID);
    assert_eq!(scanner.feed(&output[..before_ours]).unwrap(), None);
    assert_eq!(scanner.malformed, 1);
}

#[test]
fn errors_are_replies_and_the_last_line_needs_no_newline() {
    let line = json!({"jsonrpc": "2.0", "id": ID, "error": {"code": -32602, "message": "bad"}});
    let mut scanner = LineScanner::new(ID);
    assert_eq!(scanner.feed(line.to_string().as_bytes()).unwrap(), None);
    let reply = scanner.finish().unwrap().unwrap();
    assert_eq!(reply.into_result().unwrap_err().code, 4004);
    // A numeric id that prints like ours is not ours: ids are strings.
    let mut scanner = LineScanner::new("7");
    let numeric = format!("{}\n", json!({"jsonrpc": "2.0", "id": 7, "result": 1}));
    assert_eq!(scanner.feed(numeric.as_bytes()).unwrap(), None);
    // Our id without result or error is the server's fault.
    let mut scanner = LineScanner::new(ID);
    let bad = format!("{}\n", json!({"jsonrpc": "2.0", "id": ID}));
    assert_eq!(scanner.feed(bad.as_bytes()).unwrap_err().code, 5000);
}

#[test]
fn an_oversized_line_is_skipped_without_being_kept() {
    let mut scanner = LineScanner::new(ID);
    let big = vec![b'x'; 1 << 20];
    for _ in 0..5 {
        assert_eq!(scanner.feed(&big).unwrap(), None);
        assert!(scanner.line.len() <= MAX_LINE_BYTES);
    }
    assert!(scanner.skipping && scanner.line.is_empty());
    assert_eq!(scanner.oversized, 1);
    // The rest of the long line ends, then the reply follows in the same chunk.
    let mut chunk = b"yyy\n".to_vec();
    chunk.extend_from_slice(&reply_line(ID, json!(5)));
    assert_eq!(scanner.feed(&chunk).unwrap(), Some(Reply::Result(json!(5))));

    // A whole oversized line inside one chunk, then ours.
    let mut chunk = vec![b'z'; MAX_LINE_BYTES + 1];
    chunk.push(b'\n');
    chunk.extend_from_slice(&reply_line(ID, json!(6)));
    let mut scanner = LineScanner::new(ID);
    assert_eq!(scanner.feed(&chunk).unwrap(), Some(Reply::Result(json!(6))));
    assert_eq!(scanner.oversized, 1);
}

#[test]
fn our_reply_over_the_line_bound_is_refused() {
    let mut scanner = LineScanner::new(ID);
    let start = format!("{{\"jsonrpc\":\"2.0\",\"id\":\"{ID}\",\"result\":\"");
    assert_eq!(scanner.feed(start.as_bytes()).unwrap(), None);
    let big = vec![b'x'; 1 << 20];
    let err = (0..5)
        .find_map(|_| scanner.feed(&big).err())
        .expect("an oversized reply must be refused");
    assert_eq!(err.code, 5000);
    assert!(err.message.contains("longer than 4 MiB"), "{}", err.message);
}

#[test]
fn the_scan_stops_at_its_bound() {
    let mut scanner = LineScanner::new(ID);
    let noise = b"not json, not ours\n".repeat(10_000);
    let mut fed = 0u64;
    let err = loop {
        match scanner.feed(&noise) {
            Ok(None) => fed += noise.len() as u64,
            Ok(Some(_)) => panic!("no reply expected"),
            Err(e) => break e,
        }
    };
    assert!(fed <= MAX_SCAN_BYTES);
    assert_eq!(err.code, 5000);
    assert!(err.message.contains("more than 16 MiB"), "{}", err.message);
}

#[test]
fn dropped_output_breaks_the_line_and_is_reported_at_the_end() {
    let mut scanner = LineScanner::new(ID);
    let ours = reply_line(ID, json!("late"));
    // The start of our line, then the ring drops bytes: what follows is another line's end.
    assert_eq!(scanner.feed(&ours[..20]).unwrap(), None);
    scanner.note_dropped(1000);
    assert_eq!(scanner.feed(b"tail of something\n").unwrap(), None);
    // A reply that arrives whole after the drop is still found.
    assert_eq!(
        scanner.feed(&ours).unwrap(),
        Some(Reply::Result(json!("late")))
    );
    let mut scanner = LineScanner::new(ID);
    scanner.note_dropped(5);
    let err = scanner.overrun();
    assert_eq!(err.code, 5000);
    assert!(
        err.message
            .contains("wrote faster than the bridge could read (5 bytes dropped)")
    );
    let noise = b"x\n".repeat(1 << 20);
    let err = (0..20).find_map(|_| scanner.feed(&noise).err()).unwrap();
    assert!(err.message.contains("5 bytes dropped"), "{}", err.message);
}

#[test]
fn the_tail_keeps_the_last_bytes_for_messages() {
    let mut scanner = LineScanner::new(ID);
    scanner.feed(&vec![b'a'; 5000]).unwrap();
    scanner.feed(b"\nTraceback: boom\n").unwrap();
    let tail = scanner.tail();
    assert_eq!(tail.len(), TAIL_BYTES);
    assert!(tail.ends_with("Traceback: boom\n"));
}
