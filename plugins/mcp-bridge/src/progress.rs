//! The server's progress on a tool call, passed to Wharf's caller: every `tools/call` the
//! bridge sends carries `_meta.progressToken` (the request's own id), and each
//! `notifications/progress` for that token the scanners meet while they look for the reply
//! is kept here until the transport hands it to the host's `progress` import. The host
//! checks the numbers again (finite, growing); what it refuses is dropped.

use wharf_sdk::serde_json::Value;

/// The most notes kept between two hand-overs; older ones give way (a later note says more).
pub const MAX_PENDING: usize = 16;
/// The most characters of a message passed on.
const MAX_MESSAGE_CHARS: usize = 1024;

/// One `notifications/progress` of the server's.
#[derive(Debug, Clone, PartialEq)]
pub struct ProgressNote {
    /// How far.
    pub progress: f64,
    /// Out of how much, when the server said.
    pub total: Option<f64>,
    /// The server's message, cut to 1024 characters.
    pub message: Option<String>,
}

/// `message` as a progress note for `token`, if it is one; anything else is `None`.
pub fn note_for(message: &Value, token: &Value) -> Option<ProgressNote> {
    let object = message.as_object()?;
    if object.get("method")?.as_str()? != "notifications/progress" {
        return None;
    }
    let params = object.get("params")?.as_object()?;
    if params.get("progressToken")? != token {
        return None;
    }
    let progress = params.get("progress")?.as_f64()?;
    Some(ProgressNote {
        progress,
        total: params.get("total").and_then(Value::as_f64),
        message: params
            .get("message")
            .and_then(Value::as_str)
            .map(|m| crate::jsonrpc::truncate(m, MAX_MESSAGE_CHARS)),
    })
}

/// The notes a scanner met and has not handed over yet.
#[derive(Debug, Default)]
pub struct PendingNotes(Vec<ProgressNote>);

impl PendingNotes {
    /// Keeps `note`, letting the oldest go past [`MAX_PENDING`].
    pub fn push(&mut self, note: ProgressNote) {
        if self.0.len() >= MAX_PENDING {
            self.0.remove(0);
        }
        self.0.push(note);
    }

    /// The notes so far, oldest first; none are kept.
    pub fn take(&mut self) -> Vec<ProgressNote> {
        std::mem::take(&mut self.0)
    }
}

/// Hands `notes` to the host's `progress` import. A note the host refuses (not growing,
/// not finite) is dropped.
pub fn relay(notes: Vec<ProgressNote>) {
    for note in notes {
        let _ =
            wharf_sdk::host::progress::report(note.progress, note.total, note.message.as_deref());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wharf_sdk::json;

    #[test]
    fn only_progress_for_the_token_is_a_note_and_pending_notes_are_bounded() {
        let token = json!("b-7");
        let note = |m: Value| note_for(&m, &token);
        assert_eq!(
            note(json!({"jsonrpc": "2.0", "method": "notifications/progress",
                "params": {"progressToken": "b-7", "progress": 1, "total": 3, "message": "one"}})),
            Some(ProgressNote {
                progress: 1.0,
                total: Some(3.0),
                message: Some("one".into())
            })
        );
        for other in [
            json!({"method": "notifications/progress", "params": {"progressToken": "b-8", "progress": 1}}),
            json!({"method": "notifications/progress", "params": {"progressToken": "b-7", "progress": "x"}}),
            json!({"method": "notifications/message", "params": {"progressToken": "b-7", "progress": 1}}),
            json!({"id": "b-7", "result": {}}),
            json!([1, 2]),
        ] {
            assert_eq!(note(other.clone()), None, "{other}");
        }
        let long = note(json!({"method": "notifications/progress",
            "params": {"progressToken": "b-7", "progress": 2, "message": "x".repeat(100_000)}}))
        .unwrap();
        assert!(long.message.unwrap().chars().count() <= MAX_MESSAGE_CHARS + 1);

        let mut pending = PendingNotes::default();
        for i in 0..100 {
            pending.push(ProgressNote {
                progress: f64::from(i),
                total: None,
                message: None,
            });
        }
        let kept = pending.take();
        assert_eq!(kept.len(), MAX_PENDING);
        assert_eq!(kept[0].progress, f64::from(100 - MAX_PENDING as i32));
        assert!(pending.take().is_empty());
    }
}
