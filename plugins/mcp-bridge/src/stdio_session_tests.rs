//! Tests of the per-session servers' pure parts: the session data, read back whatever it
//! holds without a panic (anything odd is a server gone, started again), and the backoff
//! record a session starts from.

use super::*;
use crate::server_state::{HEALTHY_AFTER_MS, Lease};

fn published() -> Published {
    Published {
        container: "0123456789abcdef".repeat(4),
        pid: 42,
        version: "2025-06-18".into(),
        started_at_ms: 1_700_000_000_000,
    }
}

#[test]
fn session_data_round_trips() {
    let p = published();
    let data = to_data(&p);
    assert_eq!(data["container"], p.container.as_str());
    assert_eq!(data["pid"], 42);
    assert_eq!(data["version"], "2025-06-18");
    assert_eq!(from_data(&data), Some(p.clone()));
    // Through the host's storage (JSON text) too, and within its 64 KiB.
    let text = data.to_string();
    assert!(text.len() < 512, "{text}");
    let back: Value = wharf_sdk::serde_json::from_str(&text).unwrap();
    assert_eq!(from_data(&back), Some(p.clone()));
    // The start time is optional (0: long ago); extra fields are ignored.
    let short = json!({"container": p.container, "pid": 42, "version": "v", "extra": [1]});
    assert_eq!(from_data(&short).map(|s| s.started_at_ms), Some(0));
    let null_time = json!({"container": "c", "pid": 1, "version": "v", "started_at_ms": null});
    assert_eq!(from_data(&null_time).map(|s| s.pid), Some(1));
}

#[test]
fn hostile_session_data_is_a_server_gone_never_a_panic() {
    let good = to_data(&published());
    let with = |field: &str, value: Value| {
        let mut data = good.clone();
        data[field] = value;
        data
    };
    let without = |field: &str| {
        let mut data = good.clone();
        data.as_object_mut().unwrap().remove(field);
        data
    };
    let cases = [
        json!(null),
        json!({}),
        json!([]),
        json!("container"),
        json!(42),
        json!([good.clone()]),
        without("container"),
        without("pid"),
        without("version"),
        with("container", json!(null)),
        with("container", json!(7)),
        with("container", json!("")),
        with("container", json!("a".repeat(129))),
        with("container", json!("../../etc")),
        with("container", json!("abc def")),
        with("container", json!("abc\u{0}")),
        with("container", json!({"id": "abc"})),
        with("pid", json!(0)),
        with("pid", json!(-1)),
        with("pid", json!(1.5)),
        with("pid", json!("42")),
        with("pid", json!(u64::from(u32::MAX) + 1)),
        with("pid", json!(u64::MAX)),
        with("pid", json!(1e300)),
        with("pid", json!(null)),
        with("version", json!("")),
        with("version", json!("a b")),
        with("version", json!("x".repeat(65))),
        with("version", json!("é")),
        with("version", json!(["2025-06-18"])),
        with("started_at_ms", json!(-5)),
        with("started_at_ms", json!("now")),
        with("started_at_ms", json!(1e300)),
    ];
    for data in cases {
        assert_eq!(from_data(&data), None, "{data}");
    }
    // A huge number within its type is taken as it is (the backoff clamps it).
    let huge = with("started_at_ms", json!(u64::MAX));
    assert_eq!(from_data(&huge).map(|s| s.started_at_ms), Some(u64::MAX));
    assert_eq!(
        from_data(&with("pid", json!(u32::MAX))).map(|s| s.pid),
        Some(u32::MAX)
    );
    // A deeply nested or large value is only looked at, not walked.
    let mut deep = json!(1);
    for _ in 0..100 {
        deep = json!({"container": deep});
    }
    assert_eq!(from_data(&deep), None);
    let big = with("version", json!("v".repeat(70_000)));
    assert_eq!(from_data(&big), None);
}

#[test]
fn the_backoff_starts_from_the_kv_record_or_the_start_at_initialize() {
    let now = 1_700_000_010_000;
    let p = Published {
        started_at_ms: now - 400,
        ..published()
    };
    // No record yet: the start at initialize counts, 1 s after it.
    let seeded = backoff_record(None, Some(&p), now);
    assert_eq!((seeded.starts, seeded.last_start_ms), (1, now - 400));
    assert_eq!(seeded.backoff_left(now), Some(600));
    let next = seeded.starting_by("me", now + 600, now + 600);
    assert_eq!(next.starts, 2);
    assert_eq!(next.backoff_left(now + 600), Some(2000));
    // Nothing known: a start now.
    let blank = backoff_record(None, None, now);
    assert_eq!(blank, ServerRecord::default());
    assert_eq!(blank.backoff_left(now), None);
    // A server healthy long enough: a first start again.
    let old = Published {
        started_at_ms: now - HEALTHY_AFTER_MS,
        ..published()
    };
    assert_eq!(
        backoff_record(None, Some(&old), now).backoff_left(now),
        None
    );
    // The kv record wins over the data, loses its lease, and never starts in the future.
    let kept = ServerRecord {
        server: None,
        starts: 5,
        last_start_ms: now - 1000,
        starting: Some(Lease {
            owner: "other".into(),
            until_ms: u64::MAX,
        }),
    };
    let from_kv = backoff_record(Some(kept), Some(&p), now);
    assert_eq!((from_kv.starts, &from_kv.starting), (5, &None));
    assert_eq!(from_kv.backoff_left(now), Some(15_000));
    let future = Published {
        started_at_ms: u64::MAX,
        ..published()
    };
    let clamped = backoff_record(None, Some(&future), now);
    assert_eq!(clamped.last_start_ms, now);
    assert_eq!(clamped.backoff_left(now), Some(1000));
    let skewed = ServerRecord {
        starts: u32::MAX,
        last_start_ms: u64::MAX,
        ..ServerRecord::default()
    };
    let left = backoff_record(Some(skewed), None, now).backoff_left(now);
    assert_eq!(left, Some(crate::server_state::MAX_BACKOFF_MS));
}
