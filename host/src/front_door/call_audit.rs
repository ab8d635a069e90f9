//! A tool call's audit line: what it shows of the arguments, and where it goes (the audit
//! sink's writer builds it, off the request path; without a sink it is a tracing event for
//! the human log). ARCHITECTURE.md, "The audit sink".

use crate::tenant::Tenant;
use serde_json::Value;

/// Arguments up to about this many bytes (strings, keys and a little per value) go to the
/// audit writer as a copy, redacted there; larger ones are redacted on the request path, so
/// a queue of lines the writer has not reached holds no caller's large payloads.
const COPY_BUDGET: usize = 1024;

/// A call's arguments as its audit line will show them ([`audit_args`]).
pub(super) enum AuditArgs {
    /// A copy of small arguments, redacted by the audit writer.
    Copy(Value),
    /// Already redacted (large arguments, or the human log's line).
    Redacted(String),
    /// No line is written.
    None,
}

impl AuditArgs {
    fn into_text(self) -> String {
        match self {
            Self::Copy(args) => audit_text(&args),
            Self::Redacted(text) => text,
            Self::None => String::new(),
        }
    }
}

/// The arguments as a call's audit line needs them, taken before the call consumes them.
pub(super) fn audit_args(args: &Value) -> AuditArgs {
    if crate::audit::active() {
        let mut budget = COPY_BUDGET;
        if fits(args, &mut budget) {
            return AuditArgs::Copy(args.clone());
        }
        AuditArgs::Redacted(audit_text(args))
    } else if tracing::enabled!(target: "wharf::audit", tracing::Level::INFO) {
        AuditArgs::Redacted(audit_text(args))
    } else {
        AuditArgs::None
    }
}

/// Whether `value` costs at most `budget` (its strings and keys, 8 bytes per value),
/// stopping at the first value past it.
fn fits(value: &Value, budget: &mut usize) -> bool {
    let own = match value {
        Value::String(s) => s.len(),
        _ => 0,
    } + 8;
    let Some(left) = budget.checked_sub(own) else {
        return false;
    };
    *budget = left;
    match value {
        Value::Object(map) => map.iter().all(|(key, v)| {
            *budget = budget.saturating_sub(key.len());
            *budget > 0 && fits(v, budget)
        }),
        Value::Array(items) => items.iter().all(|v| fits(v, budget)),
        _ => true,
    }
}

/// Arguments as an audit line shows them: secrets and content replaced, on one line.
fn audit_text(args: &Value) -> String {
    crate::redact::one_line(&crate::redact::for_audit(args).to_string())
}

/// A call's audit line, but for its arguments.
pub(super) struct CallLine<'a> {
    pub tenant: &'a Tenant,
    pub tool: &'a str,
    pub backend: &'a str,
    pub session: &'a str,
    pub duration_ms: u64,
    pub code: u32,
    pub refused: &'a str,
    pub trace_id: &'a str,
}

impl CallLine<'_> {
    /// The call as the live view shows it: this line's fields, never the arguments.
    pub(super) fn live(&self) -> crate::live_calls::LiveCall {
        crate::live_calls::LiveCall {
            at_ms: crate::clock::now_ms(),
            tenant: self.tenant.to_string(),
            tool: self.tool.to_string(),
            backend: self.backend.to_string(),
            session: self.session.to_string(),
            code: self.code,
            duration_ms: self.duration_ms,
            refused: self.refused.to_string(),
        }
    }

    /// To the audit sink, built by its writer (the call pays for copies of the fields, not
    /// for redacting and formatting them), or as a tracing event when no sink runs.
    pub(super) fn write(&self, args: AuditArgs) {
        if matches!(args, AuditArgs::None) {
            return;
        }
        if crate::audit::active() {
            let at = chrono::Utc::now();
            let owned = [
                self.tenant.to_string(),
                self.tool.to_string(),
                self.backend.to_string(),
                self.session.to_string(),
                self.refused.to_string(),
                self.trace_id.to_string(),
            ];
            let (duration_ms, code) = (self.duration_ms, self.code);
            let build = Box::new(move || {
                let [tenant, tool, backend, session, refused, trace_id] = &owned;
                let mut line = crate::audit::LineBuilder::at(at);
                line.text("event", "tool_call")
                    .text("tenant", tenant)
                    .text("tool", tool)
                    .text("backend", backend)
                    .text("session", session)
                    .number("duration_ms", duration_ms)
                    .number("code", u64::from(code))
                    .text("refused", refused)
                    .text("trace_id", trace_id)
                    .text("args", &args.into_text());
                line.finish()
            });
            // The sink never stops once started; were it gone, the line goes to the log.
            if let Err(build) = crate::audit::defer(build) {
                let line = build();
                tracing::info!(target: "wharf::audit", "{}", String::from_utf8_lossy(&line).trim_end());
            }
            return;
        }
        tracing::info!(
            target: "wharf::audit",
            event = "tool_call",
            tenant = %self.tenant,
            tool = self.tool,
            backend = self.backend,
            session = self.session,
            duration_ms = self.duration_ms,
            code = self.code,
            refused = self.refused,
            trace_id = self.trace_id,
            args = args.into_text().as_str(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::{COPY_BUDGET, fits};
    use serde_json::json;

    fn fits_budget(value: &serde_json::Value) -> bool {
        let mut budget = COPY_BUDGET;
        fits(value, &mut budget)
    }

    #[test]
    fn small_arguments_are_copied_and_large_or_wide_ones_are_not() {
        assert!(fits_budget(&json!({})));
        assert!(fits_budget(
            &json!({"text": "hi", "times": 2, "path": "/work/a"})
        ));
        assert!(!fits_budget(&json!({"content": "x".repeat(COPY_BUDGET)})));
        let wide: serde_json::Map<String, serde_json::Value> =
            (0..200).map(|i| (format!("k{i}"), json!(i))).collect();
        assert!(!fits_budget(&serde_json::Value::Object(wide)));
        assert!(!fits_budget(&json!(vec![0; 200])));
        let mut deep = json!(1);
        for _ in 0..200 {
            deep = json!([deep]);
        }
        assert!(!fits_budget(&deep));
    }
}
