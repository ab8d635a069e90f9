//! The one protocol-neutral entry point every adapter calls to run a tool:
//! [`Wharf::invoke`]. REST, MCP and the compatibility API translate their request into an
//! [`Invocation`] and the outcome back into their envelope; resolving the tool, checking
//! the caller's allowlist, deciding whether the call runs in a session, finding or making
//! that session and running the call happen here once (ARCHITECTURE.md, the path of one
//! call).

use super::Wharf;
use super::tool_calls::{Admitted, CallOutcome, CallPlace, PlacedCall, Placement, ResolvedTool};
use crate::call_output::OutputSink;
use crate::error_code::WharfError;
use crate::principal::Principal;
use crate::tool::SessionNeed;
use serde_json::Value;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Which session a call runs in, as the caller asked.
#[derive(Debug, Clone)]
pub enum SessionChoice {
    /// No session: a tool that needs one is refused with 4007.
    None,
    /// The session of this id (it must be one the caller sees, of the tool's backend).
    Id(String),
    /// The caller's session of (the tool's backend, `key`): a tool that can use a session
    /// runs in it when it exists; a tool that needs one and finds none gets what
    /// `missing` says.
    Key {
        /// The caller's key (MCP: the session key; compatibility API: the worker id).
        key: String,
        /// What a tool that needs a session gets when the key has none.
        missing: WhenMissing,
    },
}

/// What a tool that needs a session gets when the caller's key has none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WhenMissing {
    /// The key's session is acquired (the same key gets the same session back).
    Create,
    /// A session of its own for this one call, released right after it (also when the
    /// call fails, and in the background when the call is dropped mid-way).
    Temporary,
}

/// One call of one tool, whatever protocol it came in by.
#[derive(Debug, Clone)]
pub struct Invocation<'a> {
    /// Who calls: what it creates is its tenant's; it sees its view's sessions; its
    /// allowlists decide which tools it may run.
    pub caller: &'a Principal,
    /// The tool's name: canonical, an alias, a short name or an MCP name.
    pub tool: String,
    /// Arguments (a JSON object).
    pub args: Value,
    /// The session to run in.
    pub session: SessionChoice,
    /// Wall-clock limit; capped by the backend's own.
    pub deadline: Option<Duration>,
    /// The trace id for the audit line and the guest's logs.
    pub trace_id: Option<String>,
    /// The refusal (4007) when the tool needs a session and `session` gives none: each
    /// protocol says in its own words how to pass one. Called with the tool's canonical
    /// name.
    pub missing_session: fn(&str) -> WharfError,
    /// Where the call's output goes while it runs, when the protocol can stream it.
    pub output: Option<OutputSink>,
    /// Fired when the caller gives up on the call, if the protocol can tell: a backend
    /// waiting in an import (`process.output`) is then answered 4990 and gets a turn to
    /// tell what it waits on, before the protocol drops the call.
    pub cancel: Option<CancellationToken>,
}

impl<'a> Invocation<'a> {
    /// A call of `tool` with `args` for `caller`, in no session, with the backend's limit;
    /// `missing_session` is the protocol's refusal of a tool that needs a session.
    pub fn new(
        caller: &'a Principal,
        tool: impl Into<String>,
        args: Value,
        missing_session: fn(&str) -> WharfError,
    ) -> Self {
        Self {
            caller,
            tool: tool.into(),
            args,
            session: SessionChoice::None,
            deadline: None,
            trace_id: None,
            missing_session,
            output: None,
            cancel: None,
        }
    }
}

/// What [`Wharf::invoke`] gives back: the outcome and where it ran, or the refusal and how
/// far the call got (for the envelope's `meta`).
pub type InvocationResult = Result<CallOutcome, (WharfError, CallPlace)>;

impl Wharf {
    /// Runs one tool call: the entry point every protocol shares. Every outcome, refusals
    /// included, is audited and counted in the metrics.
    pub async fn invoke(&self, invocation: Invocation<'_>) -> InvocationResult {
        let Invocation {
            caller,
            tool,
            args,
            session,
            deadline,
            trace_id,
            missing_session,
            output,
            cancel,
        } = invocation;
        let (tool, resolved) = self.listed_name(tool);
        let tenant = caller.session_tenant();
        let given_session = match &session {
            SessionChoice::Id(id) => Some(id.clone()),
            _ => None,
        };
        let audit_args = super::call_audit::audit_args(&args);
        let audit_trace_id = trace_id.clone();
        let work = Box::pin(async {
            let permit = |backend: &str, action: &str| caller.require_tool(backend, Some(action));
            let admitted = self
                .admit(tenant, &tool, given_session, resolved, permit)
                .map_err(|e| *e)?;
            let (placement, temporary) = self
                .pick_session(caller, &admitted, &args, session, missing_session)
                .await?;
            let call = PlacedCall {
                args,
                deadline,
                placement,
                output,
                cancel,
            };
            let outcome = self.run_admitted(tenant, admitted, call, trace_id).await;
            if let Some(temporary) = temporary {
                temporary.destroy().await;
            }
            outcome
        });
        self.audited(tenant, audit_args, audit_trace_id, work).await
    }

    /// The canonical name of a tool the caller named by its MCP name when the name
    /// `ToolName::mcp_name` had to rewrite (characters replaced, cut at 64) resolves no
    /// other way; any other name unchanged.
    /// The name resolved on the way is handed on, so `admit` need not resolve it again.
    fn listed_name(&self, requested: String) -> (String, Option<ResolvedTool>) {
        if let Ok(found) = self.resolve_tool(&requested) {
            return (requested, Some(found));
        }
        let listed = self
            .tools()
            .into_iter()
            .find(|(name, _, _)| name.mcp_name() == requested)
            .map_or(requested, |(name, _, _)| name.canonical());
        (listed, None)
    }

    /// Where the call runs, decided here once (and the temporary session to release after
    /// it). The session paths are boxed: inline, their futures (tens of KB) made every call's future
    /// that size, copied at each move on the hot path (ARCHITECTURE.md, "The path of one call").
    async fn pick_session(
        &self,
        caller: &Principal,
        admitted: &Admitted,
        args: &Value,
        choice: SessionChoice,
        missing_session: fn(&str) -> WharfError,
    ) -> Result<(Placement, Option<super::temporary::TemporarySession>), (WharfError, CallPlace)>
    {
        let backend = &admitted.backend;
        let action = &admitted.tool.action;
        let need = admitted.tool.session;
        let canonical = format!("{}:{action}", backend.name);
        let place = admitted.place.clone();
        let refuse = |e: WharfError| (e, place.clone());
        match (choice, need) {
            // A stateless tool called in a session: it runs without, and the call path
            // explains the mistake if the backend then asks for one.
            (SessionChoice::Id(id), SessionNeed::None) => Ok((Placement::Undeclared(id), None)),
            (SessionChoice::Id(id), _) => Ok((Placement::Session(id), None)),
            (_, SessionNeed::None) => Ok((Placement::Sessionless, None)),
            (SessionChoice::None, SessionNeed::Required) => {
                Err(refuse(missing_session(&canonical)))
            }
            (SessionChoice::None, SessionNeed::Optional) => Ok((Placement::Sessionless, None)),
            (SessionChoice::Key { key, missing }, need) => {
                let required = need == SessionNeed::Required;
                if required && missing == WhenMissing::Create {
                    let (record, _) =
                        Box::pin(self.acquire_keyed(&caller.tenant, &backend.name, &key))
                            .await
                            .map_err(refuse)?;
                    return Ok((Placement::Session(record.id), None));
                }
                let existing = Box::pin(self.ready_session_of(caller, &backend.name, &key))
                    .await
                    .map_err(refuse)?;
                match existing {
                    Some(id) => Ok((Placement::Session(id), None)),
                    None if required => {
                        // Bad arguments are refused before a session is paid for.
                        admitted
                            .tool
                            .table
                            .validate_args(&backend.name, action, args)
                            .map_err(refuse)?;
                        let temporary =
                            Box::pin(self.temporary_session(&caller.tenant, &backend.name, &key))
                                .await
                                .map_err(refuse)?;
                        Ok((
                            Placement::Session(temporary.id().to_string()),
                            Some(temporary),
                        ))
                    }
                    None => Ok((Placement::Sessionless, None)),
                }
            }
        }
    }

    /// Acquires the session of (tenant, backend, key), creating it the first time. No
    /// holder claim: two callers with the same key share the session.
    pub(super) async fn acquire_keyed(
        &self,
        tenant: &str,
        backend: &str,
        key: &str,
    ) -> Result<(crate::session_record::SessionRecord, bool), WharfError> {
        let request = super::SessionRequest {
            backend: backend.to_string(),
            key: Some(key.to_string()),
            config: None,
            ttl_seconds: None,
            owner: None,
            holder: None,
            from_snapshot: None,
        };
        self.create_session(tenant, request).await
    }

    /// The id of the caller's ready session of (backend, key): its own tenant's first,
    /// else (for an admin) any tenant's it sees.
    async fn ready_session_of(
        &self,
        caller: &Principal,
        backend: &str,
        key: &str,
    ) -> Result<Option<String>, WharfError> {
        let ready: Vec<_> = self
            .sessions(caller.session_tenant(), Some(backend), Some(key))
            .await?
            .into_iter()
            .filter(|s| s.state == crate::session_record::SessionState::Ready)
            .collect();
        let chosen = ready
            .iter()
            .find(|s| s.tenant == caller.tenant)
            .or(ready.first());
        Ok(chosen.map(|s| s.id.clone()))
    }
}
