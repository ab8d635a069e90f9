//! `tracker`: an issue board per session, written the short way: `#[tools]` on an impl
//! block, the method parameters as the tool arguments, `host::kv` for a counter shared by
//! every instance, and `wharf_sdk::http` for one outbound call.

use wharf_sdk::host::kv::{self, Scope};
use wharf_sdk::{
    Backend, BackendInfo, Call, Capabilities, Deserialize, JsonSchema, Serialize, ToolError,
    Tools, http,
};

/// The backend; it keeps nothing itself (the board is session data, the counter is kv).
pub struct Tracker;

/// One issue.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Issue {
    /// Unique across every session of this backend.
    pub id: i64,
    /// What it is about.
    pub title: String,
    /// Whether it is still open.
    pub open: bool,
}

/// The session data: a session starts as `{}`, which is an empty board.
#[derive(Default, Serialize, Deserialize)]
#[serde(default)]
struct Board {
    issues: Vec<Issue>,
}

/// What `stats` answers.
#[derive(Serialize, JsonSchema)]
pub struct Stats {
    /// Issues opened so far, across sessions and instances.
    pub opened: i64,
}

/// What `upstream` answers.
#[derive(Serialize, JsonSchema)]
pub struct Upstream {
    /// The HTTP status.
    pub status: u16,
    /// The body, as text.
    pub body: String,
}

const OPENED: &str = "issues-opened";

fn board(call: &Call) -> Result<Board, ToolError> {
    call.require_session()?.data_as()
}

fn save(call: &mut Call, board: &Board) -> Result<(), ToolError> {
    call.set_session_data(wharf_sdk::serde_json::to_value(board)?);
    Ok(())
}

#[wharf_sdk::tools]
impl Tracker {
    /// Open an issue on this session's board.
    #[tool(session = "required")]
    fn open(&mut self, call: &mut Call, title: String) -> Result<Issue, ToolError> {
        if title.trim().is_empty() {
            return Err(ToolError::invalid_input("the title is empty"));
        }
        let mut board = board(call)?;
        let issue = Issue {
            id: kv::increment(Scope::Backend, OPENED, 1)?,
            title,
            open: true,
        };
        board.issues.push(issue.clone());
        save(call, &board)?;
        Ok(issue)
    }

    /// Close issue `id` on this session's board.
    #[tool(session = "required", idempotent)]
    fn close(&mut self, call: &mut Call, id: i64) -> Result<Issue, ToolError> {
        let mut board = board(call)?;
        let Some(issue) = board.issues.iter_mut().find(|i| i.id == id) else {
            return Err(ToolError::no_results(format!("no issue {id} on this board")));
        };
        issue.open = false;
        let closed = issue.clone();
        save(call, &board)?;
        Ok(closed)
    }

    /// The issues on this session's board (only the open ones with `open_only`).
    #[tool(session = "required", read_only)]
    fn list(&mut self, call: &mut Call, open_only: Option<bool>) -> Result<Vec<Issue>, ToolError> {
        let board = board(call)?;
        let open_only = open_only.unwrap_or(false);
        Ok(board
            .issues
            .into_iter()
            .filter(|i| i.open || !open_only)
            .collect())
    }

    /// How many issues were opened, across every session.
    #[tool(read_only)]
    fn stats(&mut self) -> Result<Stats, ToolError> {
        Ok(Stats {
            opened: kv::get_json(Scope::Backend, OPENED)?.unwrap_or(0),
        })
    }

    /// GET `url` and answer its status and body (the operator grants the host).
    #[tool(read_only, open_world)]
    fn upstream(&mut self, url: String) -> Result<Upstream, ToolError> {
        let response = http::get(&url)?;
        Ok(Upstream {
            status: response.status,
            body: response.text(),
        })
    }
}

impl Backend for Tracker {
    fn new() -> Self {
        Tracker
    }

    fn info() -> BackendInfo {
        BackendInfo::new("tracker", "0.1.0", "An issue board per session.").requires(
            Capabilities {
                http_hosts: vec!["*:*".into()],
                ..Default::default()
            },
        )
    }

    fn tools() -> Tools<Self> {
        Self::tool_set()
    }
}

wharf_sdk::export_backend!(Tracker);
