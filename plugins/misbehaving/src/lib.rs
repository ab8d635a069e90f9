//! `misbehaving`: traps, loops forever, allocates without bound and logs what it is told,
//! so tests can prove that one bad backend never takes the host or its neighbours down (nor
//! forges its log). Never load it in production.

use wharf_sdk::{Backend, BackendInfo, Call, Deserialize, JsonSchema, NoArgs, Tools};

#[derive(Default)]
struct Misbehaving {
    calls: u64,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct BusyArgs {
    /// Spin for this many iterations, then answer.
    iterations: u64,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct LogArgs {
    /// Logged as it is, line breaks and all.
    message: String,
}

#[allow(clippy::panic)]
fn trap() -> ! {
    panic!("misbehaving: trapping on purpose")
}

impl Backend for Misbehaving {
    fn new() -> Self {
        Self::default()
    }

    fn info() -> BackendInfo {
        BackendInfo::new(
            "misbehaving",
            "0.1.0",
            "Traps, spins and leaks on request. For tests only.",
        )
    }

    fn tools() -> Tools<Self> {
        Tools::new()
            .tool(
                "trap",
                "Traps (a Rust panic becomes a Wasm trap).",
                |_: &mut Self, _: NoArgs, _: &mut Call| -> Result<(), _> { trap() },
            )
            .tool(
                "spin",
                "Loops forever.",
                |m: &mut Self, _: NoArgs, _: &mut Call| -> Result<(), _> {
                    loop {
                        m.calls = std::hint::black_box(m.calls.wrapping_add(1));
                    }
                },
            )
            .tool(
                "hog",
                "Allocates memory until it runs out.",
                |_: &mut Self, _: NoArgs, _: &mut Call| {
                    let mut blocks: Vec<Vec<u8>> = Vec::new();
                    loop {
                        blocks.push(vec![1u8; 1 << 20]);
                        if blocks.len() == usize::MAX {
                            return Ok(blocks.len());
                        }
                    }
                },
            )
            .tool(
                "busy",
                "Spins for a bounded number of iterations, then answers.",
                |m: &mut Self, a: BusyArgs, _: &mut Call| {
                    let mut x = 0u64;
                    for i in 0..a.iterations {
                        x = std::hint::black_box(x.wrapping_add(i));
                    }
                    m.calls += 1;
                    Ok(x)
                },
            )
            .tool(
                "log",
                "Logs `message` at info level, as it is.",
                |_: &mut Self, a: LogArgs, _: &mut Call| {
                    wharf_sdk::host::log::info(&a.message);
                    Ok(a.message.len())
                },
            )
            .tool(
                "count",
                "Calls served by this instance so far.",
                |m: &mut Self, _: NoArgs, _: &mut Call| {
                    m.calls += 1;
                    Ok(m.calls)
                },
            )
    }
}

wharf_sdk::export_backend!(Misbehaving);
