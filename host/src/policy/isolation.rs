//! Isolation levels: how far a sandbox's code is kept from the host's kernel, which levels a
//! backend is granted, and what a session asked of the sandboxes its provider creates (the
//! [`SandboxProfile`] the host applies to every container created in that call).

use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU32, Ordering};

use super::Denial;

/// How a sandbox is isolated from the host's kernel.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Isolation {
    /// A container under the engine's default runtime (namespaces, cgroups, seccomp, the
    /// capabilities listed in SECURITY.md): the host's kernel answers every syscall.
    #[default]
    Container,
    /// A container under gVisor (`runsc`): a user-space kernel answers the sandbox's
    /// syscalls, and only a filtered few reach the host's.
    Gvisor,
}

impl Isolation {
    /// Every level, weakest first.
    pub const ALL: [Isolation; 2] = [Isolation::Container, Isolation::Gvisor];

    /// The level's name in configs and answers.
    pub fn name(self) -> &'static str {
        match self {
            Isolation::Container => "container",
            Isolation::Gvisor => "gvisor",
        }
    }

    /// The level named `name`, if there is one.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|level| level.name() == name)
    }

    /// The level a caller asked for by `name`, or why there is none (the name quoted, cut
    /// to 64 characters).
    pub fn asked(name: &str) -> Result<Self, String> {
        Self::parse(name).ok_or_else(|| {
            format!(
                "unknown isolation {:?} (container, gvisor)",
                name.chars().take(64).collect::<String>()
            )
        })
    }
}

impl std::fmt::Display for Isolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The levels of `grants.isolation`, each checked; the first is what a backend's
/// containers get when nobody asks for one.
pub fn granted_levels(names: &[String]) -> Result<Vec<Isolation>, Denial> {
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        let level = Isolation::parse(name).ok_or_else(|| {
            Denial(format!(
                "grants.isolation: unknown isolation level {name:?} (known: container, gvisor)"
            ))
        })?;
        if !out.contains(&level) {
            out.push(level);
        }
    }
    if out.is_empty() {
        return Err(Denial(
            "grants.isolation is empty: grant at least one level (e.g. [\"container\"])".into(),
        ));
    }
    Ok(out)
}

/// The most a sandbox's user name may be (`name`, `uid`, `name:group`, `uid:gid`).
pub const MAX_USER_BYTES: usize = 64;

/// The isolation level and user a sandbox asks for, each checked as written (whether they
/// are granted is checked where the container is made): the level, or why it is unknown or
/// the user malformed.
pub fn check_asked(
    isolation: Option<&str>,
    user: Option<&str>,
) -> Result<Option<Isolation>, String> {
    let level = isolation.map(Isolation::asked).transpose()?;
    if let Some(user) = user {
        check_user(user)?;
    }
    Ok(level)
}

/// Checks a sandbox user as a session config gives it: a name or a number, optionally
/// `:group`; no path, no control character, nothing the engine would read another way.
pub fn check_user(user: &str) -> Result<(), String> {
    let ok_part = |part: &str| {
        !part.is_empty()
            && part.len() <= 32
            && part
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
            && !part.starts_with('-')
    };
    let mut parts = user.split(':');
    let valid = user.len() <= MAX_USER_BYTES
        && parts.next().is_some_and(ok_part)
        && parts.next().is_none_or(ok_part)
        && parts.next().is_none();
    if valid {
        Ok(())
    } else {
        Err(format!(
            "bad sandbox user {:?}: a name or a uid, optionally `:group` (letters, digits, `_`, `-`, `.`)",
            user.chars().take(MAX_USER_BYTES).collect::<String>()
        ))
    }
}

/// What a session asked of its sandbox beyond the provider contract's spec, applied by the
/// host to every container the provider creates during the call that provisions it — so a
/// provider cannot give a weaker sandbox than asked. `applied` counts those containers: a
/// provider that created none (it provisions elsewhere) could not have honoured the ask.
#[derive(Debug, Default)]
pub struct SandboxProfile {
    /// The isolation level asked for; `None`: the backend's first granted level.
    pub isolation: Option<Isolation>,
    /// The user the sandbox's processes run as; `None`: the image's.
    pub user: Option<String>,
    /// Mount the root filesystem read-only (the work dir and `/tmp` stay writable).
    pub read_only_root: bool,
    /// Egress only through the host's proxy, to these names and ranges; `None`: the
    /// network the provider asks for.
    pub egress: Option<super::EgressAsk>,
    /// The image the sandbox starts from when it is a snapshot of the tenant's: granted
    /// for this call whatever `grants.images` say.
    pub granted_image: Option<String>,
    /// The tenant's named volumes its sandbox mounts (resolved by the host).
    pub volumes: Vec<SandboxVolume>,
    applied: AtomicU32,
}

/// One of a tenant's named volumes, as a session's sandbox mounts it: the engine volume
/// the host resolved from the tenant's name (never a guest's or a caller's choice).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxVolume {
    /// The tenant's name for it (for refusals).
    pub name: String,
    /// The engine's volume.
    pub engine_volume: String,
    /// Absolute path in the sandbox.
    pub path: String,
    /// Mounted read-only.
    pub read_only: bool,
    /// Mounted by one sandbox at a time (the volume is not `shared`).
    pub exclusive: bool,
}

impl SandboxVolume {
    /// The refusal of a volume that is not shared and that `session`'s sandbox mounts.
    pub fn held_by(name: &str, session: Option<&str>) -> String {
        format!(
            "volume `{name}` is mounted by the sandbox of session {}; it is not shared, so one sandbox mounts it at a time",
            session.unwrap_or("(none)")
        )
    }
}

impl SandboxProfile {
    /// A profile asking for `isolation`, `user` and `read_only_root`.
    pub fn new(isolation: Option<Isolation>, user: Option<String>, read_only_root: bool) -> Self {
        Self {
            isolation,
            user,
            read_only_root,
            egress: None,
            granted_image: None,
            volumes: Vec::new(),
            applied: AtomicU32::new(0),
        }
    }

    /// The same profile, its sandbox reaching only `ask` through the egress proxy (an
    /// empty ask asks nothing).
    pub fn with_egress(mut self, ask: super::EgressAsk) -> Self {
        self.egress = (!ask.is_empty()).then_some(ask);
        self
    }

    /// The same profile, its sandbox made from `image` (a snapshot the host checked).
    pub fn with_granted_image(mut self, image: Option<String>) -> Self {
        self.granted_image = image;
        self
    }

    /// The same profile, its sandbox mounting `volumes`.
    pub fn with_volumes(mut self, volumes: Vec<SandboxVolume>) -> Self {
        self.volumes = volumes;
        self
    }

    /// Whether `image` is the one this profile grants.
    pub fn grants_image(&self, image: &str) -> bool {
        self.granted_image.as_deref() == Some(image)
    }

    /// Whether it asks for anything a container would not get anyway.
    pub fn asks_anything(&self) -> bool {
        self.isolation.is_some()
            || self.user.is_some()
            || self.read_only_root
            || self.egress.is_some()
            || self.granted_image.is_some()
            || !self.volumes.is_empty()
    }

    /// Records one container created with it.
    pub fn mark_applied(&self) {
        self.applied.fetch_add(1, Ordering::Relaxed);
    }

    /// Containers created with it so far.
    pub fn applied(&self) -> u32 {
        self.applied.load(Ordering::Relaxed)
    }

    /// What it asks, in words, for a refusal.
    pub fn describe(&self) -> String {
        let mut asks = Vec::new();
        if let Some(level) = self.isolation {
            asks.push(format!("isolation {level:?}", level = level.name()));
        }
        if let Some(user) = &self.user {
            asks.push(format!("user {user:?}"));
        }
        if self.read_only_root {
            asks.push("a read-only root".to_string());
        }
        if self.egress.is_some() {
            asks.push("an egress allowlist".to_string());
        }
        if let Some(image) = &self.granted_image {
            asks.push(format!("a sandbox from snapshot {image:?}"));
        }
        for volume in &self.volumes {
            asks.push(format!("volume {:?} at {:?}", volume.name, volume.path));
        }
        asks.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_parse_and_grants_are_checked() {
        assert_eq!(Isolation::parse("gvisor"), Some(Isolation::Gvisor));
        assert_eq!(Isolation::parse("GVISOR"), None);
        assert_eq!(Isolation::parse("kata"), None);
        assert_eq!(
            granted_levels(&["gvisor".into(), "container".into(), "gvisor".into()]).unwrap(),
            vec![Isolation::Gvisor, Isolation::Container]
        );
        assert!(granted_levels(&[]).is_err());
        assert!(granted_levels(&["vm".into()]).unwrap_err().0.contains("vm"));
    }

    #[test]
    fn users_are_names_or_numbers() {
        for good in [
            "1000",
            "1000:1000",
            "agent",
            "agent:staff",
            "www-data",
            "a.b_c",
        ] {
            assert!(check_user(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            ":",
            "1000:",
            "a:b:c",
            "-u",
            "../root",
            "a b",
            "a\n",
            "ä",
            &"x".repeat(65),
        ] {
            assert!(check_user(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_profile_says_what_it_asks() {
        let plain = SandboxProfile::default();
        assert!(!plain.asks_anything());
        let asked = SandboxProfile::new(Some(Isolation::Gvisor), Some("1000".into()), true);
        assert!(asked.asks_anything());
        assert_eq!(
            asked.describe(),
            "isolation \"gvisor\", user \"1000\", a read-only root"
        );
        asked.mark_applied();
        assert_eq!(asked.applied(), 1);
    }
}
