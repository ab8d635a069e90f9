//! README.md's "A five-minute tour" runs as written: the ```sh block under that heading is
//! read from the README at test time, and its commands run, in order, as one bash script
//! (`set -e -o pipefail`) against a real `wharf serve` on the bundled backends. The only
//! rewrites: the tour's `cargo run -p wharf -- serve &` is skipped (the test started the
//! server), `cargo run -p wharf --` becomes the built `wharf` binary, `localhost:7420` the
//! test's address, and the CLI finds that address in `WHARF_URL`. A command that fails, or
//! whose output is not what the tour promises (a `# {...}` reply under it included), fails
//! the test by name.

use serde_json::Value;
use std::path::Path;
use std::process::Command;
use wharf_integration_tests::processes::{WharfProcess, wharf_bin};

const MARK: &str = "@@readme-tour";

/// One command of the tour, and the reply the README shows under it, if any.
struct Step {
    command: String,
    shown: Option<String>,
}

/// The commands of the ```sh block under `## A five-minute tour`.
fn tour(readme: &str) -> Vec<Step> {
    let mut lines = readme
        .lines()
        .skip_while(|l| l.trim() != "## A five-minute tour")
        .skip(1);
    for line in lines.by_ref() {
        assert!(
            !line.starts_with("## "),
            "no ```sh block under the tour's heading"
        );
        if line.trim() == "```sh" {
            break;
        }
    }
    let mut steps: Vec<Step> = Vec::new();
    let mut pending = String::new();
    for line in lines.take_while(|l| l.trim() != "```") {
        let line = line.trim();
        if let Some(comment) = line.strip_prefix('#') {
            let comment = comment.trim();
            if comment.starts_with('{')
                && let Some(last) = steps.last_mut()
            {
                last.shown = Some(comment.to_string());
            }
            continue;
        }
        if let Some(head) = line.strip_suffix('\\') {
            pending.push_str(head);
            continue;
        }
        let command = std::mem::take(&mut pending) + line;
        if !command.is_empty() {
            steps.push(Step {
                command,
                shown: None,
            });
        }
    }
    assert!(
        !steps.is_empty(),
        "no commands in a ```sh block under `## A five-minute tour`"
    );
    steps
}

fn json(out: &str) -> Result<Value, String> {
    serde_json::from_str(out.trim()).map_err(|e| format!("not JSON ({e})"))
}

/// `expected`'s fields all hold in `actual` (objects may have more).
fn holds(actual: &Value, expected: &Value) -> bool {
    match (actual, expected) {
        (Value::Object(a), Value::Object(e)) => e
            .iter()
            .all(|(k, v)| a.get(k).is_some_and(|av| holds(av, v))),
        _ => actual == expected,
    }
}

fn code_is(out: &str, code: u64) -> Result<Value, String> {
    let reply = json(out)?;
    ensure(reply["code"] == code, &format!("expected code {code}"))?;
    Ok(reply)
}

fn ensure(holds: bool, otherwise: &str) -> Result<(), String> {
    if holds { Ok(()) } else { Err(otherwise.into()) }
}

fn lists_echo_say(out: &str) -> Result<(), String> {
    let named =
        |l: &str| l.split_whitespace().next().map(|w| w.trim_matches('"')) == Some("echo:say");
    ensure(out.lines().any(named), "echo:say is not listed")
}

type Check = fn(&str) -> Result<(), String>;

/// What each tour command must print: (a fragment of the command as the README writes
/// it, the check). Each fragment must name exactly one command.
const CHECKS: &[(&str, Check)] = &[
    ("/v1/tools | jq", lists_echo_say),
    (r#""echo:say","args":{"text":"hi","times":2}"#, |out| {
        let text = code_is(out, 0)?["data"]["result"]["text"].clone();
        ensure(text == "hihi", "result text is not \"hihi\"")
    }),
    (r#""tool":"search""#, |out| {
        let tool = code_is(out, 0)?["meta"]["tool"].clone();
        ensure(tool == "text-index:search", "not text-index:search")
    }),
    ("S=$(", |out| {
        ensure(!["", "null"].contains(&out.trim()), "no session id")
    }),
    ("scratchpad:write", |out| code_is(out, 0).map(drop)),
    ("scratchpad:read", |out| {
        let notes = code_is(out, 0)?["data"]["result"]["notes"].clone();
        let milk = notes
            .as_array()
            .is_some_and(|n| n.contains(&"buy milk".into()));
        ensure(milk, "no note \"buy milk\"")
    }),
    ("-X DELETE", |out| {
        let deleted = code_is(out, 0)?["data"]["deleted"].clone();
        ensure(deleted == true, "the session was not deleted")
    }),
    (r#""args":{"text":5}"#, |out| code_is(out, 4004).map(drop)),
    ("-- tools", lists_echo_say),
    ("-- call echo:say", |out| {
        let text = code_is(out, 0)?["data"]["result"]["text"].clone();
        ensure(text == "hello", "result text is not \"hello\"")
    }),
    ("-- inspect bundled:text-index", |out| {
        let tools = json(out)?["tools"].as_array().cloned().unwrap_or_default();
        let search = tools.iter().any(|t| t["action"] == "search");
        let schemas = tools.iter().all(|t| t["input_schema"].is_object());
        ensure(search && schemas, "no `search` tool with schemas")
    }),
];

/// The tour as one bash script, each command after a marker line naming its index.
fn script(steps: &[Step], wharf: &str, addr: &str) -> String {
    let wharf = format!("'{}'", wharf.replace('\'', r"'\''"));
    let mut script = String::from("set -e -o pipefail\n");
    for (i, step) in steps.iter().enumerate() {
        let command = step.command.replace("cargo run -p wharf --", &wharf);
        let command = command.replace("localhost:7420", addr);
        let original = &step.command;
        assert!(
            !command.contains("7420"),
            "`{original}`: a 7420 not rewritten"
        );
        script += &format!("printf '\\n{MARK} {i}\\n'\n{command}\n");
        // An assignment prints nothing; its value is what it did.
        if let Some((var, _)) = command.split_once("=$(")
            && var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            script += &format!("printf '%s\\n' \"${var}\"\n");
        }
    }
    script + &format!("printf '\\n{MARK} end\\n'\n")
}

/// Each command's output (the lines after its marker), and whether the script finished.
fn outputs(stdout: &str) -> (Vec<String>, bool) {
    let (mut outputs, mut finished) = (Vec::<String>::new(), false);
    for line in stdout.lines() {
        if let Some(rest) = line.strip_prefix(&format!("{MARK} ")) {
            finished = rest == "end";
            outputs.push(String::new());
        } else if let Some(out) = outputs.last_mut() {
            *out += &format!("{line}\n");
        }
    }
    if finished {
        outputs.pop();
    }
    (outputs, finished)
}

#[test]
fn the_readme_tour_runs_as_written() {
    let jq = Command::new("bash").args(["-c", "command -v jq"]).output();
    assert!(
        jq.is_ok_and(|o| o.status.success()),
        "`jq` is not installed: the README tour pipes into it (apt-get install jq; scripts/test installs it)"
    );
    let readme = Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md");
    let readme = std::fs::read_to_string(readme).expect("README.md");
    let (serve, steps): (Vec<Step>, Vec<Step>) = tour(&readme)
        .into_iter()
        .partition(|s| s.command.starts_with("cargo run -p wharf -- serve"));
    let replaced = "one `cargo run -p wharf -- serve &` (this test's server replaces it)";
    assert_eq!(serve.len(), 1, "the tour should start with {replaced}");

    let dir = tempfile::tempdir().expect("temp dir");
    let mut config = format!("[server]\ndata_dir = {:?}\n", dir.path().join("data"));
    for name in wharf::bundled::DEFAULT_BACKENDS {
        config += &format!("\n[backends.{name}]\npath = \"bundled:{name}\"\n");
    }
    std::fs::write(dir.path().join("wharf.toml"), config).expect("config");
    let server = WharfProcess::start(&dir.path().join("wharf.toml"));
    let addr = server.url.trim_start_matches("http://");
    let wharf = wharf_bin().display().to_string();
    std::fs::write(dir.path().join("tour.sh"), script(&steps, &wharf, addr)).expect("script");

    let run = Command::new("timeout")
        .args(["300", "bash", "tour.sh"])
        .current_dir(dir.path())
        .env("WHARF_URL", &server.url)
        .env_remove("WHARF_TOKEN")
        .output()
        .expect("bash runs");
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    let (outputs, finished) = outputs(&stdout);
    if !run.status.success() || !finished {
        let last = outputs.len().saturating_sub(1);
        let command = steps.get(last).map_or("(none)", |s| s.command.as_str());
        let out = outputs.last().map_or("", String::as_str);
        panic!(
            "README tour command failed ({}): `{command}`\nits output:\n{out}\nstderr:\n{stderr}",
            run.status
        );
    }

    let mut failures = Vec::new();
    for (fragment, check) in CHECKS {
        let found: Vec<usize> = (0..steps.len())
            .filter(|&i| steps[i].command.contains(fragment))
            .collect();
        let [i] = found[..] else {
            let n = found.len();
            failures.push(format!("{n} tour commands contain `{fragment}`, not one"));
            continue;
        };
        if let Err(why) = check(&outputs[i]) {
            let (command, out) = (&steps[i].command, &outputs[i]);
            failures.push(format!("`{command}`: {why}; output:\n{out}"));
        }
    }
    // The replies the README shows (`...` elides the rest) must hold of the real ones.
    for (step, out) in steps.iter().zip(&outputs) {
        let Some(shown) = &step.shown else { continue };
        let elided = shown
            .replace(",...", "")
            .replace("...,", "")
            .replace("...", "");
        let matches = match serde_json::from_str::<Value>(&elided) {
            Ok(expected) => json(out).is_ok_and(|actual| holds(&actual, &expected)),
            Err(e) => panic!("the reply shown under `{}` is not JSON ({e})", step.command),
        };
        if !matches {
            let command = &step.command;
            failures.push(format!(
                "`{command}`: not the README's `# {shown}`; output:\n{out}"
            ));
        }
    }
    let failures = failures.join("\n\n");
    assert!(
        failures.is_empty(),
        "README tour:\n{failures}\nstderr:\n{stderr}"
    );
}
