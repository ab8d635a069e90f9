//! `scratchpad`: per-session state. `initialize` returns the session data (an empty pad
//! with a title from the session config); the tools read it and write it back through the
//! host, so any instance can serve any session.

use wharf_sdk::{
    Backend, BackendInfo, Call, Deserialize, Discovery, JsonSchema, NoArgs, Serialize, Session,
    SessionNeed, ToolError, Tools, Value,
};

struct Scratchpad;

#[derive(Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
struct SessionConfig {
    /// A title for the pad.
    #[serde(default)]
    title: Option<String>,
    /// At most this many notes (default 100).
    #[serde(default)]
    max_notes: Option<usize>,
}

#[derive(Serialize, Deserialize, JsonSchema, Clone)]
struct Pad {
    title: String,
    owner_key: String,
    max_notes: usize,
    notes: Vec<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct WriteArgs {
    /// The note to append.
    note: String,
}

#[derive(Serialize, JsonSchema)]
struct WriteResult {
    count: usize,
}

fn pad_of(call: &Call) -> Result<Pad, ToolError> {
    call.require_session()?.data_as::<Pad>()
}

impl Backend for Scratchpad {
    fn new() -> Self {
        Scratchpad
    }

    fn info() -> BackendInfo {
        BackendInfo::new(
            "scratchpad",
            "0.1.0",
            "A notepad per session, kept by the host.",
        )
        .session_config::<SessionConfig>()
    }

    fn initialize(
        &mut self,
        _session_id: &str,
        key: &str,
        config: Value,
    ) -> Result<Value, ToolError> {
        let config: SessionConfig = if config.is_null() {
            SessionConfig::default()
        } else {
            serde_json::from_value(config)?
        };
        let pad = Pad {
            title: config.title.unwrap_or_else(|| format!("notes of {key}")),
            owner_key: key.to_string(),
            max_notes: config.max_notes.unwrap_or(100),
            notes: Vec::new(),
        };
        Ok(serde_json::to_value(pad)?)
    }

    fn discover(&mut self, session: &Session) -> Result<Discovery, ToolError> {
        // Session data that no longer parses is repaired rather than lost.
        Ok(match session.data_as::<Pad>() {
            Ok(_) => Discovery::Alive,
            Err(_) => Discovery::Gone,
        })
    }

    fn tools() -> Tools<Self> {
        Tools::new()
            .tool(
                "write",
                "Append a note to this session's pad.",
                |_: &mut Self, a: WriteArgs, call: &mut Call| {
                    let mut pad = pad_of(call)?;
                    if pad.notes.len() >= pad.max_notes {
                        return Err(ToolError::business(format!(
                            "the pad is full ({} notes)",
                            pad.max_notes
                        )));
                    }
                    pad.notes.push(a.note);
                    let count = pad.notes.len();
                    call.set_session_data(serde_json::to_value(pad)?);
                    Ok(WriteResult { count })
                },
            )
            .session(SessionNeed::Required)
            .tool(
                "read",
                "Read this session's pad.",
                |_: &mut Self, _: NoArgs, call: &mut Call| pad_of(call),
            )
            .session(SessionNeed::Required)
            .read_only()
            .tool(
                "clear",
                "Remove every note.",
                |_: &mut Self, _: NoArgs, call: &mut Call| {
                    let mut pad = pad_of(call)?;
                    let removed = pad.notes.len();
                    pad.notes.clear();
                    call.set_session_data(serde_json::to_value(pad)?);
                    Ok(removed)
                },
            )
            .session(SessionNeed::Required)
            .destructive()
    }
}

wharf_sdk::export_backend!(Scratchpad);
