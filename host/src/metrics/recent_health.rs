//! Health at a glance (the console's Health page): per backend, the tool calls of the last
//! [`WINDOW_SECONDS`] in [`INTERVAL_SECONDS`] intervals — how many, how many failed, and
//! their durations in doubling buckets — from which each interval's calls/s, error rate,
//! p50 and p99 are read. Counted as calls end, beside `wharf_tool_calls` and
//! `wharf_tool_call_duration_seconds`; no Prometheus is needed to look.
//!
//! Bounded: one ring of [`INTERVALS`] slots per backend name (a few KiB), for at most
//! [`MAX_BACKENDS`] names (the one called longest ago forgotten first). Only names the host
//! resolved reach it (loaded backends, or `-`).

use hashbrown::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

/// How long the charts reach back, s.
pub const WINDOW_SECONDS: u64 = 15 * 60;
/// One point of a chart, s.
pub const INTERVAL_SECONDS: u64 = 20;
/// Points per chart.
pub const INTERVALS: usize = (WINDOW_SECONDS / INTERVAL_SECONDS) as usize;
/// Backend names kept at most.
const MAX_BACKENDS: usize = 1024;
/// Duration buckets: the first ends at [`FIRST_BUCKET_US`], each next one at twice the
/// last; the last one has no end.
const BUCKETS: usize = 24;
/// The end of the first duration bucket, µs.
const FIRST_BUCKET_US: u64 = 25;

/// One interval's counts.
#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    /// Intervals since the epoch this slot counts (0 = never used).
    interval: u64,
    calls: u64,
    failed: u64,
    buckets: [u32; BUCKETS],
}

/// One backend's ring of slots.
#[derive(Debug)]
struct Ring {
    slots: [Slot; INTERVALS],
    last_interval: u64,
}

impl Ring {
    fn new() -> Self {
        Self {
            slots: [Slot::default(); INTERVALS],
            last_interval: 0,
        }
    }

    fn record(&mut self, interval: u64, failed: bool, took: Duration) {
        let slot = &mut self.slots[(interval % INTERVALS as u64) as usize];
        if slot.interval != interval {
            *slot = Slot {
                interval,
                ..Slot::default()
            };
        }
        slot.calls = slot.calls.saturating_add(1);
        slot.failed = slot.failed.saturating_add(u64::from(failed));
        let bucket = &mut slot.buckets[bucket_of(took)];
        *bucket = bucket.saturating_add(1);
        self.last_interval = self.last_interval.max(interval);
    }
}

/// The bucket a duration falls in.
fn bucket_of(took: Duration) -> usize {
    let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
    let mut end = FIRST_BUCKET_US;
    for bucket in 0..BUCKETS - 1 {
        if us <= end {
            return bucket;
        }
        end = end.saturating_mul(2);
    }
    BUCKETS - 1
}

/// The end of `bucket`, ms (the last bucket answers its start).
fn bucket_end_ms(bucket: usize) -> f64 {
    let bucket = bucket.min(BUCKETS - 2);
    (FIRST_BUCKET_US << bucket) as f64 / 1000.0
}

/// The duration under which `share` (0..1) of the counted calls ended: the end of the
/// bucket that holds it.
fn quantile_ms(buckets: &[u32; BUCKETS], share: f64) -> Option<f64> {
    let total: u64 = buckets.iter().map(|&n| u64::from(n)).sum();
    if total == 0 {
        return None;
    }
    let wanted = ((total as f64) * share).ceil().max(1.0) as u64;
    let mut seen = 0u64;
    for (bucket, &n) in buckets.iter().enumerate() {
        seen += u64::from(n);
        if seen >= wanted {
            return Some(bucket_end_ms(bucket));
        }
    }
    Some(bucket_end_ms(BUCKETS - 1))
}

/// One point of a backend's charts: an interval of [`INTERVAL_SECONDS`] (the last one
/// still running).
#[derive(Debug, Clone, PartialEq)]
pub struct HealthPoint {
    /// When the interval began, ms since the epoch.
    pub at_ms: u64,
    /// Calls ended per second.
    pub calls_per_second: f64,
    /// Failed calls (any code but 0) over calls; 0 without calls.
    pub error_rate: f64,
    /// Half the calls ended within this, ms (the end of its bucket); none without calls.
    pub p50_ms: Option<f64>,
    /// 99 in 100 calls ended within this, ms; none without calls.
    pub p99_ms: Option<f64>,
}

/// A backend's charts, oldest point first.
#[derive(Debug, Clone)]
pub struct BackendHealth {
    /// The backend (`-` for calls no backend was found for).
    pub backend: String,
    /// [`INTERVALS`] points, the last one the running interval.
    pub points: Vec<HealthPoint>,
}

/// Every backend's recent calls.
#[derive(Debug, Default)]
pub struct RecentHealth {
    rings: RwLock<HashMap<Box<str>, Arc<Mutex<Ring>>>>,
}

impl RecentHealth {
    /// One call of `backend` that ended at `now_ms`, after `took`.
    pub fn record(&self, backend: &str, failed: bool, took: Duration, now_ms: u64) {
        let interval = now_ms / (INTERVAL_SECONDS * 1000);
        // A known backend's ring is counted into under the read lock: no handle is cloned
        // on a call's path.
        if let Ok(rings) = self.rings.read()
            && let Some(ring) = rings.get(backend)
        {
            if let Ok(mut ring) = ring.lock() {
                ring.record(interval, failed, took);
            }
            return;
        }
        let Ok(mut rings) = self.rings.write() else {
            return;
        };
        if !rings.contains_key(backend) && rings.len() >= MAX_BACKENDS {
            let oldest = rings
                .iter()
                .min_by_key(|(_, r)| r.lock().map_or(0, |r| r.last_interval))
                .map(|(name, _)| name.clone());
            if let Some(oldest) = oldest {
                rings.remove(&oldest);
            }
        }
        let ring = rings
            .entry(backend.into())
            .or_insert_with(|| Arc::new(Mutex::new(Ring::new())));
        if let Ok(mut ring) = ring.lock() {
            ring.record(interval, failed, took);
        }
    }

    /// Every backend's charts at `now_ms`, by name; backends without a call in the window
    /// are left out.
    pub fn charts(&self, now_ms: u64) -> Vec<BackendHealth> {
        let interval_ms = INTERVAL_SECONDS * 1000;
        let now_interval = now_ms / interval_ms;
        let first = now_interval.saturating_sub(INTERVALS as u64 - 1);
        let rings: Vec<(String, Arc<Mutex<Ring>>)> = match self.rings.read() {
            Ok(rings) => rings
                .iter()
                .map(|(name, ring)| (name.to_string(), ring.clone()))
                .collect(),
            Err(_) => return Vec::new(),
        };
        let mut charts: Vec<BackendHealth> = rings
            .into_iter()
            .filter_map(|(backend, ring)| {
                let ring = ring.lock().ok()?;
                if ring.last_interval < first {
                    return None;
                }
                let points = (first..=now_interval)
                    .map(|interval| {
                        let slot = ring.slots[(interval % INTERVALS as u64) as usize];
                        let slot = if slot.interval == interval {
                            slot
                        } else {
                            Slot::default()
                        };
                        let at_ms = interval * interval_ms;
                        // The running interval has lasted only this long (at least 1 s).
                        let seconds = if interval == now_interval {
                            ((now_ms - at_ms) as f64 / 1000.0).max(1.0)
                        } else {
                            INTERVAL_SECONDS as f64
                        };
                        HealthPoint {
                            at_ms,
                            calls_per_second: slot.calls as f64 / seconds,
                            error_rate: if slot.calls == 0 {
                                0.0
                            } else {
                                slot.failed as f64 / slot.calls as f64
                            },
                            p50_ms: quantile_ms(&slot.buckets, 0.5),
                            p99_ms: quantile_ms(&slot.buckets, 0.99),
                        }
                    })
                    .collect();
                Some(BackendHealth { backend, points })
            })
            .collect();
        charts.sort_by(|a, b| a.backend.cmp(&b.backend));
        charts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1000;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn buckets_double_from_25_microseconds() {
        assert_eq!(bucket_of(Duration::from_micros(0)), 0);
        assert_eq!(bucket_of(Duration::from_micros(25)), 0);
        assert_eq!(bucket_of(Duration::from_micros(26)), 1);
        assert_eq!(bucket_of(Duration::from_micros(50)), 1);
        assert_eq!(bucket_of(ms(1)), 6, "0.8 .. 1.6 ms");
        assert_eq!(bucket_of(Duration::from_secs(100_000)), BUCKETS - 1);
        assert_eq!(bucket_of(Duration::MAX), BUCKETS - 1);
        assert_eq!(bucket_end_ms(6), 1.6);
    }

    #[test]
    fn an_interval_reads_as_rate_errors_and_quantiles() {
        let h = RecentHealth::default();
        let start = 1_000 * INTERVAL_SECONDS * S;
        for i in 0..100u64 {
            // 98 fast calls, 2 slow failures.
            let (failed, took) = if i < 98 {
                (false, ms(1))
            } else {
                (true, ms(500))
            };
            h.record("echo", failed, took, start + i);
        }
        h.record("other", false, ms(1), start);
        let charts = h.charts(start + INTERVAL_SECONDS * S);
        assert_eq!(
            charts
                .iter()
                .map(|c| c.backend.as_str())
                .collect::<Vec<_>>(),
            ["echo", "other"]
        );
        let echo = &charts[0].points;
        assert_eq!(echo.len(), INTERVALS);
        let full = &echo[INTERVALS - 2];
        assert_eq!(full.at_ms, start);
        assert_eq!(full.calls_per_second, 100.0 / INTERVAL_SECONDS as f64);
        assert_eq!(full.error_rate, 0.02);
        assert_eq!(full.p50_ms, Some(1.6));
        assert_eq!(full.p99_ms, Some(819.2), "the slow ones' bucket");
        let running = &echo[INTERVALS - 1];
        assert_eq!((running.calls_per_second, running.p50_ms), (0.0, None));
        assert_eq!(echo[0].p99_ms, None);
    }

    #[test]
    fn the_running_interval_counts_per_second_so_far() {
        let h = RecentHealth::default();
        let start = 7 * INTERVAL_SECONDS * S;
        for _ in 0..10 {
            h.record("echo", false, ms(1), start + 4 * S);
        }
        let last = h.charts(start + 5 * S)[0].points.last().cloned().unwrap();
        assert_eq!(last.calls_per_second, 2.0);
    }

    #[test]
    fn old_intervals_leave_the_window_and_slots_are_reused() {
        let h = RecentHealth::default();
        let interval = INTERVAL_SECONDS * S;
        h.record("echo", true, ms(1), 0);
        let later = INTERVALS as u64 * interval;
        h.record("echo", false, ms(1), later);
        let points = &h.charts(later)[0].points;
        assert_eq!(points.iter().filter(|p| p.p50_ms.is_some()).count(), 1);
        assert_eq!(
            points.last().unwrap().error_rate,
            0.0,
            "the reused slot began anew"
        );
        assert!(h.charts(later + INTERVALS as u64 * interval).is_empty());
    }

    #[test]
    fn the_backends_kept_are_bounded() {
        let h = RecentHealth::default();
        for i in 0..(MAX_BACKENDS as u64 + 5) {
            h.record(&format!("b{i}"), false, ms(1), i * INTERVAL_SECONDS * S);
        }
        assert_eq!(h.rings.read().unwrap().len(), MAX_BACKENDS);
        assert!(
            !h.rings.read().unwrap().contains_key("b0"),
            "the oldest went first"
        );
    }
}
