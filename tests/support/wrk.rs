//! wrk, the benchmarks' load generator: one run of a Lua script whose `done` hook writes a
//! line `WHARF <number> <number> …`, and the numbers of that line.

use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};

/// Runs `wrk -t1 -c<connections> -d<seconds>s -s <lua> <url>` and returns the numbers of
/// the `WHARF` line its script writes, and all wrk printed (for the callers' assertion
/// messages). Panics, with what wrk printed, when there is no such line.
pub fn run(lua: &str, url: &str, connections: u32, seconds: u32) -> (Vec<f64>, String) {
    // Runs may overlap (a flood beside a measurement), so every script has its own file.
    static SCRIPTS: AtomicU64 = AtomicU64::new(0);
    let script = std::env::temp_dir().join(format!(
        "wharf-bench-{}-{}.lua",
        std::process::id(),
        SCRIPTS.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::write(&script, lua).expect("wrk script");
    let out = Command::new("wrk")
        .args([
            "-t1",
            &format!("-c{connections}"),
            &format!("-d{seconds}s"),
            "-s",
        ])
        .arg(&script)
        .arg(url)
        .output()
        .expect("wrk runs (apt-get install wrk)");
    let _ = std::fs::remove_file(&script);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let line = text
        .lines()
        .find(|l| l.starts_with("WHARF "))
        .unwrap_or_else(|| panic!("wrk said: {text}"));
    let numbers = line
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().unwrap_or_else(|_| panic!("wrk wrote `{line}`")))
        .collect();
    (numbers, text)
}
