//! The `wharf` binary.

use clap::Parser;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// mimalloc instead of glibc's malloc: see the workspace `Cargo.toml` and ARCHITECTURE.md,
/// "The path of one call".
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,cranelift=warn,wasmtime=warn"));
    // The human log's level never hides audit lines: they go to the audit sink once
    // `serve` starts it (wharf::audit).
    let max_level = filter.max_level_hint();
    let human = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_filter(filter)
        .with_filter(wharf::audit::human_filter(max_level));
    // The trace layer sits directly on the registry (wharf::telemetry needs that type).
    tracing_subscriber::registry()
        .with(wharf::telemetry::layer())
        .with(wharf::audit::layer())
        .with(human)
        .init();
    match wharf::cli::run(wharf::cli::Cli::parse()).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("wharf: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
