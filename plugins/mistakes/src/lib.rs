//! `mistakes`: the mistakes a new backend author makes (a tool that reads the session
//! without declaring one, a code backends may not use, a panic), so tests can check that
//! each answer tells the author what happened. Written with the `Tools` builder. For tests.

use wharf_sdk::{Backend, BackendInfo, Call, Deserialize, JsonSchema, NoArgs, ToolError, Tools};

struct Mistakes;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CodeArgs {
    /// The code to fail with.
    code: u32,
}

#[allow(clippy::panic)]
fn explode() -> ! {
    panic!("the tracker exploded")
}

impl Backend for Mistakes {
    fn new() -> Self {
        Mistakes
    }

    fn info() -> BackendInfo {
        BackendInfo::new("mistakes", "0.1.0", "Makes an author's mistakes. For tests.")
    }

    fn tools() -> Tools<Self> {
        Tools::new()
            .tool(
                "undeclared-session",
                "Reads the session but is declared without one (the mistake).",
                |_: &mut Self, _: NoArgs, call: &mut Call| {
                    Ok(call.require_session()?.id.clone())
                },
            )
            .tool(
                "fail",
                "Fails with the code it is given.",
                |_: &mut Self, a: CodeArgs, _: &mut Call| -> Result<(), _> {
                    Err(ToolError::new(a.code, format!("failing with {}", a.code)))
                },
            )
            .tool(
                "explode",
                "Panics with a message.",
                |_: &mut Self, _: NoArgs, _: &mut Call| -> Result<(), _> { explode() },
            )
    }
}

wharf_sdk::export_backend!(Mistakes);
