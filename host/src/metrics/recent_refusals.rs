//! Quota refusals of the last minutes, per tenant and limit (`/v1/quotas`, the console's
//! Tenants page): one count per minute for the last [`WINDOW_MINUTES`], beside the
//! counters `/metrics` keeps since start. Bounded: [`MAX_SERIES`] (tenant, limit) pairs,
//! the one refused longest ago forgotten first.

use std::collections::HashMap;
use std::sync::Mutex;

/// Minutes a refusal is counted for.
pub const WINDOW_MINUTES: u64 = 15;
/// (tenant, limit) pairs kept at most.
const MAX_SERIES: usize = 1024;

/// The window of every (tenant, limit) pair.
#[derive(Debug, Default)]
pub struct RecentRefusals {
    series: Mutex<HashMap<(String, String), Minutes>>,
}

/// Counts by minute (minutes since the epoch), oldest first, within the window.
#[derive(Debug, Default)]
struct Minutes(Vec<(u64, u64)>);

impl Minutes {
    fn add(&mut self, minute: u64) {
        self.0.retain(|(m, _)| m + WINDOW_MINUTES > minute);
        match self.0.last_mut() {
            Some((m, n)) if *m == minute => *n = n.saturating_add(1),
            _ => self.0.push((minute, 1)),
        }
    }

    fn within(&self, minute: u64) -> u64 {
        self.0
            .iter()
            .filter(|(m, _)| m + WINDOW_MINUTES > minute)
            .map(|(_, n)| n)
            .sum()
    }

    fn last_minute(&self) -> u64 {
        self.0.last().map_or(0, |(m, _)| *m)
    }
}

impl RecentRefusals {
    /// One refusal of `tenant` by `limit` at `now_ms`.
    pub fn record(&self, tenant: &str, limit: &str, now_ms: u64) {
        let minute = now_ms / 60_000;
        let Ok(mut series) = self.series.lock() else {
            return;
        };
        let key = (tenant.to_string(), limit.to_string());
        if !series.contains_key(&key) && series.len() >= MAX_SERIES {
            let oldest = series
                .iter()
                .min_by_key(|(_, m)| m.last_minute())
                .map(|(k, _)| k.clone());
            if let Some(oldest) = oldest {
                series.remove(&oldest);
            }
        }
        series.entry(key).or_default().add(minute);
    }

    /// `tenant`'s refusals of the last [`WINDOW_MINUTES`] at `now_ms`, by limit (sorted).
    pub fn of(&self, tenant: &str, now_ms: u64) -> Vec<(String, u64)> {
        let minute = now_ms / 60_000;
        let Ok(series) = self.series.lock() else {
            return Vec::new();
        };
        let mut found: Vec<(String, u64)> = series
            .iter()
            .filter(|((t, _), _)| t == tenant)
            .map(|((_, limit), m)| (limit.clone(), m.within(minute)))
            .filter(|(_, n)| *n > 0)
            .collect();
        found.sort();
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: u64 = 60_000;

    #[test]
    fn refusals_count_for_fifteen_minutes_per_tenant_and_limit() {
        let r = RecentRefusals::default();
        r.record("a", "calls_per_second", 0);
        r.record("a", "calls_per_second", MIN);
        r.record("a", "sessions", MIN);
        r.record("b", "sessions", MIN);
        assert_eq!(
            r.of("a", MIN),
            vec![("calls_per_second".into(), 2), ("sessions".into(), 1)]
        );
        assert_eq!(
            r.of("a", 15 * MIN),
            vec![("calls_per_second".into(), 1), ("sessions".into(), 1)]
        );
        assert_eq!(r.of("a", 16 * MIN), vec![]);
        assert_eq!(r.of("c", MIN), vec![]);
    }

    #[test]
    fn the_pairs_kept_are_bounded() {
        let r = RecentRefusals::default();
        for i in 0..(MAX_SERIES as u64 + 10) {
            r.record(&format!("t{i}"), "sessions", i * MIN);
        }
        assert_eq!(r.series.lock().unwrap().len(), MAX_SERIES);
        assert_eq!(r.of("t0", 10 * MIN), vec![], "the oldest went first");
        let last = MAX_SERIES as u64 + 9;
        assert_eq!(
            r.of(&format!("t{last}"), last * MIN),
            vec![("sessions".into(), 1)]
        );
    }
}
