//! Finding, starting and restarting the stdio server every instance of the backend
//! shares: one process in one container of the backend's own (labelled
//! `mcp-bridge.role=server`), published in kv ([`crate::server_state`]) once its MCP
//! handshake is done, found again through kv by any instance, started again (with
//! backoff) when it is gone.

use crate::redact::Redactor;
use crate::server_state::{self as state, Published};
use crate::stdio::IdMaker;
use crate::stdio_config::StdioSettings;
use crate::stdio_start::{ServerOwner, start_server};
use std::time::{Duration, Instant};
use wharf_sdk::ToolError;
use wharf_sdk::bindings::backend_world::wasi::clocks::monotonic_clock;
use wharf_sdk::host::process::{self, Signal};

/// How often a waiting instance looks whether another one finished starting the server.
const LEASE_POLL: Duration = Duration::from_millis(200);

/// A server process: its container and pid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proc {
    /// The container's full id.
    pub container: String,
    /// The pid in it.
    pub pid: u32,
}

impl Published {
    /// Its process.
    pub fn proc(&self) -> Proc {
        Proc {
            container: self.container.clone(),
            pid: self.pid,
        }
    }
}

/// Whether an error of the process import says the process or its container is gone:
/// 4000 (no such process, or an agent that no longer answers) or 4030 (no agent: the
/// container was removed or stopped).
pub fn is_gone(e: &ToolError) -> bool {
    e.code == 4000 || e.code == 4030
}

/// Whether `server` runs: its output's end when it does, `None` when it is gone.
pub fn probe(server: &Proc) -> Result<Option<u64>, ToolError> {
    match process::output(&server.container, server.pid, u64::MAX, 0, 0) {
        Ok(out) if out.process.running => Ok(Some(out.process.output_bytes)),
        Ok(_) => Ok(None),
        Err(e) => {
            let e = ToolError::from(e);
            if is_gone(&e) { Ok(None) } else { Err(e) }
        }
    }
}

pub fn kill(server: &Proc) {
    let _ = process::send_signal(&server.container, server.pid, Signal::Kill);
}

/// Wall-clock ms since the epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

pub fn pause(d: Duration) {
    let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
    monotonic_clock::subscribe_duration(nanos).block();
}

fn left(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now())
}

/// Finds the shared server for one instance, and remembers it.
pub struct ServerFinder {
    key: String,
    fingerprint: String,
    me: String,
    cached: Option<Published>,
}

impl ServerFinder {
    /// The finder of `settings`' server for the instance whose token is `me`.
    pub fn new(settings: &StdioSettings, me: &str) -> Self {
        let fingerprint = settings.fingerprint();
        Self {
            key: format!("stdio-server/{fingerprint}"),
            fingerprint,
            me: me.to_string(),
            cached: None,
        }
    }

    /// Whether `server` still runs.
    pub fn alive(&self, server: &Proc) -> Result<bool, ToolError> {
        Ok(probe(server)?.is_some())
    }

    /// Forgets `server` (gone): here, and in kv if kv still names it.
    pub fn forget(&mut self, server: &Proc) {
        if self.cached.as_ref().is_some_and(|p| p.proc() == *server) {
            self.cached = None;
        }
        state::update(&self.key, |r| {
            r.server
                .as_ref()
                .is_some_and(|p| p.proc() == *server)
                .then(|| r.without_server())
        });
    }

    /// A running server and its output's end now: the one this instance knows, the one
    /// kv names, or one started now (by this instance, or by another one it waits for).
    pub fn ensure(
        &mut self,
        settings: &StdioSettings,
        redactor: &mut Redactor,
        ids: &mut IdMaker,
        deadline: Instant,
    ) -> Result<(Proc, u64), ToolError> {
        if let Some(known) = self.cached.clone() {
            match probe(&known.proc())? {
                Some(end) => return Ok((known.proc(), end)),
                None => self.forget(&known.proc()),
            }
        }
        loop {
            if Instant::now() >= deadline {
                return Err(ToolError::timeout(
                    "the MCP server was not ready in time (another instance is starting it)",
                ));
            }
            let (raw, record) = state::load(&self.key)?;
            if let Some(published) = &record.server {
                match probe(&published.proc())? {
                    Some(end) => {
                        self.cached = Some(published.clone());
                        return Ok((published.proc(), end));
                    }
                    None => {
                        state::swap(&self.key, raw.as_deref(), &record.without_server())?;
                        continue;
                    }
                }
            }
            let now = now_ms();
            if record.leased_to_other(&self.me, now) {
                pause(LEASE_POLL.min(left(deadline)));
                continue;
            }
            if let Some(wait) = record.backoff_left(now) {
                return Err(ToolError::dependency(format!(
                    "the MCP server keeps exiting (started {} times lately); restarting in {} s",
                    record.starts,
                    wait.div_ceil(1000)
                )));
            }
            let until =
                now.saturating_add(u64::try_from(left(deadline).as_millis()).unwrap_or(0) + 1000);
            let leased = record.starting_by(&self.me, now, until);
            if !state::swap(&self.key, raw.as_deref(), &leased)? {
                continue;
            }
            let started = start_server(
                settings,
                ServerOwner::Shared,
                &self.fingerprint,
                redactor,
                ids,
                deadline,
                leased.starts,
            );
            match started {
                Ok((published, end)) => {
                    if let Some(theirs) = self.publish(&published)? {
                        kill(&published.proc());
                        self.cached = Some(theirs.clone());
                        return Ok((theirs.proc(), probe(&theirs.proc())?.unwrap_or(0)));
                    }
                    self.cached = Some(published.clone());
                    return Ok((published.proc(), end));
                }
                Err(e) => {
                    let me = self.me.clone();
                    state::update(&self.key, |r| Some(r.released_by(&me)));
                    return Err(e);
                }
            }
        }
    }

    /// Publishes `ours`; `Some(theirs)` when another instance published a running server
    /// meanwhile (its lease ran out under us): ours is then to be dropped.
    fn publish(&self, ours: &Published) -> Result<Option<Published>, ToolError> {
        for _ in 0..16 {
            let (raw, record) = state::load(&self.key)?;
            if let Some(theirs) = &record.server
                && theirs != ours
                && probe(&theirs.proc())?.is_some()
            {
                return Ok(Some(theirs.clone()));
            }
            if state::swap(&self.key, raw.as_deref(), &record.with_server(ours.clone()))? {
                return Ok(None);
            }
        }
        Err(ToolError::execution("the MCP server's record kept changing; try again").retryable())
    }
}
