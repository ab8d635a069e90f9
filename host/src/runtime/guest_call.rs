//! One call into a pooled instance: check an instance out, run one export under the
//! call's deadline (epoch callback for running Wasm, a timer for a guest waiting on the
//! host), and turn what happened into the host's answer. A guest error keeps its code if
//! a backend may use it; a trap, a blown memory limit or a missed deadline discards the
//! instance and names the cause, with the guest's last words (`log.panic`) when it left
//! some.

use crate::error_code::{BACKEND_CODES, Code, WharfError};
use crate::imports::CallContext;
use crate::runtime::guest_types::{Answer, GuestError};
use crate::runtime::host_state::HostState;
use crate::runtime::instance_pool::{GuestWorld, Instance, InstancePool};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tracing::Instrument;
use wasmtime::Store;

/// Where and for how long a guest call runs.
#[derive(Debug, Clone, Copy)]
pub struct CallSite<'a> {
    /// The tenant whose request the call serves (it queues in the pool under this name, and
    /// its quotas apply to what the call creates).
    pub tenant: &'a Arc<str>,
    /// The session the call runs in, if any (host imports read it).
    pub session_id: Option<&'a str>,
    /// Wall-clock limit.
    pub timeout: Duration,
    /// The request's trace id, for logs.
    pub trace_id: Option<&'a str>,
    /// Where the call's output goes while it runs, if anywhere.
    pub output: Option<&'a crate::call_output::OutputSink>,
    /// What a session asked of the sandbox this call provisions: applied to every
    /// container the call creates.
    pub sandbox: Option<&'a Arc<crate::policy::SandboxProfile>>,
    /// The snapshot this call is to commit (a provider's `suspension.snapshot`).
    pub snapshot: Option<&'a Arc<crate::engines::container_types::SnapshotAsk>>,
    /// Fired when the caller gives up on the call.
    pub cancel: Option<&'a tokio_util::sync::CancellationToken>,
}

impl<'a> CallSite<'a> {
    /// A call of the host's own for `tenant` in session `session_id`, within `timeout`.
    pub fn in_session(tenant: &'a Arc<str>, session_id: &'a str, timeout: Duration) -> Self {
        Self::new(tenant, Some(session_id), timeout)
    }

    /// A call for `tenant` (in a session, if any) within `timeout`, and nothing more: no
    /// trace id, output, sandbox ask, snapshot or cancellation.
    pub fn new(tenant: &'a Arc<str>, session_id: Option<&'a str>, timeout: Duration) -> Self {
        Self {
            tenant,
            session_id,
            timeout,
            trace_id: None,
            output: None,
            sandbox: None,
            snapshot: None,
            cancel: None,
        }
    }
}

/// A guest's error as the host answers it. A code a backend may not use becomes 5000,
/// and the substitution is logged with the backend and the original code.
pub fn guest_failure(backend: &str, e: GuestError) -> WharfError {
    let code = Code::from_backend(e.code);
    if code.as_u32() != e.code {
        tracing::warn!(
            backend,
            code = e.code,
            allowed = ?BACKEND_CODES,
            "backend `{backend}` returned code {} which a backend may not use; answering 5000",
            e.code
        );
    }
    let data = e.data.and_then(|d| serde_json::from_str(&d).ok());
    WharfError::new(code, e.message)
        .retryable(e.retryable)
        .with_data_opt(data)
}

/// Runs `op` on the exports and store of an instance of `pool` checked out for this call.
pub async fn run<W, T>(
    pool: &Arc<InstancePool<W>>,
    site: CallSite<'_>,
    op: impl AsyncFnOnce(&W::Exports, &mut Store<HostState>) -> Answer<T>,
) -> Result<T, WharfError>
where
    W: GuestWorld,
    T: Send,
{
    let backend = pool.name();
    let timeout = site.timeout;
    let deadline = Instant::now() + timeout;
    // Host imports run inside this span, so their exported spans nest under the guest call.
    // At debug level: it is built only when traces are exported or the human log is at
    // debug; the lines a call writes at info name their backend, session and trace id
    // themselves (ARCHITECTURE.md, "The path of one call").
    let span = tracing::debug_span!(
        "backend_call",
        backend = %backend,
        session = site.session_id.unwrap_or("-"),
        trace_id = site.trace_id.unwrap_or("-"),
    );
    let context = CallContext {
        tenant: site.tenant.clone(),
        session_id: site.session_id.map(str::to_string),
        deadline: Some(deadline),
        trace_id: site.trace_id.map(str::to_string),
        output: site.output.cloned(),
        sandbox: site.sandbox.cloned(),
        snapshot: site.snapshot.cloned(),
        cancel: site.cancel.cloned(),
        ..CallContext::default()
    };
    let mut checked_out = pool.checkout(context).await?;
    let outcome = {
        let Instance { exports, store, .. } = checked_out.instance()?;
        tokio::time::timeout(timeout, op(&*exports, store))
            .instrument(span)
            .await
    };
    match outcome {
        Ok(Ok(Ok(value))) => {
            checked_out.checkin();
            Ok(value)
        }
        Ok(Ok(Err(guest_error))) => {
            checked_out.checkin();
            Err(guest_failure(backend, guest_error))
        }
        Ok(Err(trap)) => {
            let state = checked_out.instance()?.store.data();
            let err = if state.call.deadline_hit {
                WharfError::new(
                    Code::Timeout,
                    format!(
                        "backend `{backend}` exceeded the call deadline of {} ms",
                        timeout.as_millis()
                    ),
                )
            } else if state.limiter.denied() {
                WharfError::internal(format!(
                    "backend `{backend}` ran out of memory (limit {} MiB); the instance was discarded",
                    pool.settings().memory_limit_bytes >> 20
                ))
            } else if let Some(panic) = &state.call.panic {
                WharfError::internal(format!(
                    "backend `{backend}` panicked: {panic}; the instance was discarded"
                ))
                .with_data(json!({ "panic": panic, "trap": trap.root_cause().to_string() }))
            } else {
                WharfError::internal(format!(
                    "backend `{backend}` trapped: {}; the instance was discarded",
                    trap.root_cause()
                ))
            };
            tracing::warn!(backend = %backend, "{}", err.message);
            drop(checked_out);
            Err(err)
        }
        Err(_elapsed) => {
            drop(checked_out);
            Err(WharfError::new(
                Code::Timeout,
                format!(
                    "backend `{backend}` did not answer within {} ms",
                    timeout.as_millis()
                ),
            ))
        }
    }
}

/// Parses JSON text a guest returned; `what` names it in the error.
pub fn guest_json(text: &str, what: &str) -> Result<Value, WharfError> {
    serde_json::from_str(text)
        .map_err(|e| WharfError::new(Code::ExecutionError, format!("{what} is not JSON: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(code: u32) -> GuestError {
        GuestError {
            code,
            message: "m".into(),
            retryable: false,
            data: None,
        }
    }

    #[test]
    fn exactly_the_stated_codes_pass() {
        for code in [
            4000, 4001, 4002, 4003, 4004, 4006, 4007, 4030, 5000, 5006, 5012,
        ] {
            assert_eq!(guest_failure("b", error(code)).code.as_u32(), code);
        }
        for code in [0, 4005, 4010, 4013, 4090, 4242, 5001, 5005, 5011, 5013] {
            assert_eq!(
                guest_failure("b", error(code)).code.as_u32(),
                5000,
                "{code}"
            );
        }
    }

    /// Captured log text: the log line an author reads when a code was replaced.
    #[derive(Clone, Default)]
    struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            if let Ok(mut text) = self.0.lock() {
                text.extend_from_slice(bytes);
            }
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_replaced_code_is_logged_with_the_backend_and_the_original_code() {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            guest_failure("tracker", error(4006));
            guest_failure("tracker", error(4242));
        });
        let text = String::from_utf8(captured.0.lock().map(|t| t.clone()).unwrap_or_default())
            .unwrap_or_default();
        assert_eq!(
            text.lines().count(),
            1,
            "only the replaced code is logged: {text}"
        );
        assert!(
            text.contains("backend `tracker` returned code 4242 which a backend may not use"),
            "{text}"
        );
    }
}
