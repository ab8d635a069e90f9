//! `echo`: stateless tools with typed, validated arguments.

use wharf_sdk::{
    Backend, BackendInfo, Call, Deserialize, JsonSchema, NoArgs, Serialize, ToolError, Tools,
};

struct Echo;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SayArgs {
    /// The text to echo back.
    text: String,
    /// How many times to repeat it (1–100).
    #[serde(default = "one")]
    #[schemars(range(min = 1, max = 100))]
    times: u32,
}

fn one() -> u32 {
    1
}

#[derive(Serialize, JsonSchema)]
struct SayResult {
    text: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct AddArgs {
    a: f64,
    b: f64,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct FailArgs {
    /// The code to fail with.
    code: u32,
    message: String,
}

impl Backend for Echo {
    fn new() -> Self {
        Echo
    }

    fn info() -> BackendInfo {
        BackendInfo::new(
            "echo",
            "0.1.0",
            "Echoes text and does arithmetic; stateless.",
        )
    }

    fn tools() -> Tools<Self> {
        Tools::new()
            .tool(
                "say",
                "Echo `text`, repeated `times` times.",
                |_: &mut Self, a: SayArgs, _: &mut Call| {
                    Ok(SayResult {
                        text: a.text.repeat(a.times as usize),
                    })
                },
            )
            .read_only()
            .tool(
                "add",
                "Add two numbers.",
                |_: &mut Self, a: AddArgs, _: &mut Call| Ok(a.a + a.b),
            )
            .read_only()
            .tool(
                "ping",
                "Answers `pong`.",
                |_: &mut Self, _: NoArgs, _: &mut Call| Ok("pong"),
            )
            .read_only()
            .tool(
                "fail",
                "Fails with the given code (to test error mapping).",
                |_: &mut Self, a: FailArgs, _: &mut Call| {
                    Err::<(), _>(ToolError::new(a.code, a.message))
                },
            )
            .tool(
                "pixel",
                "Returns a 1x1 PNG as an attachment.",
                |_: &mut Self, _: NoArgs, call: &mut Call| {
                    call.attach("pixel.png", "image/png", PIXEL_PNG.to_vec());
                    Ok("one pixel")
                },
            )
            .read_only()
    }
}

/// A valid 1x1 transparent PNG.
const PIXEL_PNG: &[u8] = &[
    0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1F, 0x15, 0xC4,
    0x89, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9C, 0x63, 0x00, 0x01, 0x00, 0x00,
    0x05, 0x00, 0x01, 0x0D, 0x0A, 0x2D, 0xB4, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4E, 0x44, 0xAE,
    0x42, 0x60, 0x82,
];

wharf_sdk::export_backend!(Echo);
