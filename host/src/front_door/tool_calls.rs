//! Running a tool: resolving its name, checking its arguments, finding its session, and
//! the audit line and metrics every call leaves.

use super::Wharf;
use crate::error_code::{Code, WharfError};
use crate::runtime::{LoadedBackend, ToolCall};
use crate::tenant::Tenant;
use crate::tool::{SessionNeed, ToolResult};
use serde::Deserialize;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// A request to run a tool.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(example = serde_json::json!({"tool": "echo:say", "args": {"text": "hi", "times": 2}}))]
pub struct CallRequest {
    /// `backend:action` or an alias.
    pub tool: String,
    /// Arguments (a JSON object).
    #[serde(default = "empty_object")]
    pub args: Value,
    /// The session to run in.
    #[serde(default)]
    pub session_id: Option<String>,
    /// Wall-clock limit; capped by the backend's own.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

fn empty_object() -> Value {
    Value::Object(Default::default())
}

/// What a call produced, with where it ran.
#[derive(Debug, Clone)]
pub struct CallOutcome {
    /// The canonical tool name.
    pub tool: String,
    /// The backend.
    pub backend: String,
    /// The session, if any.
    pub session_id: Option<String>,
    /// The result.
    pub result: ToolResult,
}

/// Where a call ran, or got to before it failed, for the envelope's `meta`.
#[derive(Debug, Clone, Default)]
pub struct CallPlace {
    /// Canonical tool name, once resolved.
    pub tool: Option<String>,
    /// Backend, once resolved.
    pub backend: Option<String>,
    /// Session, if given.
    pub session_id: Option<String>,
}

impl CallOutcome {
    /// The tool's result, and where it ran.
    pub fn into_parts(self) -> (ToolResult, CallPlace) {
        let place = CallPlace {
            tool: Some(self.tool),
            backend: Some(self.backend),
            session_id: self.session_id,
        };
        (self.result, place)
    }
}

/// A call resolved, permitted and admitted under its tenant's quotas (the concurrency slot
/// is held until this is dropped).
pub(super) struct Admitted {
    /// The tool's backend.
    pub backend: Arc<LoadedBackend>,
    /// The tool.
    pub tool: AdmittedTool,
    /// Where the call is, for the envelope's `meta`.
    pub place: CallPlace,
    _admission: crate::quotas::CallAdmission,
}

/// A tool name resolved in the registry: its backend and its action.
pub(super) type ResolvedTool = (Arc<LoadedBackend>, String);

/// What a call needs of its tool (not the whole description: its schemas are not copied
/// per call).
pub(super) struct AdmittedTool {
    /// The action name.
    pub action: String,
    /// Whether it takes a session.
    pub session: SessionNeed,
}

/// A call's arguments as its audit line will show them ([`Wharf::audit_args`]).
pub(super) enum AuditArgs {
    /// A copy, redacted by the audit writer when it builds the line.
    Deferred(Value),
    /// Already redacted, for the human log (no audit sink runs).
    Written(String),
    /// No line is written.
    None,
}

/// Arguments as an audit line shows them: secrets and content replaced, on one line.
fn audit_text(args: &Value) -> String {
    crate::redact::one_line(&crate::redact::for_audit(args).to_string())
}

/// A call's audit line, but for its arguments.
struct CallLine<'a> {
    tenant: &'a Tenant,
    tool: &'a str,
    backend: &'a str,
    session: &'a str,
    duration_ms: u64,
    code: u32,
    refused: &'a str,
    trace_id: &'a str,
}

impl CallLine<'_> {
    /// To the audit sink, built by its writer (the call pays for copies of the fields, not
    /// for redacting and formatting them), or as a tracing event when no sink runs.
    fn write(&self, args: AuditArgs) {
        let args = match args {
            AuditArgs::Deferred(args) => {
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
                        .text("args", &audit_text(&args));
                    line.finish()
                });
                // The sink never stops once started; were it gone, the line goes to the log.
                if let Err(build) = crate::audit::defer(build) {
                    let line = build();
                    tracing::info!(target: "wharf::audit", "{}", String::from_utf8_lossy(&line).trim_end());
                }
                return;
            }
            AuditArgs::Written(text) => text,
            AuditArgs::None => return,
        };
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
            args = args.as_str(),
        );
    }
}

/// The name a caller's quotas and pool turns go by: its tenant, or one name for admins.
fn quota_tenant(tenant: &Tenant) -> &str {
    tenant.only().unwrap_or(crate::quotas::ADMIN_TENANT)
}

impl Wharf {
    /// Runs `work` (one call) as the tenant's, then writes the call's audit line and
    /// metrics, refusals included. The audit line never carries content or commands (only
    /// their length and sha256).
    ///
    /// `args` is [`Wharf::audit_args`] of the call's arguments. `work` comes boxed from
    /// where it is made, so only a pointer moves through this and the tenant's scope.
    pub(super) async fn audited<F>(
        &self,
        tenant: &Tenant,
        args: AuditArgs,
        trace_id: Option<String>,
        work: std::pin::Pin<Box<F>>,
    ) -> Result<CallOutcome, (WharfError, CallPlace)>
    where
        F: Future<Output = Result<CallOutcome, (WharfError, CallPlace)>>,
    {
        let started = std::time::Instant::now();
        let who = quota_tenant(tenant);
        let outcome = crate::quotas::as_tenant(who, work).await;
        let refused = self.record_tenant_call(who, &outcome);
        let (code, tool, backend, session) = match &outcome {
            Ok(o) => (
                0,
                Some(o.tool.as_str()),
                Some(o.backend.as_str()),
                o.session_id.as_deref(),
            ),
            Err((e, place)) => (
                e.code.as_u32(),
                place.tool.as_deref(),
                place.backend.as_deref(),
                place.session_id.as_deref(),
            ),
        };
        let (tool, backend) = (tool.unwrap_or("-"), backend.unwrap_or("-"));
        let elapsed = started.elapsed();
        let line = CallLine {
            tenant,
            tool,
            backend,
            session: session.unwrap_or("-"),
            duration_ms: u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
            code,
            refused,
            trace_id: trace_id.as_deref().unwrap_or("-"),
        };
        line.write(args);
        self.metrics.record_call(backend, tool, code, elapsed);
        outcome
    }

    /// The arguments as a call's audit line needs them, taken before the call consumes
    /// them: a copy for the audit writer to redact, the redacted text for the human log
    /// when no audit sink runs, or nothing when neither writes the line.
    pub(super) fn audit_args(args: &Value) -> AuditArgs {
        if crate::audit::active() {
            AuditArgs::Deferred(args.clone())
        } else if tracing::enabled!(target: "wharf::audit", tracing::Level::INFO) {
            AuditArgs::Written(audit_text(args))
        } else {
            AuditArgs::None
        }
    }

    /// Counts a call for its tenant; the quota that refused it (for the audit line), or `-`.
    fn record_tenant_call<'a>(
        &self,
        who: &str,
        outcome: &'a Result<CallOutcome, (WharfError, CallPlace)>,
    ) -> &'a str {
        let tenants = &self.metrics.tenants;
        tenants.record_call(who);
        let limit = match outcome {
            Err((e, _)) if e.code == Code::RateLimited || e.code == Code::BackendUnavailable => e
                .data
                .as_ref()
                .and_then(|d| d.get("limit").or_else(|| d.get("reason")))
                .and_then(Value::as_str),
            _ => None,
        };
        match limit {
            Some(limit) => {
                if limit != "busy" {
                    tenants.record_refusal(who, limit);
                }
                limit
            }
            None => "-",
        }
    }

    /// Resolves the tool once (unless `resolved` already did), checks the caller's allowlist (`permit`) and admits the call
    /// under the tenant's quotas, before anything is paid for (a session, a sandbox).
    pub(super) fn admit(
        &self,
        tenant: &Tenant,
        request: &CallRequest,
        resolved: Option<ResolvedTool>,
        permit: impl Fn(&str, &str) -> Result<(), WharfError>,
    ) -> Result<Admitted, Box<(WharfError, CallPlace)>> {
        let mut place = CallPlace {
            session_id: request.session_id.clone(),
            ..CallPlace::default()
        };
        let (backend, action) = match resolved {
            Some(found) => found,
            None => self
                .resolve_tool(&request.tool)
                .map_err(|e| Box::new((e, place.clone())))?,
        };
        place.tool = Some(format!("{}:{action}", backend.name));
        place.backend = Some(backend.name.to_string());
        permit(&backend.name, &action).map_err(|e| Box::new((e, place.clone())))?;
        let admission = self
            .services
            .quotas
            .admit_call(quota_tenant(tenant), &backend.name)
            .map_err(|e| Box::new((e, place.clone())))?;
        let Some(session) = backend.tool(&action).map(|t| t.session) else {
            return Err(Box::new((
                WharfError::invalid_request(format!("unknown tool `{}`", request.tool)),
                place,
            )));
        };
        Ok(Admitted {
            backend,
            tool: AdmittedTool { action, session },
            place,
            _admission: admission,
        })
    }

    /// Runs an admitted call in `request.session_id` (if any).
    pub(super) async fn run_admitted(
        &self,
        tenant: &Tenant,
        admitted: Admitted,
        request: CallRequest,
        trace_id: Option<String>,
    ) -> Result<CallOutcome, (WharfError, CallPlace)> {
        let Admitted {
            backend,
            tool,
            mut place,
            _admission,
        } = admitted;
        place.session_id = request.session_id.clone();
        self.call_resolved(tenant, &backend, &tool, request, trace_id)
            .await
            .map_err(|e| {
                let e = self.explain_session_error(e, place.session_id.as_deref());
                (e, place)
            })
    }

    async fn call_resolved(
        &self,
        tenant: &Tenant,
        backend: &Arc<LoadedBackend>,
        tool: &AdmittedTool,
        request: CallRequest,
        trace_id: Option<String>,
    ) -> Result<CallOutcome, WharfError> {
        backend.validate_args(&tool.action, &request.args)?;
        let limit = backend.call_timeout();
        let timeout = request
            .timeout_ms
            .map(Duration::from_millis)
            .map_or(limit, |t| t.min(limit));
        let canonical = format!("{}:{}", backend.name, tool.action);
        // A stateless tool never receives the caller's session; if it then asks for one,
        // the fault is the declaration, and the answer says how to fix it.
        let undeclared_session = match (&request.session_id, tool.session) {
            (Some(id), SessionNeed::None) => Some(id.clone()),
            _ => None,
        };
        let session_id = match (&request.session_id, tool.session) {
            (_, SessionNeed::None) => None,
            (Some(id), _) => Some(id.clone()),
            (None, SessionNeed::Required) => {
                return Err(WharfError::session_not_found(format!(
                    "`{canonical}` needs a session: create one with POST /v1/sessions {{\"backend\": \"{}\"}} and pass its id as session_id",
                    backend.name
                )));
            }
            (None, SessionNeed::Optional) => None,
        };
        let Some(session_id) = session_id else {
            let result = backend
                .call_tool(ToolCall {
                    action: tool.action.clone(),
                    args: request.args,
                    session: None,
                    timeout,
                    trace_id,
                })
                .await
                .map_err(|e| match undeclared_session {
                    Some(id) if e.code == Code::SessionNotFound => WharfError::new(
                        Code::ExecutionError,
                        format!(
                            "`{canonical}` was called with session `{id}` but its backend declares it without a session, so the session was not passed: the backend must declare the tool with `.session(SessionNeed::Required)` (or `Optional`), or `#[tool(session = \"required\")]` (backend said: {})",
                            e.message
                        ),
                    ),
                    _ => e,
                })?;
            return Ok(CallOutcome {
                tool: canonical,
                backend: backend.name.to_string(),
                session_id: None,
                result,
            });
        };
        let (record, _one_at_a_time) = self.sessions.begin_call(tenant, &session_id).await?;
        if record.backend != *backend.name {
            return Err(WharfError::session_not_found(format!(
                "session `{session_id}` belongs to backend `{}`, not `{}`",
                record.backend, backend.name
            )));
        }
        let result = backend
            .call_tool(ToolCall {
                action: tool.action.clone(),
                args: request.args,
                session: Some(record.view()),
                timeout,
                trace_id,
            })
            .await;
        let new_data = result.as_ref().ok().and_then(|r| r.session_data.clone());
        self.sessions.finish_call(&record, new_data).await?;
        Ok(CallOutcome {
            tool: canonical,
            backend: backend.name.to_string(),
            session_id: Some(session_id),
            result: result?,
        })
    }
}
