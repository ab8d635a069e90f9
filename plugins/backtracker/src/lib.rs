//! `backtracker`: one tool whose input schema carries a `pattern` with a look-ahead, which a
//! backtracking regex engine matches in time exponential in the text (`aaaa…b` against
//! `^(a|aa)+(?!b)$`). The host must refuse it at load rather than run it on a worker.
//! Never load it in production.

use wharf_sdk::{Backend, BackendInfo, Call, Deserialize, JsonSchema, Tools};

struct Backtracker;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct MatchArgs {
    /// Text the schema's pattern is matched against.
    #[schemars(pattern(r"^(a|aa)+(?!b)$"))]
    text: String,
}

impl Backend for Backtracker {
    fn new() -> Self {
        Backtracker
    }

    fn info() -> BackendInfo {
        BackendInfo::new(
            "backtracker",
            "0.1.0",
            "A tool schema with a backtracking pattern. For tests only.",
        )
    }

    fn tools() -> Tools<Self> {
        Tools::new().tool(
            "match",
            "Answers the length of `text` once the schema let it through.",
            |_: &mut Self, a: MatchArgs, _: &mut Call| Ok(a.text.len()),
        )
    }
}

wharf_sdk::export_backend!(Backtracker);
