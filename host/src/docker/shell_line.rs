//! The line a resident shell runs for one command: which requests fit a resident shell,
//! quoting, and the framing that reports the pid, the exit code and leftovers
//! (read back by [`resident_shell`](super::resident_shell)).

use super::kill::MARKER_VAR;
use super::leftovers::ADOPTED_COUNT;
use super::types::{Command, ExecRequest};

/// Starts the command: `$1` is the working directory (empty: the container's), the rest
/// the command line. `exec` keeps the pid the shell reported.
const LAUNCH: &str = r#"[ -z "$1" ] || cd "$1" || exit 126; shift; exec "$@""#;

/// Whether a request can run in a resident shell: the shell runs as the container's
/// user, gives commands no stdin, and passes variables as shell assignments.
pub(crate) fn fits(request: &ExecRequest) -> bool {
    request.stdin.is_none()
        && request.user.is_none()
        && request.env.iter().all(|(name, _)| is_shell_name(name))
}

fn is_shell_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The line the shell runs for one command.
pub(crate) fn command_line(nonce: &str, marker: &str, request: &ExecRequest) -> String {
    let argv: Vec<String> = match &request.command {
        Command::Argv(argv) => argv.clone(),
        Command::Shell(script) => vec!["/bin/sh".into(), "-c".into(), script.clone()],
    };
    let mut line = format!("{MARKER_VAR}={} ", quote(marker));
    for (name, value) in &request.env {
        line.push_str(&format!("{name}={} ", quote(value)));
    }
    line.push_str(&format!(
        "setsid /bin/sh -c {} wharf-exec {}",
        quote(LAUNCH),
        quote(request.workdir.as_deref().unwrap_or(""))
    ));
    for arg in &argv {
        line.push(' ');
        line.push_str(&quote(arg));
    }
    line.push_str(&format!(
        " </dev/null & p=$!; printf '%s:pid:%s;' {nonce} \"$p\" >&2; wait \"$p\"; r=$?; b=0; \
         kill -0 -\"$p\" 2>/dev/null && b=1; {ADOPTED_COUNT}[ \"$wharf_n\" -le 1 ] || b=1; \
         printf '%s:end:%s:%s;' {nonce} \"$r\" \"$b\"; printf '%s:end;' {nonce} >&2\n"
    ));
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_requests_use_a_resident_shell() {
        let mut r = ExecRequest::new("x", Command::Shell("true".into()), 1000, 10);
        assert!(fits(&r));
        r.env.push(("GOOD_name1".into(), "v".into()));
        assert!(fits(&r));
        r.env.push(("not-a-shell-name".into(), "v".into()));
        assert!(!fits(&r));
        r.env.clear();
        r.user = Some("1000".into());
        assert!(!fits(&r));
        r.user = None;
        r.stdin = Some(b"data".to_vec());
        assert!(!fits(&r));
    }

    #[test]
    fn arguments_are_quoted_for_the_shell() {
        assert_eq!(quote("it's"), r"'it'\''s'");
        let mut r = ExecRequest::new(
            "x",
            Command::Argv(vec!["echo".into(), "a b'c".into()]),
            1,
            1,
        );
        r.env.push(("V".into(), "$HOME".into()));
        r.workdir = Some("/tmp".into());
        let line = command_line("N", "M", &r);
        assert!(line.starts_with("WHARF_EXEC_ID='M' V='$HOME' setsid /bin/sh -c "));
        assert!(line.contains(ADOPTED_COUNT));
        assert!(line.contains(" wharf-exec '/tmp' 'echo' 'a b'\\''c' </dev/null & "));
        assert!(line.ends_with("printf '%s:end;' N >&2\n"));
    }
}
