//! Running a tool: resolving its name, checking its arguments, finding its session, and
//! the audit line and metrics every call leaves.

use super::Wharf;
use crate::error_code::{Code, WharfError};
use crate::runtime::tool_table::ToolTable;
use crate::runtime::{LoadedBackend, ToolCall};
use crate::tenant::Tenant;
use crate::tool::{SessionNeed, ToolResult};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// Where a call runs, decided once, before it is admitted to run (`Wharf::pick_session`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Placement {
    /// In no session.
    Sessionless,
    /// In this session.
    Session(String),
    /// The caller named this session, but the tool takes none: it runs without it, and a
    /// backend that then asks for one is told the tool's declaration is at fault.
    Undeclared(String),
}

impl Placement {
    /// The session the envelope's `meta` names.
    fn session_id(&self) -> Option<String> {
        match self {
            Placement::Sessionless => None,
            Placement::Session(id) | Placement::Undeclared(id) => Some(id.clone()),
        }
    }
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
    /// Whether the call resumed its paused session first.
    pub resumed: bool,
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
    /// Whether the call resumed its paused session first.
    pub resumed: bool,
}

impl CallOutcome {
    /// The tool's result, and where it ran.
    pub fn into_parts(self) -> (ToolResult, CallPlace) {
        let place = CallPlace {
            tool: Some(self.tool),
            backend: Some(self.backend),
            session_id: self.session_id,
            resumed: self.resumed,
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

/// An admitted call's arguments, deadline and place, once its session is decided.
pub(super) struct PlacedCall {
    /// Arguments (a JSON object).
    pub args: Value,
    /// The caller's limit, capped by the backend's own.
    pub deadline: Option<Duration>,
    /// Where it runs.
    pub placement: Placement,
    /// Where its output goes while it runs, if anywhere.
    pub output: Option<crate::call_output::OutputSink>,
    /// Fired when the caller gives up on it.
    pub cancel: Option<tokio_util::sync::CancellationToken>,
}

/// A tool name resolved in the registry: its backend and its action.
pub(super) type ResolvedTool = (Arc<LoadedBackend>, String);

/// What a call needs of its tool (not the whole description: its schemas are not copied
/// per call), and the backend's tool table it was admitted under: the call is validated
/// against that same table, even if a listing swaps the backend's meanwhile.
pub(super) struct AdmittedTool {
    /// The action name.
    pub action: String,
    /// Whether it takes a session.
    pub session: SessionNeed,
    /// The tools served when the call was admitted.
    pub table: Arc<ToolTable>,
}

/// The name a caller's quotas and pool turns go by: its tenant, or one name for admins.
fn quota_tenant(tenant: &Tenant) -> &str {
    tenant.only().unwrap_or(crate::quotas::ADMIN_TENANT)
}

impl Wharf {
    /// Runs `work` (one call, which carries its tenant to the backend), then writes the
    /// call's audit line and metrics, refusals included. The audit line never carries content or commands (only
    /// their length and sha256).
    ///
    /// `args` is [`super::call_audit::audit_args`] of the call's arguments. `work` comes
    /// boxed from where it is made, so only a pointer moves through this.
    pub(super) async fn audited<F>(
        &self,
        tenant: &Tenant,
        args: super::call_audit::AuditArgs,
        trace_id: Option<String>,
        work: std::pin::Pin<Box<F>>,
    ) -> Result<CallOutcome, (WharfError, CallPlace)>
    where
        F: Future<Output = Result<CallOutcome, (WharfError, CallPlace)>>,
    {
        let started = std::time::Instant::now();
        let who = quota_tenant(tenant);
        let outcome = work.await;
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
        let line = super::call_audit::CallLine {
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
        self.live_calls.publish(|| line.live());
        self.metrics.record_call(backend, tool, code, elapsed);
        outcome
    }

    /// A watcher of the tool calls as they end (the console's live view), or `None` when
    /// [`crate::live_calls::MAX_LIVE_WATCHERS`] already watch.
    pub fn watch_calls(&self) -> Option<crate::live_calls::LiveWatch> {
        self.live_calls.watch()
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
        requested: &str,
        given_session: Option<String>,
        resolved: Option<ResolvedTool>,
        permit: impl Fn(&str, &str) -> Result<(), WharfError>,
    ) -> Result<Admitted, Box<(WharfError, CallPlace)>> {
        let mut place = CallPlace {
            session_id: given_session,
            ..CallPlace::default()
        };
        let (backend, action) = match resolved {
            Some(found) => found,
            None => self
                .resolve_tool(requested)
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
        let table = backend.tools();
        let Some(session) = table.tool(&action).map(|t| t.session) else {
            return Err(Box::new((
                WharfError::invalid_request(format!("unknown tool `{requested}`")),
                place,
            )));
        };
        Ok(Admitted {
            backend,
            tool: AdmittedTool {
                action,
                session,
                table,
            },
            place,
            _admission: admission,
        })
    }

    /// Runs an admitted call where `call.placement` says.
    pub(super) async fn run_admitted(
        &self,
        tenant: &Tenant,
        admitted: Admitted,
        call: PlacedCall,
        trace_id: Option<String>,
    ) -> Result<CallOutcome, (WharfError, CallPlace)> {
        let Admitted {
            backend,
            tool,
            mut place,
            _admission,
        } = admitted;
        place.session_id = call.placement.session_id();
        self.call_resolved(tenant, &backend, &tool, call, trace_id)
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
        call: PlacedCall,
        trace_id: Option<String>,
    ) -> Result<CallOutcome, WharfError> {
        let limit = backend.call_timeout();
        let timeout = call.deadline.map_or(limit, |t| t.min(limit));
        let args = validated(backend, tool, call.args, timeout).await?;
        let canonical = format!("{}:{}", backend.name, tool.action);
        // A stateless tool never receives the caller's session; if it then asks for one,
        // the fault is the declaration, and the answer says how to fix it.
        let (session_id, undeclared_session) = match call.placement {
            Placement::Session(id) => (Some(id), None),
            Placement::Undeclared(id) => (None, Some(id)),
            Placement::Sessionless => (None, None),
        };
        let Some(session_id) = session_id else {
            let result = backend
                .call_tool(ToolCall {
                    tenant: Arc::from(quota_tenant(tenant)),
                    action: tool.action.clone(),
                    args,
                    session: None,
                    timeout,
                    trace_id,
                    output: call.output,
                    cancel: call.cancel,
                    host: None,
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
                resumed: false,
            });
        };
        let (record, _one_at_a_time, resumed) = self
            .begin_live_call(tenant, &session_id, Some(backend))
            .await?;
        if record.backend != *backend.name {
            return Err(WharfError::session_not_found(format!(
                "session `{session_id}` belongs to backend `{}`, not `{}`",
                record.backend, backend.name
            )));
        }
        let result = backend
            .call_tool(ToolCall {
                tenant: Arc::from(quota_tenant(tenant)),
                action: tool.action.clone(),
                args,
                session: Some(record.view()),
                timeout,
                trace_id,
                output: call.output,
                cancel: call.cancel,
                host: self
                    .myself
                    .upgrade()
                    .map(|wharf| crate::runtime::backend::SessionHostRef(wharf)),
            })
            .await;
        let new_data = result.as_ref().ok().and_then(|r| r.session_data.clone());
        self.sessions.finish_call(&record, new_data).await?;
        Ok(CallOutcome {
            tool: canonical,
            backend: backend.name.to_string(),
            session_id: Some(session_id),
            result: result?,
            resumed,
        })
    }
}

/// `args` checked against the tool's schema: small ones here, large ones on a blocking
/// thread under the call's deadline, so a long validation never holds an async worker
/// (SECURITY.md, "Resource ledger": validation CPU).
async fn validated(
    backend: &LoadedBackend,
    tool: &AdmittedTool,
    args: serde_json::Value,
    timeout: Duration,
) -> Result<serde_json::Value, WharfError> {
    use crate::schema_validation::{INLINE_VALIDATION_BUDGET, exceeds};
    if !exceeds(&args, INLINE_VALIDATION_BUDGET) {
        tool.table
            .validate_args(&backend.name, &tool.action, &args)?;
        return Ok(args);
    }
    let (table, name, action) = (
        tool.table.clone(),
        backend.name.clone(),
        tool.action.clone(),
    );
    let work = tokio::task::spawn_blocking(move || {
        let checked = table.validate_args(&name, &action, &args);
        checked.map(|()| args)
    });
    match tokio::time::timeout(timeout, work).await {
        Ok(Ok(checked)) => checked,
        Ok(Err(e)) => Err(WharfError::internal(format!(
            "validating the arguments failed: {e}"
        ))),
        Err(_) => Err(WharfError::new(
            Code::Timeout,
            format!(
                "validating the arguments took longer than the call's {} ms",
                timeout.as_millis()
            ),
        )),
    }
}
