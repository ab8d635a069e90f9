//! One stdio server per Wharf session (`"sessions": "per_session"`). The session's
//! `initialize` starts it in a container of the session's own and returns the session data
//! naming it (`{"container", "pid", "version", "started_at_ms"}`); a call uses the server
//! its session data names, and starts a new one when that one is gone (with the shared
//! server's backoff, its record in the session's kv, which also names the last server
//! started in case the session data could not be updated); `cleanup` removes the session's
//! containers and `discover` says whether one still exists.
//!
//! The host runs one call of a session at a time, so nothing here takes a lease.

use crate::redact::Redactor;
use crate::server_state::{self as state, Published, ServerRecord};
use crate::stdio::IdMaker;
use crate::stdio_config::StdioSettings;
use crate::stdio_server::{Proc, now_ms, probe};
use crate::stdio_start::{ServerOwner, start_server};
use std::time::Instant;
use wharf_sdk::host::container;
use wharf_sdk::{Discovery, Session, ToolError, Value, json};

/// The session kv key of the server record (restart backoff, last server started).
pub const RECORD_KEY: &str = "stdio-session-server";
/// The longest container id accepted from session data.
const MAX_CONTAINER_ID: usize = 128;
/// The longest protocol version accepted from session data.
const MAX_VERSION: usize = 64;

/// The session data naming `server`.
pub fn to_data(server: &Published) -> Value {
    json!({
        "container": server.container,
        "pid": server.pid,
        "version": server.version,
        "started_at_ms": server.started_at_ms,
    })
}

/// The server session data names; `None` (a server that is gone, started again) for data
/// that does not name one well: not an object, a field missing or of the wrong type, a pid
/// out of range, an id or version that is not short printable text.
pub fn from_data(data: &Value) -> Option<Published> {
    let container = data.get("container")?.as_str()?;
    if container.is_empty()
        || container.len() > MAX_CONTAINER_ID
        || !container
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
    {
        return None;
    }
    let pid = u32::try_from(data.get("pid")?.as_u64()?)
        .ok()
        .filter(|&pid| pid > 0)?;
    let version = data.get("version")?.as_str()?;
    if version.is_empty()
        || version.len() > MAX_VERSION
        || !version.bytes().all(|b| (0x21..=0x7e).contains(&b))
    {
        return None;
    }
    let started_at_ms = match data.get("started_at_ms") {
        None | Some(Value::Null) => 0,
        Some(v) => v.as_u64()?,
    };
    Some(Published {
        container: container.to_string(),
        pid,
        version: version.to_string(),
        started_at_ms,
    })
}

/// The backoff record of a session's server at `now`: the one kept in kv, or else one
/// counting the start the session data names (the one at `initialize`). Its last start is
/// never in the future (a hostile or skewed time would otherwise hold restarts off) and it
/// has no lease.
pub fn backoff_record(
    kept: Option<ServerRecord>,
    named: Option<&Published>,
    now: u64,
) -> ServerRecord {
    let mut record = match (kept, named) {
        (Some(kept), _) => kept,
        (None, Some(named)) => ServerRecord {
            starts: 1,
            last_start_ms: named.started_at_ms,
            ..ServerRecord::default()
        },
        (None, None) => ServerRecord::default(),
    };
    record.last_start_ms = record.last_start_ms.min(now);
    record.starting = None;
    record
}

/// A running server of the session and its output's end now.
#[derive(Debug)]
pub struct Found {
    /// The server.
    pub server: Proc,
    /// Its output's end.
    pub end: u64,
    /// The session data to store when it no longer names the server.
    pub data: Option<Value>,
}

/// Starts the server of the new session `session_id` (its `initialize`): its session data,
/// or the error, its container removed.
pub fn open(
    settings: &StdioSettings,
    redactor: &mut Redactor,
    ids: &mut IdMaker,
    deadline: Instant,
    session_id: &str,
) -> Result<Value, ToolError> {
    let owner = ServerOwner::Session(session_id);
    match start_server(
        settings,
        owner,
        &settings.fingerprint(),
        redactor,
        ids,
        deadline,
        1,
    ) {
        Ok((published, _)) => Ok(to_data(&published)),
        Err(e) => {
            let _ = remove_all(owner);
            Err(e)
        }
    }
}

/// The session's running server: the one its data names, the last one its kv record
/// names, or one started now (unless its backoff holds restarts off: 5012).
pub fn ensure(
    settings: &StdioSettings,
    redactor: &mut Redactor,
    ids: &mut IdMaker,
    deadline: Instant,
    session: &Session,
) -> Result<Found, ToolError> {
    let named = from_data(&session.data);
    if let Some(named) = &named
        && let Some(end) = probe(&named.proc())?
    {
        return Ok(Found {
            server: named.proc(),
            end,
            data: None,
        });
    }
    let kept = state::load_session(RECORD_KEY)?;
    if let Some(last) = kept.as_ref().and_then(|r| r.server.as_ref())
        && named.as_ref() != Some(last)
        && let Some(end) = probe(&last.proc())?
    {
        return Ok(Found {
            server: last.proc(),
            end,
            data: Some(to_data(last)),
        });
    }
    let now = now_ms();
    let record = backoff_record(kept, named.as_ref(), now);
    if let Some(wait) = record.backoff_left(now) {
        return Err(ToolError::dependency(format!(
            "the session's MCP server keeps exiting (started {} times lately); restarting in {} s",
            record.starts,
            wait.div_ceil(1000)
        )));
    }
    let starting = ServerRecord {
        starting: None,
        ..record.starting_by(ids.token(), now, now)
    };
    // Counted before the start, so that a start that fails counts too.
    state::save_session(RECORD_KEY, &starting)?;
    let owner = ServerOwner::Session(&session.id);
    let fingerprint = settings.fingerprint();
    let (published, end) = start_server(
        settings,
        owner,
        &fingerprint,
        redactor,
        ids,
        deadline,
        starting.starts,
    )?;
    // Best effort: the session data names it too, once the call succeeds.
    let _ = state::save_session(RECORD_KEY, &starting.with_server(published.clone()));
    Ok(Found {
        server: published.proc(),
        end,
        data: Some(to_data(&published)),
    })
}

/// Forgets `server` (gone) in the session's kv record, if it names it; best effort.
pub fn forget(server: &Proc) {
    if let Ok(Some(record)) = state::load_session(RECORD_KEY)
        && record.server.as_ref().is_some_and(|p| p.proc() == *server)
    {
        let _ = state::save_session(RECORD_KEY, &record.without_server());
    }
}

/// Removes a container; one already gone is no error.
fn remove(id: &str) -> Result<(), ToolError> {
    match container::remove(id) {
        Ok(()) => Ok(()),
        Err(e) => {
            let e = ToolError::from(e);
            if e.code == 4000 { Ok(()) } else { Err(e) }
        }
    }
}

fn remove_all(owner: ServerOwner) -> Result<(), ToolError> {
    for found in owner.containers()? {
        remove(&found.id)?;
    }
    Ok(())
}

/// The container the session data names, when it is still there and the session's.
fn named_container(session: &Session) -> Result<Option<String>, ToolError> {
    let Some(named) = from_data(&session.data) else {
        return Ok(None);
    };
    Ok(container::inspect(&named.container)?
        .filter(|info| ServerOwner::Session(&session.id).holds(info))
        .map(|info| info.id))
}

/// Removes the session's server containers (its `cleanup`); succeeds when they are gone.
pub fn close(session: &Session) -> Result<(), ToolError> {
    remove_all(ServerOwner::Session(&session.id))?;
    if let Some(id) = named_container(session)? {
        remove(&id)?;
    }
    Ok(())
}

/// `Alive` while a server container of the session exists (a process that is gone is
/// started again by the next call), `Gone` once none does.
pub fn discover(session: &Session) -> Result<Discovery, ToolError> {
    if !ServerOwner::Session(&session.id).containers()?.is_empty()
        || named_container(session)?.is_some()
    {
        return Ok(Discovery::Alive);
    }
    Ok(Discovery::Gone)
}

#[cfg(test)]
#[path = "stdio_session_tests.rs"]
mod tests;
