//! Why a session was ended by something other than its caller (an upgrade whose
//! `discover` did not recognise it): its next use answers 4007 saying so.

use std::collections::BTreeMap;
use std::sync::Mutex;

/// Most explanations kept; past it the oldest batch is forgotten.
const KEPT: usize = 10_000;

/// Explanations by session id.
#[derive(Default)]
pub(super) struct EndedSessions {
    why: Mutex<BTreeMap<String, String>>,
}

impl EndedSessions {
    pub(super) fn note(&self, ids: &[String], why: impl Fn(&str) -> String) {
        if let Ok(mut map) = self.why.lock() {
            if map.len() + ids.len() > KEPT {
                map.clear();
            }
            for id in ids {
                map.insert(id.clone(), why(id));
            }
        }
    }

    pub(super) fn get(&self, id: &str) -> Option<String> {
        self.why.lock().ok()?.get(id).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_an_explanation_per_session_and_forgets_past_the_cap() {
        let ended = EndedSessions::default();
        ended.note(&["a".into(), "b".into()], |id| format!("{id} ended"));
        assert_eq!(ended.get("a").as_deref(), Some("a ended"));
        assert_eq!(ended.get("c"), None);
        let many: Vec<String> = (0..KEPT).map(|i| format!("s{i}")).collect();
        ended.note(&many, |_| "upgrade".into());
        assert_eq!(
            ended.get("a"),
            None,
            "the map was cleared before it grew past the cap"
        );
        assert_eq!(ended.get("s0").as_deref(), Some("upgrade"));
    }
}
