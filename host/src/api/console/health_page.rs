//! The console's Health page (`/console/health`): for each backend the viewer may use,
//! calls/s, error rate, p50 and p99 over the last 15 minutes as small charts, drawn as
//! inline SVG from the host's own counts (`metrics::recent_health`); no script, no
//! Prometheus. The page reloads itself every interval (`data-refresh-s`, `app.js`).

use super::pages::{html, layout};
use super::{Console, Viewer};
use crate::metrics::{BackendHealth, INTERVAL_SECONDS, WINDOW_SECONDS};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use maud::{Markup, html};
use std::fmt::Write;
use std::sync::Arc;

/// A chart's size, px.
const WIDTH: f64 = 120.0;
const HEIGHT: f64 = 36.0;

/// `GET /console/health`.
pub async fn page(State(console): State<Arc<Console>>, viewer: Viewer) -> Response {
    let charts: Vec<BackendHealth> = console
        .wharf
        .metrics()
        .recent_health()
        .into_iter()
        .filter(|h| viewer.caller.may_use(&h.backend, None))
        .collect();
    let body = html! {
        h1 { "Health " span.count { "(" (charts.len()) ")" } }
        p data-refresh-s=(INTERVAL_SECONDS) {
            "Tool calls of the last " (WINDOW_SECONDS / 60) " minutes on this node, per backend, in "
            (INTERVAL_SECONDS) " s intervals (the last one still running). An error is any code but 0; "
            "p50 and p99 are the end of the duration bucket (doubling from 25 µs) that holds them. "
            "Backends without a call in the window are not shown."
        }
        @if charts.is_empty() {
            p.empty { "No tool call in the last " (WINDOW_SECONDS / 60) " minutes." }
        } @else {
            table.health {
                thead { tr {
                    th { "Backend" } th { "Calls/s" } th { "Error rate" } th { "p50" } th { "p99" }
                } }
                tbody {
                    @for h in &charts { (row(h)) }
                }
            }
        }
    };
    html(StatusCode::OK, layout("Health", Some(&viewer), body))
}

fn row(h: &BackendHealth) -> Markup {
    let rate: Vec<Option<f64>> = h.points.iter().map(|p| Some(p.calls_per_second)).collect();
    let errors: Vec<Option<f64>> = h
        .points
        .iter()
        .map(|p| (p.calls_per_second > 0.0).then_some(p.error_rate * 100.0))
        .collect();
    let p50: Vec<Option<f64>> = h.points.iter().map(|p| p.p50_ms).collect();
    let p99: Vec<Option<f64>> = h.points.iter().map(|p| p.p99_ms).collect();
    let last = h.points.last();
    html! {
        tr data-backend=(h.backend) {
            td.backend { (h.backend) }
            td.rate { (chart(&rate, "calls/s", last.map(|p| p.calls_per_second))) }
            td.errors { (chart(&errors, "%", last.filter(|p| p.calls_per_second > 0.0).map(|p| p.error_rate * 100.0))) }
            td.p50 { (chart(&p50, "ms", last.and_then(|p| p.p50_ms))) }
            td.p99 { (chart(&p99, "ms", last.and_then(|p| p.p99_ms))) }
        }
    }
}

/// One chart: a line over the points that have a value, scaled to the largest, with the
/// latest value and the largest written beside it.
fn chart(values: &[Option<f64>], unit: &str, now: Option<f64>) -> Markup {
    let top = values.iter().flatten().fold(0.0_f64, |a, &b| a.max(b));
    let points = polyline(values, top);
    let now = now.map_or_else(|| "–".to_string(), |v| format!("{} {unit}", figure(v)));
    html! {
        div.chart {
            svg width=(WIDTH) height=(HEIGHT) viewBox={ "0 0 " (WIDTH) " " (HEIGHT) } role="img"
                aria-label={ "the last 15 minutes, at most " (figure(top)) " " (unit) } {
                line x1="0" y1=(HEIGHT - 0.5) x2=(WIDTH) y2=(HEIGHT - 0.5) stroke="#d9dde3" stroke-width="1" {}
                polyline points=(points) fill="none" stroke="#1f6fb2" stroke-width="1.5" {}
            }
            span.now { (now) }
            span.top { "max " (figure(top)) }
        }
    }
}

/// The SVG points of `values` (a gap where a value is missing is drawn at 0 only for
/// rates; quantiles without calls are left out), scaled so `top` is the chart's top.
fn polyline(values: &[Option<f64>], top: f64) -> String {
    let step = if values.len() > 1 {
        WIDTH / (values.len() - 1) as f64
    } else {
        0.0
    };
    let scale = if top > 0.0 { (HEIGHT - 2.0) / top } else { 0.0 };
    let mut out = String::new();
    for (i, value) in values.iter().enumerate() {
        if let Some(v) = value {
            let y = HEIGHT - 1.0 - v * scale;
            let _ = write!(out, "{:.1},{:.1} ", i as f64 * step, y);
        }
    }
    out.trim_end().to_string()
}

/// A figure as people read it: two significant places below 10, none above.
fn figure(v: f64) -> String {
    if v >= 10.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::HealthPoint;

    #[test]
    fn charts_scale_to_their_largest_value_and_skip_missing_points() {
        assert_eq!(
            polyline(&[Some(0.0), None, Some(10.0)], 10.0),
            "0.0,35.0 120.0,1.0"
        );
        assert_eq!(
            polyline(&[Some(0.0), Some(0.0)], 0.0),
            "0.0,35.0 120.0,35.0"
        );
        assert_eq!(polyline(&[], 0.0), "");
        assert_eq!(figure(123.4), "123");
        assert_eq!(figure(1.25), "1.2");
        assert_eq!(figure(0.123), "0.12");
    }

    #[test]
    fn a_backend_name_is_text_in_the_row() {
        let h = BackendHealth {
            backend: "<script>x</script>".into(),
            points: vec![HealthPoint {
                at_ms: 0,
                calls_per_second: 2.0,
                error_rate: 0.5,
                p50_ms: Some(0.1),
                p99_ms: None,
            }],
        };
        let m = row(&h).into_string();
        assert!(!m.contains("<script>x"), "{m}");
        assert!(m.contains("50 %"), "{m}");
    }
}
