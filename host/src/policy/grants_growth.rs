//! What an operator's new grants allow beyond the running ones: the diff an admin approves
//! when a hot load or upgrade widens `[backends.NAME.grants]` (a sidecar pointing a bridge
//! at a new server, say). Pure: list entries compared like `requires_beyond` (an entry of
//! the new list the old one lacks is added), raised ceilings, new secrets or secrets read
//! from elsewhere, a weaker default isolation level, and volumes newly allowed. Narrowing
//! grows nothing.

use super::{Grants, Isolation};
use std::collections::BTreeMap;

/// What new grants allow beyond old ones: grant field (`http_hosts`, `max_pids`,
/// `secrets`, …) → what it adds there. Empty when nothing grows.
pub type GrantsAdded = BTreeMap<String, Vec<String>>;

/// What `new` grants that `old` does not: list entries `old` lacks, ceilings raised
/// (`"4096 (was 2048)"`), secret names `old` lacks or reads from another source (the
/// source itself is never shown), and a weaker first (default) isolation level.
pub fn grants_beyond(new: &Grants, old: &Grants) -> GrantsAdded {
    let mut added = GrantsAdded::new();
    for (field, n, o) in [
        ("images", &new.images, &old.images),
        ("networks", &new.networks, &old.networks),
        ("http_hosts", &new.http_hosts, &old.http_hosts),
        (
            "http_private_cidrs",
            &new.http_private_cidrs,
            &old.http_private_cidrs,
        ),
        ("egress_to", &new.egress_to, &old.egress_to),
        ("egress_cidrs", &new.egress_cidrs, &old.egress_cidrs),
        ("isolation", &new.isolation, &old.isolation),
    ] {
        note(&mut added, field, entries_beyond(n, o, |e| e));
    }
    note(
        &mut added,
        "host_mounts",
        entries_beyond(&new.host_mounts, &old.host_mounts, |e| {
            e.strip_prefix("ro:").unwrap_or(e)
        }),
    );
    if let Some(weaker) = weaker_default(&new.isolation, &old.isolation) {
        added
            .entry("isolation".to_string())
            .or_default()
            .push(weaker);
    }
    if new.volumes && !old.volumes {
        note(&mut added, "volumes", vec!["true".to_string()]);
    }
    for ((field, n), (_, o)) in ceilings(new).into_iter().zip(ceilings(old)) {
        if n > o {
            note(&mut added, field, vec![format!("{n} (was {o})")]);
        }
    }
    let secrets: Vec<String> = new
        .secrets
        .names()
        .filter_map(|name| match old.secrets.source(name) {
            None => Some(name.to_string()),
            Some(was) if new.secrets.source(name) != Some(was) => {
                Some(format!("{name} (source changed)"))
            }
            Some(_) => None,
        })
        .collect();
    note(&mut added, "secrets", secrets);
    added
}

/// Entries of `new` that `old` lacks, each compared as `key` reads it.
fn entries_beyond(new: &[String], old: &[String], key: impl Fn(&str) -> &str) -> Vec<String> {
    new.iter()
        .filter(|n| !old.iter().any(|o| key(o) == key(n)))
        .cloned()
        .collect()
}

fn note(added: &mut GrantsAdded, field: &str, entries: Vec<String>) {
    if !entries.is_empty() {
        added.insert(field.to_string(), entries);
    }
}

/// `"default container (was gvisor)"` when the level containers get unasked weakens.
fn weaker_default(new: &[String], old: &[String]) -> Option<String> {
    let first = |levels: &[String]| levels.first().and_then(|l| Isolation::parse(l));
    match (first(new), first(old)) {
        (Some(n), Some(o)) if n < o => Some(format!("default {n} (was {o})")),
        _ => None,
    }
}

/// The numeric ceilings, by grant name; a larger value allows more.
fn ceilings(g: &Grants) -> [(&'static str, u64); 12] {
    [
        ("max_containers", g.max_containers.into()),
        (
            "max_containers_per_session",
            g.max_containers_per_session.into(),
        ),
        ("max_cpu_millis", g.max_cpu_millis.into()),
        ("max_memory_mb", g.max_memory_mb),
        ("max_pids", g.max_pids.into()),
        ("max_http_request_bytes", g.max_http_request_bytes),
        ("max_http_response_bytes", g.max_http_response_bytes),
        ("http_timeout_ms", g.http_timeout_ms),
        ("max_http_in_flight", g.max_http_in_flight.into()),
        (
            "max_http_in_flight_per_call",
            g.max_http_in_flight_per_call.into(),
        ),
        (
            "max_egress_bytes_per_session",
            g.max_egress_bytes_per_session,
        ),
        ("max_egress_connections", g.max_egress_connections.into()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::SecretGrants;

    fn list(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    fn secrets(pairs: &[(&str, &str)]) -> SecretGrants {
        let table: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        SecretGrants::try_from(table).unwrap()
    }

    #[test]
    fn the_same_grants_grow_nothing() {
        let g = crate::policy::tests::grants();
        assert!(grants_beyond(&g, &g).is_empty());
        assert!(grants_beyond(&Grants::default(), &Grants::default()).is_empty());
    }

    #[test]
    fn a_new_list_entry_is_added_and_a_removed_one_is_not() {
        let old = Grants {
            http_hosts: list(&["a.test:80"]),
            images: list(&["busybox:1.36"]),
            ..Grants::default()
        };
        let new = Grants {
            http_hosts: list(&["a.test:80", "b.test:80"]),
            images: list(&[]),
            networks: list(&["bridge"]),
            egress_to: list(&["*.example.com"]),
            egress_cidrs: list(&["10.0.0.0/8"]),
            http_private_cidrs: list(&["127.0.0.0/8"]),
            ..Grants::default()
        };
        let added = grants_beyond(&new, &old);
        assert_eq!(added["http_hosts"], list(&["b.test:80"]));
        assert_eq!(added["networks"], list(&["bridge"]));
        assert_eq!(added["egress_to"], list(&["*.example.com"]));
        assert_eq!(added["egress_cidrs"], list(&["10.0.0.0/8"]));
        assert_eq!(added["http_private_cidrs"], list(&["127.0.0.0/8"]));
        assert!(!added.contains_key("images"), "{added:?}");
        assert!(grants_beyond(&old, &new).contains_key("images"));
        assert!(!grants_beyond(&old, &new).contains_key("http_hosts"));
    }

    #[test]
    fn a_read_write_mount_is_more_than_a_read_only_one() {
        let old = Grants {
            host_mounts: list(&["/srv/data"]),
            ..Grants::default()
        };
        let same = Grants {
            host_mounts: list(&["ro:/srv/data"]),
            ..Grants::default()
        };
        assert!(grants_beyond(&same, &old).is_empty());
        let rw = Grants {
            host_mounts: list(&["rw:/srv/data", "/srv/more"]),
            ..Grants::default()
        };
        assert_eq!(
            grants_beyond(&rw, &old)["host_mounts"],
            list(&["rw:/srv/data", "/srv/more"])
        );
    }

    #[test]
    fn a_weaker_isolation_level_is_growth() {
        let gvisor = Grants {
            isolation: list(&["gvisor"]),
            ..Grants::default()
        };
        let both = Grants {
            isolation: list(&["gvisor", "container"]),
            ..Grants::default()
        };
        let container_first = Grants {
            isolation: list(&["container", "gvisor"]),
            ..Grants::default()
        };
        assert_eq!(
            grants_beyond(&both, &gvisor)["isolation"],
            list(&["container"])
        );
        assert_eq!(
            grants_beyond(&container_first, &both)["isolation"],
            list(&["default container (was gvisor)"])
        );
        assert!(grants_beyond(&gvisor, &both).is_empty());
        assert!(grants_beyond(&both, &container_first).is_empty());
    }

    #[test]
    fn volumes_newly_allowed_are_growth() {
        let on = Grants {
            volumes: true,
            ..Grants::default()
        };
        assert_eq!(
            grants_beyond(&on, &Grants::default())["volumes"],
            list(&["true"])
        );
        assert!(grants_beyond(&Grants::default(), &on).is_empty());
        assert!(grants_beyond(&on, &on).is_empty());
    }

    #[test]
    fn a_raised_ceiling_is_growth_and_a_lowered_one_is_not() {
        let old = Grants::default();
        let new = Grants {
            max_memory_mb: 4_096,
            max_containers: 32,
            max_pids: 128,
            ..Grants::default()
        };
        let added = grants_beyond(&new, &old);
        assert_eq!(added["max_memory_mb"], list(&["4096 (was 2048)"]));
        assert_eq!(added["max_containers"], list(&["32 (was 16)"]));
        assert_eq!(added.len(), 2, "{added:?}");
    }

    #[test]
    fn a_new_secret_or_a_new_source_is_growth_and_the_source_is_not_shown() {
        let old = Grants {
            secrets: secrets(&[("TOKEN", "env:TOKEN"), ("GONE", "env:GONE")]),
            ..Grants::default()
        };
        let new = Grants {
            secrets: secrets(&[("TOKEN", "file:/run/secrets/token"), ("NEW", "env:NEW")]),
            ..Grants::default()
        };
        let added = grants_beyond(&new, &old);
        assert_eq!(added["secrets"], list(&["NEW", "TOKEN (source changed)"]));
        assert!(!format!("{added:?}").contains("/run/secrets"));
        let fewer = Grants {
            secrets: secrets(&[("TOKEN", "env:TOKEN")]),
            ..Grants::default()
        };
        assert!(grants_beyond(&fewer, &old).is_empty());
    }
}
