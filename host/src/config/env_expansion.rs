//! `${NAME}` in `wharf.toml` and plugins-directory sidecars: replaced by the environment
//! variable when the file is read (`$${` is a literal `${`), except `${secret:NAME}`, which
//! a backend resolves itself through the `secrets` import.

use anyhow::{Result, bail};

/// The start of a reference to a granted secret, which the config expansion leaves to the
/// backend.
const SECRET_REFERENCE: &str = "${secret:";

/// Replaces every `${NAME}` in every string of `value` (see [`expand_str`]).
pub(super) fn expand_env(
    value: &mut toml::Value,
    env: &impl Fn(&str) -> Option<String>,
) -> Result<()> {
    match value {
        toml::Value::String(s) => *s = expand_str(s, env)?,
        toml::Value::Array(items) => {
            for item in items {
                expand_env(item, env)?;
            }
        }
        toml::Value::Table(table) => {
            for (_, item) in table.iter_mut() {
                expand_env(item, env)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// Replaces every `${NAME}` in `s`; `$${` escapes a literal `${`. A `${secret:NAME}` is
/// left as it is: it names a secret granted to the backend, which the backend reads through
/// the `secrets` import when it uses the value (the MCP bridge's headers), so the value
/// never sits in the config.
fn expand_str(s: &str, env: &impl Fn(&str) -> Option<String>) -> Result<String> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        if let Some(after) = tail.strip_prefix("$${") {
            out.push_str("${");
            rest = after;
        } else if let Some(after) = tail.strip_prefix(SECRET_REFERENCE) {
            out.push_str(SECRET_REFERENCE);
            rest = after;
        } else if let Some(after) = tail.strip_prefix("${") {
            let Some(end) = after.find('}') else {
                bail!("unterminated `${{` in `{s}`");
            };
            let name = &after[..end];
            match env(name) {
                Some(v) => out.push_str(&v),
                None => {
                    bail!("environment variable `{name}` is not set (referenced as `${{{name}}}`)")
                }
            }
            rest = &after[end + 1..];
        } else {
            out.push('$');
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    Ok(out)
}
