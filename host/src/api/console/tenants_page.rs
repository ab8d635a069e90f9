//! The console's Tenants page (`/console/tenants`): each tenant's quota limits and use and
//! its refusals of the last 15 minutes, from the same report as `GET /v1/quotas` (a `read`
//! token sees its own tenant, an admin every tenant the host knows).

use super::pages::{html, layout, refusal, text};
use super::{Console, Viewer};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use maud::{Markup, html};
use serde_json::Value;
use std::sync::Arc;

/// `GET /console/tenants`.
pub async fn page(State(console): State<Arc<Console>>, viewer: Viewer) -> Response {
    let caller = &viewer.caller;
    let report = match console
        .wharf
        .quota_report(caller.session_tenant(), &caller.tenant)
        .await
    {
        Ok(report) => report,
        Err(e) => {
            return refusal(
                StatusCode::SERVICE_UNAVAILABLE,
                "Tenants unavailable",
                &e.message,
            );
        }
    };
    let tenants: Vec<Value> = match report.get("tenants").and_then(Value::as_array) {
        Some(all) => all.clone(),
        None => vec![report],
    };
    let body = html! {
        h1 { "Tenants " span.count { "(" (tenants.len()) ")" } }
        p { "Quota limits (unset: no limit) and use; rates are per node. Refusals are this node's of the last 15 minutes." }
        table.tenants {
            thead { tr {
                th { "Tenant" } th { "Limits" } th { "Sessions" } th { "Calls in progress" } th { "Refused (15 min)" }
            } }
            tbody {
                @for t in &tenants {
                    tr data-tenant=(text(&t["tenant"])) {
                        td.tenant { (text(&t["tenant"])) }
                        td.limits { (pairs(&t["limits"])) }
                        td.sessions { (text(&t["usage"]["sessions"])) }
                        td.in-progress { (pairs(&t["usage"]["calls_in_progress"])) }
                        td.refused { (pairs(&t["refused_last_15_minutes"])) }
                    }
                }
            }
        }
    };
    html(StatusCode::OK, layout("Tenants", Some(&viewer), body))
}

/// An object's set fields as `name: value` lines; "none" when no field is set.
fn pairs(object: &Value) -> Markup {
    let set: Vec<(&String, &Value)> = object
        .as_object()
        .map(|o| o.iter().filter(|(_, v)| !v.is_null()).collect())
        .unwrap_or_default();
    html! {
        @if set.is_empty() {
            span.empty { "none" }
        } @else {
            @for (name, value) in set {
                div { code { (name) } ": " (limit_text(value)) }
            }
        }
    }
}

/// A limit as people read it: `(rate, burst, scope)` as `rate/s, burst B (scope)`,
/// `(limit, scope)` as `limit (scope)`, a plain value as itself.
fn limit_text(value: &Value) -> String {
    match value.as_array().map(Vec::as_slice) {
        Some([rate, burst, scope]) => {
            format!("{}/s, burst {} ({})", text(rate), text(burst), text(scope))
        }
        Some([limit, scope]) => format!("{} ({})", text(limit), text(scope)),
        _ => text(value),
    }
}

#[cfg(test)]
mod tests {
    use super::limit_text;
    use serde_json::json;

    #[test]
    fn limits_read_like_sentences() {
        assert_eq!(
            limit_text(&json!([5, 10, "tenant"])),
            "5/s, burst 10 (tenant)"
        );
        assert_eq!(limit_text(&json!([3, "backend"])), "3 (backend)");
        assert_eq!(limit_text(&json!(32)), "32");
    }
}
