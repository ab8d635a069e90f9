//! The checks on guest labels, the host's labels on a new container (their names are every
//! engine's: `engines::container_types`), and the id rule: guests name containers by full 64-hex id only.

use std::collections::HashMap;

use bollard::models::ContainerInspectResponse;

use super::error::DockerError;
use super::types::Owner;
pub use crate::engines::container_types::{
    LABEL_AGENT, LABEL_BACKEND, LABEL_EGRESS, LABEL_NODE, LABEL_POOL, LABEL_SESSION, LABEL_USER,
    POOL_SESSION_PREFIX, RESERVED_PREFIX,
};

/// Whether `id` is a full container id: exactly 64 lowercase hex digits. Names and
/// prefixes are not ids (a guest could otherwise probe other containers by name).
pub fn is_full_id(id: &str) -> bool {
    id.len() == 64
        && id
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// `Ok` for a full id; `NotFound` otherwise, without asking Docker.
pub(crate) fn check_id(id: &str) -> Result<(), DockerError> {
    if is_full_id(id) {
        Ok(())
    } else {
        Err(DockerError::NotFound(format!("container {}", shorten(id))))
    }
}

/// Checks an owner's names: non-empty, no control characters.
pub(crate) fn check_owner(owner: &Owner) -> Result<(), DockerError> {
    check_label_value("backend", &owner.backend, false)?;
    if let Some(session) = &owner.session {
        check_label_value("session", session, false)?;
    }
    Ok(())
}

fn check_label_value(what: &str, value: &str, may_be_empty: bool) -> Result<(), DockerError> {
    if !may_be_empty && value.is_empty() {
        return Err(DockerError::Invalid(format!("{what} must not be empty")));
    }
    if value.chars().any(char::is_control) {
        return Err(DockerError::Invalid(format!(
            "{what} contains a control character"
        )));
    }
    Ok(())
}

/// The labels of a new container: the guest's (checked: no reserved key, no duplicate,
/// sane text) plus the host's own.
pub(crate) fn build_labels(
    owner: &Owner,
    node_id: &str,
    guest: &[(String, String)],
) -> Result<HashMap<String, String>, DockerError> {
    check_owner(owner)?;
    let mut labels = HashMap::with_capacity(guest.len() + 3);
    for (key, value) in guest {
        if key.to_ascii_lowercase().starts_with(RESERVED_PREFIX) {
            return Err(DockerError::Refused(format!(
                "label {key:?}: the {RESERVED_PREFIX}* labels are the host's"
            )));
        }
        if key.is_empty()
            || key
                .chars()
                .any(|c| c.is_control() || c == '=' || c.is_whitespace())
        {
            return Err(DockerError::Invalid(format!("bad label key {key:?}")));
        }
        check_label_value("label value", value, true)?;
        if labels.insert(key.clone(), value.clone()).is_some() {
            return Err(DockerError::Invalid(format!("label {key:?} given twice")));
        }
    }
    labels.insert(LABEL_BACKEND.to_string(), owner.backend.clone());
    if let Some(session) = &owner.session {
        labels.insert(LABEL_SESSION.to_string(), session.clone());
        if session.starts_with(POOL_SESSION_PREFIX) {
            labels.insert(LABEL_POOL.to_string(), owner.backend.clone());
        }
    }
    labels.insert(LABEL_NODE.to_string(), node_id.to_string());
    Ok(labels)
}

/// Label filters for `list`: `key=value` pairs, in Docker's filter syntax.
pub(crate) fn owner_filters(backend: &str, session: Option<&str>) -> HashMap<String, Vec<String>> {
    let mut wanted = vec![format!("{LABEL_BACKEND}={backend}")];
    if let Some(session) = session {
        wanted.push(format!("{LABEL_SESSION}={session}"));
    }
    engine_filter("label", wanted)
}

/// One of the engine's list filters: `kind` (`label`, `volume`...) with the values an
/// entry must match.
pub(crate) fn engine_filter(kind: &str, values: Vec<String>) -> HashMap<String, Vec<String>> {
    HashMap::from([(kind.to_string(), values)])
}

/// Whether an inspected container is `id` itself and `owner`'s backend created it.
pub(crate) fn is_owners(found: &ContainerInspectResponse, owner: &Owner, id: &str) -> bool {
    let backend = found
        .config
        .as_ref()
        .and_then(|c| c.labels.as_ref())
        .and_then(|l| l.get(LABEL_BACKEND));
    found.id.as_deref() == Some(id) && backend == Some(&owner.backend)
}

/// At most 16 characters of something the caller sent, for an error message.
pub(crate) fn shorten(s: &str) -> String {
    let mut out: String = s.chars().take(16).filter(|c| !c.is_control()).collect();
    if s.chars().count() > 16 {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_full_lowercase_hex() {
        let id = "a".repeat(64);
        assert!(is_full_id(&id));
        assert!(!is_full_id(&"A".repeat(64)));
        assert!(!is_full_id(&"a".repeat(12)));
        assert!(!is_full_id("my-container"));
        assert!(matches!(check_id("abc"), Err(DockerError::NotFound(_))));
    }

    #[test]
    fn guest_labels_cannot_claim_wharf_keys() {
        let owner = Owner::session("b1", "s1");
        let bad = vec![("Wharf.backend".to_string(), "other".to_string())];
        assert!(matches!(
            build_labels(&owner, "n", &bad),
            Err(DockerError::Refused(_))
        ));
        let ok = vec![("app".to_string(), "x".to_string())];
        let labels = build_labels(&owner, "node-1", &ok).unwrap_or_default();
        assert_eq!(labels.get(LABEL_BACKEND).map(String::as_str), Some("b1"));
        assert_eq!(labels.get(LABEL_SESSION).map(String::as_str), Some("s1"));
        assert_eq!(labels.get(LABEL_NODE).map(String::as_str), Some("node-1"));
        assert_eq!(labels.get("app").map(String::as_str), Some("x"));
        let dup = vec![
            ("a".to_string(), "1".to_string()),
            ("a".to_string(), "2".to_string()),
        ];
        assert!(matches!(
            build_labels(&owner, "n", &dup),
            Err(DockerError::Invalid(_))
        ));
        assert!(matches!(
            build_labels(&Owner::backend(""), "n", &[]),
            Err(DockerError::Invalid(_))
        ));
    }
}
