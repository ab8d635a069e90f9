//! Turning Docker's container descriptions (inspect and list) into [`ContainerInfo`].

use std::collections::HashMap;

use bollard::models::{ContainerInspectResponse, ContainerSummary};

use super::labels::{LABEL_BACKEND, LABEL_SESSION};
use super::types::{ContainerInfo, ContainerState};

fn sorted_labels(labels: Option<&HashMap<String, String>>) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = labels
        .map(|l| l.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default();
    out.sort();
    out
}

/// A container's state from the engine's word for it (inspect and list say the same words).
fn state_of(status: Option<&str>) -> ContainerState {
    match status {
        Some("created") => ContainerState::Created,
        Some("running" | "restarting") => ContainerState::Running,
        Some("paused") => ContainerState::Paused,
        Some("exited" | "stopping") => ContainerState::Exited,
        Some("dead" | "removing") => ContainerState::Dead,
        _ => ContainerState::Unknown,
    }
}

fn finish(
    id: String,
    name: String,
    image: String,
    state: ContainerState,
    labels: Vec<(String, String)>,
    created_at_ms: u64,
) -> ContainerInfo {
    let find = |key: &str| {
        labels
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
    };
    let backend = find(LABEL_BACKEND).unwrap_or_default();
    let session = find(LABEL_SESSION);
    ContainerInfo {
        id,
        name,
        image,
        state,
        labels,
        created_at_ms,
        backend,
        session,
    }
}

/// From `GET /containers/{id}/json`.
pub(crate) fn from_inspect(c: &ContainerInspectResponse) -> ContainerInfo {
    let config = c.config.as_ref();
    let state = c.state.as_ref();
    let status = state_of(state.and_then(|s| s.status).as_ref().map(AsRef::as_ref));
    finish(
        c.id.clone().unwrap_or_default(),
        c.name
            .as_deref()
            .unwrap_or_default()
            .trim_start_matches('/')
            .to_string(),
        config
            .and_then(|c| c.image.clone())
            .or_else(|| c.image.clone())
            .unwrap_or_default(),
        status,
        sorted_labels(config.and_then(|c| c.labels.as_ref())),
        c.created.as_deref().and_then(parse_rfc3339_ms).unwrap_or(0),
    )
}

/// From one entry of `GET /containers/json`.
pub(crate) fn from_summary(c: &ContainerSummary) -> ContainerInfo {
    let state = state_of(c.state.as_ref().map(AsRef::as_ref));
    let name = c
        .names
        .as_ref()
        .and_then(|n| n.first())
        .map(|n| n.trim_start_matches('/').to_string())
        .unwrap_or_default();
    let created = c
        .created
        .and_then(|s| u64::try_from(s).ok())
        .map(|s| s.saturating_mul(1000))
        .unwrap_or(0);
    finish(
        c.id.clone().unwrap_or_default(),
        name,
        c.image.clone().unwrap_or_default(),
        state,
        sorted_labels(c.labels.as_ref()),
        created,
    )
}

/// Milliseconds since the epoch of an RFC 3339 time as Docker writes it
/// (`2024-05-01T12:34:56.123456789Z`, or with a `+hh:mm` offset). `None` if malformed.
pub(crate) fn parse_rfc3339_ms(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> { s.get(r)?.parse::<i64>().ok() };
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let mut rest = s.get(19..)?;
    let mut millis = 0i64;
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let ms: String = frac[..digits]
            .chars()
            .chain("000".chars())
            .take(3)
            .collect();
        millis = ms.parse().ok()?;
        rest = &frac[digits..];
    }
    let offset_secs = match rest {
        "Z" | "z" => 0,
        _ => {
            let sign = match rest.as_bytes().first()? {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let oh: i64 = rest.get(1..3)?.parse().ok()?;
            let om: i64 = rest.get(4..6)?.parse().ok()?;
            sign * (oh * 3600 + om * 60)
        }
    };
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + hour * 3600 + minute * 60 + second - offset_secs;
    u64::try_from(secs.checked_mul(1000)?.checked_add(millis)?).ok()
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inspected_and_listed_states_map_alike() {
        use bollard::models::{ContainerStateStatusEnum as I, ContainerSummaryStateEnum as L};
        for (inspected, listed, want) in [
            (I::CREATED, L::CREATED, ContainerState::Created),
            (I::RUNNING, L::RUNNING, ContainerState::Running),
            (I::EXITED, L::EXITED, ContainerState::Exited),
            (I::DEAD, L::DEAD, ContainerState::Dead),
            (I::RESTARTING, L::RESTARTING, ContainerState::Running),
            (I::PAUSED, L::PAUSED, ContainerState::Paused),
            (I::STOPPING, L::STOPPING, ContainerState::Exited),
            (I::REMOVING, L::REMOVING, ContainerState::Dead),
            (I::EMPTY, L::EMPTY, ContainerState::Unknown),
        ] {
            assert_eq!(state_of(Some(inspected.as_ref())), want, "{inspected}");
            assert_eq!(state_of(Some(listed.as_ref())), want, "{listed}");
        }
    }

    #[test]
    fn docker_times_parse() {
        assert_eq!(parse_rfc3339_ms("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            parse_rfc3339_ms("2001-09-09T01:46:40.5Z"),
            Some(1_000_000_000_500)
        );
        assert_eq!(
            parse_rfc3339_ms("2024-02-29T12:00:00.123456789Z"),
            Some(1_709_208_000_123)
        );
        assert_eq!(
            parse_rfc3339_ms("2024-02-29T14:00:00+02:00"),
            Some(1_709_208_000_000)
        );
        assert_eq!(parse_rfc3339_ms("0001-01-01T00:00:00Z"), None);
        assert_eq!(parse_rfc3339_ms("garbage"), None);
    }
}
