//! Who a command runs as: `name`, `uid`, `uid:gid` or `name:group`, looked up in the
//! container's `/etc/passwd` and `/etc/group`.
//!
//! The agent is a static binary, so glibc's NSS (getpwnam) is not available: the files
//! are parsed here. They belong to the sandbox and are read as hostile: at most
//! [`MAX_FILE_BYTES`], regular files only (a FIFO planted there must not block the agent).

use std::fs::OpenOptions;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;

use wharf_sandbox_protocol::{AgentError, ErrorKind};

use crate::refuse;

/// The most of `/etc/passwd` or `/etc/group` the agent reads.
pub const MAX_FILE_BYTES: u64 = 1 << 20;
/// The longest user specification accepted.
const MAX_SPEC_BYTES: usize = 256;

/// A resolved user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The uid to run as.
    pub uid: u32,
    /// The gid to run as.
    pub gid: u32,
    /// The user's name, when `/etc/passwd` knows the uid.
    pub name: Option<String>,
    /// The user's home directory, when `/etc/passwd` knows the uid.
    pub home: Option<String>,
}

/// One line of `/etc/passwd`.
struct PasswdEntry<'a> {
    name: &'a str,
    uid: u32,
    gid: u32,
    home: &'a str,
}

/// Resolves `spec` against the container's own files.
pub fn lookup(spec: &str) -> Result<Identity, AgentError> {
    let passwd = read_capped("/etc/passwd").unwrap_or_default();
    // Only a group given by name needs /etc/group.
    let group_by_name = spec
        .split_once(':')
        .is_some_and(|(_, group)| parse_id(group).is_none());
    let group = if group_by_name {
        read_capped("/etc/group").unwrap_or_default()
    } else {
        String::new()
    };
    resolve(spec, &passwd, &group)
}

/// Makes `command` run as `identity`, with its `HOME`, `USER` and `LOGNAME` (std drops
/// the supplementary groups when it sets the uid).
pub fn apply(command: &mut std::process::Command, identity: &Identity) {
    use std::os::unix::process::CommandExt;
    command.uid(identity.uid).gid(identity.gid);
    if let Some(home) = &identity.home {
        command.env("HOME", home);
    }
    if let Some(name) = &identity.name {
        command.env("USER", name).env("LOGNAME", name);
    }
}

/// Resolves `spec` against the given `/etc/passwd` and `/etc/group` contents.
pub fn resolve(spec: &str, passwd: &str, group: &str) -> Result<Identity, AgentError> {
    if spec.is_empty() || spec.len() > MAX_SPEC_BYTES || spec.contains('\0') {
        return Err(refuse(
            ErrorKind::Invalid,
            "a user is `name`, `uid`, `uid:gid` or `name:group`",
        ));
    }
    let (user, group_part) = match spec.split_once(':') {
        Some((user, group)) => (user, Some(group)),
        None => (spec, None),
    };
    if user.is_empty() || group_part.is_some_and(|g| g.is_empty() || g.contains(':')) {
        return Err(refuse(
            ErrorKind::Invalid,
            format!("malformed user `{spec}`: a user is `name`, `uid`, `uid:gid` or `name:group`"),
        ));
    }
    let (uid, entry) = match parse_id(user) {
        Some(uid) => (uid, passwd_entries(passwd).find(|e| e.uid == uid)),
        None => {
            let entry = passwd_entries(passwd)
                .find(|e| e.name == user)
                .ok_or_else(|| {
                    refuse(
                        ErrorKind::NotFound,
                        format!("no user {user} in /etc/passwd"),
                    )
                })?;
            (entry.uid, Some(entry))
        }
    };
    let gid = match group_part {
        Some(group_part) => match parse_id(group_part) {
            Some(gid) => gid,
            None => group_gid(group, group_part).ok_or_else(|| {
                refuse(
                    ErrorKind::NotFound,
                    format!("no group {group_part} in /etc/group"),
                )
            })?,
        },
        None => entry.as_ref().map_or(uid, |e| e.gid),
    };
    for id in [uid, gid] {
        // -1 means "unchanged" to setuid/setgid: never a real id.
        if id == u32::MAX {
            return Err(refuse(ErrorKind::Invalid, format!("invalid id {id}")));
        }
    }
    Ok(Identity {
        uid,
        gid,
        name: entry.as_ref().map(|e| e.name.to_owned()),
        home: entry
            .as_ref()
            .filter(|e| !e.home.is_empty())
            .map(|e| e.home.to_owned()),
    })
}

/// A decimal id (digits only: no sign, no spaces).
fn parse_id(text: &str) -> Option<u32> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// The well-formed entries of a passwd file (`name:password:uid:gid:gecos:home:shell`).
fn passwd_entries(text: &str) -> impl Iterator<Item = PasswdEntry<'_>> {
    text.lines().filter_map(|line| {
        let mut fields = line.split(':');
        let name = fields.next()?;
        let _password = fields.next()?;
        let uid = parse_id(fields.next()?)?;
        let gid = parse_id(fields.next()?)?;
        let _gecos = fields.next();
        let home = fields.next().unwrap_or("");
        (!name.is_empty() && !name.starts_with(['#', '+', '-'])).then_some(PasswdEntry {
            name,
            uid,
            gid,
            home,
        })
    })
}

/// The gid of a group by name (`name:password:gid:members`).
fn group_gid(text: &str, wanted: &str) -> Option<u32> {
    text.lines().find_map(|line| {
        let mut fields = line.split(':');
        let name = fields.next()?;
        let _password = fields.next()?;
        let gid = parse_id(fields.next()?)?;
        (name == wanted).then_some(gid)
    })
}

/// A regular file's first [`MAX_FILE_BYTES`], as text; `None` when absent or not a file.
fn read_capped(path: &str) -> Option<String> {
    // Non-blocking open: a FIFO at this path would otherwise block the agent's thread.
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(path)
        .ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES).read_to_end(&mut bytes).ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    const PASSWD: &str = "\
root:x:0:0:root:/root:/bin/sh
# a comment
daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin
broken line
alice:x:1000:1000:Alice,,,:/home/alice:/bin/bash
nohome:x:1001:50::
weird:x:-5:1:::
bob:x:1002:1002
";
    const GROUP: &str = "\
root:x:0:
staff:x:50:alice
developers:x:2000:alice,bob
";

    fn ok(spec: &str) -> Identity {
        resolve(spec, PASSWD, GROUP).unwrap()
    }

    fn kind(spec: &str) -> ErrorKind {
        resolve(spec, PASSWD, GROUP).unwrap_err().kind
    }

    #[test]
    fn names_resolve_with_home_and_primary_group() {
        assert_eq!(
            ok("alice"),
            Identity {
                uid: 1000,
                gid: 1000,
                name: Some("alice".into()),
                home: Some("/home/alice".into()),
            }
        );
        assert_eq!(ok("root").uid, 0);
        let nohome = ok("nohome");
        assert_eq!((nohome.uid, nohome.gid, nohome.home), (1001, 50, None));
        // Four fields are enough.
        assert_eq!((ok("bob").uid, ok("bob").home), (1002, None));
    }

    #[test]
    fn numeric_ids_need_no_entry() {
        let known = ok("1000");
        assert_eq!(known.name.as_deref(), Some("alice"));
        assert_eq!(known.home.as_deref(), Some("/home/alice"));
        let unknown = ok("4242");
        assert_eq!((unknown.uid, unknown.gid, unknown.name), (4242, 4242, None));
        assert_eq!(ok("4242:7").gid, 7);
        assert_eq!(ok("1000:0").gid, 0);
    }

    #[test]
    fn groups_by_name_and_number() {
        assert_eq!(ok("alice:developers").gid, 2000);
        assert_eq!(ok("alice:50").gid, 50);
        assert_eq!(ok("4242:staff").gid, 50);
    }

    #[test]
    fn unknown_and_malformed_are_refused() {
        let err = resolve("mallory", PASSWD, GROUP).unwrap_err();
        assert_eq!(err.kind, ErrorKind::NotFound);
        assert_eq!(err.message, "no user mallory in /etc/passwd");
        assert_eq!(kind("alice:nogroup"), ErrorKind::NotFound);
        // Comment and NIS lines and unparsable ids are no entries.
        assert_eq!(kind("# a comment"), ErrorKind::NotFound);
        assert_eq!(kind("weird"), ErrorKind::NotFound);
        for bad in ["", ":", "alice:", ":0", "a:b:c", "+1", " 1", "1 "] {
            assert!(
                matches!(kind(bad), ErrorKind::Invalid | ErrorKind::NotFound),
                "{bad:?}"
            );
        }
        assert_eq!(kind(""), ErrorKind::Invalid);
        assert_eq!(kind("alice:"), ErrorKind::Invalid);
        assert_eq!(kind("4294967295"), ErrorKind::Invalid);
        assert_eq!(kind("0:4294967295"), ErrorKind::Invalid);
        assert_eq!(kind("99999999999"), ErrorKind::NotFound);
        assert_eq!(kind(&"a".repeat(300)), ErrorKind::Invalid);
    }

    #[test]
    fn empty_files_still_allow_numbers() {
        assert_eq!(resolve("5:6", "", "").unwrap().gid, 6);
        assert_eq!(
            resolve("root", "", "").unwrap_err().kind,
            ErrorKind::NotFound
        );
    }

    #[test]
    fn capped_reads_refuse_non_files() {
        assert_eq!(read_capped("/"), None);
        assert_eq!(read_capped("/nonexistent/file"), None);
        assert!(read_capped("/etc/passwd").is_some_and(|t| t.contains("root")));
    }
}
