//! Turns a protocol [`Command`] and [`ProcessSetup`] into a `std::process::Command`:
//! validation (everything here comes from the socket), the user, the environment and the
//! working directory, and the errors a failed spawn is reported with.

use std::io;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command as StdCommand;

use wharf_sandbox_protocol::{AgentError, Command, ErrorKind, ProcessSetup};

use crate::refuse;
use crate::user;

/// The shell a [`Command::Shell`] runs with.
pub const SHELL: &str = "/bin/sh";
/// The longest `command` kept for a process's [`ProcessInfo`](wharf_sandbox_protocol::ProcessInfo)
/// (a listing of every process must fit in one frame).
const MAX_DISPLAY_BYTES: usize = wharf_sandbox_protocol::MAX_COMMAND_DISPLAY_BYTES;

/// A validated command, ready to spawn.
#[derive(Debug)]
pub struct Prepared {
    /// The program (`/bin/sh` for a script).
    program: String,
    /// Its arguments (after the program).
    args: Vec<String>,
    /// Extra environment, in order (later wins): the user's HOME and USER, then the
    /// request's.
    env: Vec<(String, String)>,
    cwd: Option<String>,
    ids: Option<(u32, u32)>,
    /// A script rather than an argv.
    shell: bool,
    /// The command as shown in process listings.
    pub display: String,
}

/// Checks a command and its setup and resolves the user.
pub fn prepare(command: &Command, setup: &ProcessSetup) -> Result<Prepared, AgentError> {
    let (program, args, shell, display) = match command {
        Command::Shell(script) => {
            if script.is_empty() {
                return Err(refuse(ErrorKind::Invalid, "the shell script is empty"));
            }
            no_nul("the shell script", script)?;
            (
                SHELL.to_owned(),
                vec!["-c".to_owned(), script.clone()],
                true,
                script.clone(),
            )
        }
        Command::Argv(argv) => {
            let Some((program, args)) = argv.split_first() else {
                return Err(refuse(ErrorKind::Invalid, "the argv is empty"));
            };
            if program.is_empty() {
                return Err(refuse(ErrorKind::Invalid, "the program name is empty"));
            }
            for arg in argv {
                no_nul("an argument", arg)?;
            }
            (program.clone(), args.to_vec(), false, argv.join(" "))
        }
    };
    let mut env = Vec::new();
    for (key, value) in &setup.env {
        if key.is_empty() || key.contains('=') {
            return Err(refuse(
                ErrorKind::Invalid,
                format!("invalid environment variable name `{key}`"),
            ));
        }
        no_nul("an environment variable", key)?;
        no_nul("an environment variable", value)?;
    }
    if let Some(cwd) = &setup.cwd {
        no_nul("the working directory", cwd)?;
        if !cwd.starts_with('/') {
            return Err(refuse(
                ErrorKind::Invalid,
                format!("the working directory `{cwd}` is not absolute"),
            ));
        }
        if !Path::new(cwd).is_dir() {
            return Err(refuse(ErrorKind::NotFound, format!("no directory {cwd}")));
        }
    }
    let ids = match &setup.user {
        Some(spec) => {
            let identity = user::lookup(spec)?;
            if let Some(home) = identity.home {
                env.push(("HOME".to_owned(), home));
            }
            if let Some(name) = identity.name {
                env.push(("USER".to_owned(), name.clone()));
                env.push(("LOGNAME".to_owned(), name));
            }
            Some((identity.uid, identity.gid))
        }
        None => None,
    };
    env.extend(setup.env.iter().cloned());
    Ok(Prepared {
        program,
        args,
        env,
        cwd: setup.cwd.clone(),
        ids,
        shell,
        display: shorten(display),
    })
}

impl Prepared {
    /// The command to spawn directly (stdio still to be set by the caller).
    pub fn command(&self) -> StdCommand {
        let mut command = StdCommand::new(&self.program);
        command.args(&self.args);
        self.apply_setup(&mut command);
        command
    }

    /// The command run through `helper ARGS... -- PROGRAM ARGS...` (the agent's own
    /// binary preparing a terminal), with this command's setup.
    pub fn command_via(&self, helper: &Path, helper_args: &[&str]) -> StdCommand {
        let mut command = StdCommand::new(helper);
        command
            .args(helper_args)
            .arg("--")
            .arg(&self.program)
            .args(&self.args);
        self.apply_setup(&mut command);
        command
    }

    /// The working directory the spawner enters for the spawn (`Reaper::spawn_in`): the
    /// command's own, when it changes no ids (one that does is forked, and its working
    /// directory set in the child).
    pub fn spawn_dir(&self) -> Option<&Path> {
        self.cwd
            .as_deref()
            .map(Path::new)
            .filter(|_| self.ids.is_none())
    }

    fn apply_setup(&self, command: &mut StdCommand) {
        command.envs(self.env.iter().map(|(k, v)| (k, v)));
        if let Some(cwd) = &self.cwd
            && self.ids.is_some()
        {
            command.current_dir(cwd);
        }
        if let Some((uid, gid)) = self.ids {
            // std drops the supplementary groups (setgroups(0)) when it sets the uid.
            command.uid(uid).gid(gid);
        }
    }

    /// The uid and gid it runs as, when a user was given.
    pub fn ids(&self) -> Option<(u32, u32)> {
        self.ids
    }

    /// The program, when it is to be found on `PATH` or at its path: checked before a
    /// terminal process starts, whose `exec` happens out of the agent's sight.
    pub fn check_program(&self) -> Result<(), AgentError> {
        let found = if self.program.contains('/') {
            is_executable(Path::new(&self.program))
        } else {
            let path = self
                .env
                .iter()
                .rev()
                .find(|(k, _)| k == "PATH")
                .map(|(_, v)| v.clone())
                .or_else(|| std::env::var("PATH").ok())
                .unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".to_owned());
            path.split(':')
                .filter(|dir| !dir.is_empty())
                .any(|dir| is_executable(&Path::new(dir).join(&self.program)))
        };
        if found {
            Ok(())
        } else {
            Err(self.spawn_error(&io::Error::from(io::ErrorKind::NotFound)))
        }
    }

    /// The refusal for a spawn that failed.
    pub fn spawn_error(&self, error: &io::Error) -> AgentError {
        let program = &self.program;
        match error.kind() {
            io::ErrorKind::NotFound if self.shell => refuse(
                ErrorKind::NotFound,
                format!("no {SHELL} in this sandbox's image (run an argv instead)"),
            ),
            io::ErrorKind::NotFound => refuse(
                ErrorKind::NotFound,
                format!("no program `{program}` in this sandbox (or it cannot be loaded)"),
            ),
            io::ErrorKind::PermissionDenied => refuse(
                ErrorKind::Failed,
                format!("cannot run `{program}`: permission denied"),
            ),
            _ => refuse(
                ErrorKind::Failed,
                format!("cannot run `{program}`: {error}"),
            ),
        }
    }
}

/// A regular file with some execute bit.
fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

fn no_nul(what: &str, text: &str) -> Result<(), AgentError> {
    if text.contains('\0') {
        Err(refuse(
            ErrorKind::Invalid,
            format!("{what} contains a NUL byte"),
        ))
    } else {
        Ok(())
    }
}

/// `text` cut to [`MAX_DISPLAY_BYTES`] at a character boundary, marked when cut.
fn shorten(mut text: String) -> String {
    if text.len() > MAX_DISPLAY_BYTES {
        let mut end = MAX_DISPLAY_BYTES - '…'.len_utf8();
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> ProcessSetup {
        ProcessSetup::default()
    }

    fn kind(command: Command, setup: ProcessSetup) -> ErrorKind {
        prepare(&command, &setup).unwrap_err().kind
    }

    #[test]
    fn validation_refuses_malformed_requests() {
        let argv = |v: &[&str]| Command::Argv(v.iter().map(|s| s.to_string()).collect());
        assert_eq!(kind(argv(&[]), setup()), ErrorKind::Invalid);
        assert_eq!(kind(argv(&[""]), setup()), ErrorKind::Invalid);
        assert_eq!(kind(argv(&["a", "b\0c"]), setup()), ErrorKind::Invalid);
        assert_eq!(
            kind(Command::Shell(String::new()), setup()),
            ErrorKind::Invalid
        );
        assert_eq!(
            kind(Command::Shell("a\0".into()), setup()),
            ErrorKind::Invalid
        );
        for (k, v) in [("", "x"), ("A=B", "x"), ("A\0", "x"), ("A", "x\0")] {
            let s = ProcessSetup {
                env: vec![(k.into(), v.into())],
                ..setup()
            };
            assert_eq!(kind(argv(&["true"]), s), ErrorKind::Invalid, "{k:?}={v:?}");
        }
        let cwd = |c: &str| ProcessSetup {
            cwd: Some(c.into()),
            ..setup()
        };
        assert_eq!(kind(argv(&["true"]), cwd("tmp")), ErrorKind::Invalid);
        assert_eq!(
            kind(argv(&["true"]), cwd("/no/such/dir")),
            ErrorKind::NotFound
        );
        assert!(prepare(&argv(&["true"]), &cwd("/")).is_ok());
    }

    #[test]
    fn display_is_bounded() {
        let long = Command::Shell("é".repeat(5000));
        let prepared = prepare(&long, &setup()).unwrap();
        assert!(prepared.display.len() <= MAX_DISPLAY_BYTES);
        assert!(prepared.display.ends_with('…'));
        let argv = Command::Argv(vec!["echo".into(), "a b".into()]);
        assert_eq!(prepare(&argv, &setup()).unwrap().display, "echo a b");
    }

    #[test]
    fn programs_are_checked_on_path() {
        let argv = |p: &str| Command::Argv(vec![p.into()]);
        assert!(
            prepare(&argv("sh"), &setup())
                .unwrap()
                .check_program()
                .is_ok()
        );
        assert!(
            prepare(&argv("/bin/sh"), &setup())
                .unwrap()
                .check_program()
                .is_ok()
        );
        let missing = prepare(&argv("no-such-program-xyz"), &setup()).unwrap();
        assert_eq!(
            missing.check_program().unwrap_err().kind,
            ErrorKind::NotFound
        );
        assert_eq!(
            prepare(&argv("/etc/passwd"), &setup())
                .unwrap()
                .check_program()
                .unwrap_err()
                .kind,
            ErrorKind::NotFound
        );
    }
}
