//! `POST /api/v1/execute/batch` of the compatibility API.
//!
//! A batch runs `actions: [{action, params, timeout?}]` (each as `/api/v1/execute` runs one,
//! for the batch's worker) serially, or all at once with `parallel: true`; `data.results`
//! has one `{index, action, code, message, data}` per action, in the order given. The
//! batch's code: 0 when every action succeeded, 5009 (HTTP 500) when none did, 5010
//! (HTTP 207) otherwise. A serial batch with `stop_on_error: true` (the default, as in the
//! replaced server) runs nothing after the first failure: **the actions it did not run are
//! reported with code 5010, message "skipped after an earlier failure (stop_on_error)" and
//! `skipped: true`**, and count as not succeeded (so a batch whose first action failed and
//! whose others were skipped is 5009). A batch none of whose actions succeeded because of
//! the caller's own errors (every failure a 4xxx code) is 4000 (HTTP 400), not 5009: the
//! host did nothing wrong. A batch is at most the tenant's `batch_size` actions (a
//! default applies without `[quotas]`). `stop_on_error` has no effect on a parallel batch:
//! every action has started before any has failed.

use super::execute::{ActionSpec, Ctx, result_data, run_action};
use super::{CompatCall, from_json};
use crate::api::envelope::{Envelope, Meta};
use crate::error_code::{Code, WharfError};
use crate::front_door::CallPlace;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use serde::Deserialize;
use serde_json::{Value, json};
use tracing::Instrument;

/// `execute/batch`'s body. `actions` is optional to serde so that its absence is answered
/// 4003, and its items are parsed one by one so that a bad one fails only itself; the
/// schema says what a good request holds.
#[derive(Deserialize, schemars::JsonSchema)]
pub(crate) struct BatchBody {
    /// The worker whose sessions session tools run in (else the `X-Worker-ID` header).
    #[serde(default)]
    worker_id: Option<String>,
    /// The actions, run in this order (or all at once with `parallel`).
    #[schemars(with = "Vec<super::execute::ActionSpec>", required)]
    actions: Option<Vec<Value>>,
    /// Run every action at once.
    #[serde(default)]
    parallel: Option<bool>,
    /// A serial batch runs nothing after the first failure (default true).
    #[serde(default)]
    stop_on_error: Option<bool>,
    /// Sent back as `meta.trace_id`.
    #[serde(default)]
    trace_id: Option<String>,
}

/// One entry of a batch's `results`.
struct Entry {
    value: Value,
    ok: bool,
    skipped: bool,
    /// The failure was the caller's (a 4xxx code).
    callers_fault: bool,
}

fn action_name(item: &Value) -> Value {
    item.get("action").cloned().unwrap_or(Value::Null)
}

async fn run_entry(ctx: &Ctx<'_>, index: usize, item: Value) -> Entry {
    let name = action_name(&item);
    let outcome = match from_json::<ActionSpec>(item, &format!("actions[{index}]")) {
        Ok(spec) => run_action(ctx, spec).await,
        Err(e) => Err((e, CallPlace::default())),
    };
    let callers_fault = matches!(&outcome, Err((e, _)) if e.code.as_u32() < 5000);
    let (ok, value) = match outcome {
        Ok(o) => (
            true,
            json!({"index": index, "action": name, "code": 0, "message": "ok",
                   "data": result_data(&o.result), "tool": o.tool, "session_id": o.session_id}),
        ),
        Err((e, place)) => (
            false,
            json!({"index": index, "action": name, "code": e.code.as_u32(), "message": e.message,
                   "data": e.data.unwrap_or(Value::Null), "retryable": e.retryable,
                   "tool": place.tool, "session_id": place.session_id}),
        ),
    };
    Entry {
        value,
        ok,
        skipped: false,
        callers_fault,
    }
}

fn skipped(index: usize, item: &Value) -> Entry {
    Entry {
        value: json!({"index": index, "action": action_name(item),
                      "code": Code::BatchPartialFailure.as_u32(),
                      "message": "skipped after an earlier failure (stop_on_error)",
                      "data": null, "skipped": true}),
        ok: false,
        skipped: true,
        callers_fault: false,
    }
}

/// `POST /api/v1/execute/batch`.
pub(super) async fn batch(call: CompatCall, body: Result<Bytes, BytesRejection>) -> Envelope {
    let (body, span, clock) =
        match call.open::<BatchBody>(body, "compat.batch", |b| b.trace_id.as_deref()) {
            Ok(opened) => opened,
            Err(refused) => return refused,
        };
    let Some(actions) = body.actions else {
        return clock.reply(Err(WharfError::new(
            Code::MissingField,
            "`actions` is required",
        )));
    };
    if let Err(e) = call
        .wharf
        .check_batch_size(&call.caller.tenant, actions.len())
    {
        return clock.reply(Err(e));
    }
    let worker = call.worker_id(body.worker_id.as_deref());
    let ctx = call.ctx(worker.as_deref(), &clock.trace_id);
    let parallel = body.parallel.unwrap_or(false);
    let stop_on_error = body.stop_on_error.unwrap_or(true);
    let entries: Vec<Entry> = async {
        if parallel {
            let runs = actions
                .into_iter()
                .enumerate()
                .map(|(i, item)| run_entry(&ctx, i, item));
            futures::future::join_all(runs).await
        } else {
            let mut entries = Vec::with_capacity(actions.len());
            let mut failed = false;
            for (i, item) in actions.into_iter().enumerate() {
                if failed && stop_on_error {
                    entries.push(skipped(i, &item));
                    continue;
                }
                let entry = run_entry(&ctx, i, item).await;
                failed |= !entry.ok;
                entries.push(entry);
            }
            entries
        }
    }
    .instrument(span)
    .await;
    let total = entries.len();
    let succeeded = entries.iter().filter(|e| e.ok).count();
    let not_run = entries.iter().filter(|e| e.skipped).count();
    let failed = total - succeeded - not_run;
    let all_callers_faults = entries.iter().all(|e| e.ok || e.skipped || e.callers_fault);
    let data = json!({
        "worker_id": worker,
        "parallel": parallel,
        "stop_on_error": stop_on_error,
        "total": total,
        "executed": total - not_run,
        "succeeded": succeeded,
        "failed": failed,
        "skipped": not_run,
        "success": succeeded == total,
        "results": entries.into_iter().map(|e| e.value).collect::<Vec<_>>(),
    });
    let meta = Meta {
        tool: Some("batch:execute".into()),
        ..clock.meta()
    };
    if succeeded == total {
        return Envelope::ok(data, meta);
    }
    let error = if succeeded == 0 && all_callers_faults {
        WharfError::new(
            Code::InvalidInput,
            format!(
                "no action succeeded, each on the request's own error ({failed} failed, {not_run} skipped): see data.results"
            ),
        )
    } else if succeeded == 0 {
        WharfError::new(
            Code::BatchAllFailed,
            format!("every action failed ({failed} failed, {not_run} skipped)"),
        )
    } else {
        WharfError::new(
            Code::BatchPartialFailure,
            format!(
                "{} of {total} actions did not succeed ({failed} failed, {not_run} skipped)",
                total - succeeded
            ),
        )
    };
    Envelope::error(error.with_data(data), meta)
}
