//! Terminals (docs/agents.md, "Terminals"): a shell on a terminal in a session's sandbox,
//! for a person or an agent over a WebSocket (`api/terminal` is the adapter). The sandbox
//! agent runs the process on a pseudo-terminal (a background process with a terminal size);
//! this module opens one, or attaches to one the session already has, for a caller that may
//! use the session (its tenant's token, or a single-use ticket such a caller minted).

use std::sync::Arc;
use std::time::{Duration, Instant};

use rand_core::{OsRng, RngCore as _};

use super::Wharf;
use super::session_sandbox::Lookup;
use crate::engines::container_types::{
    Command, OutputChunk, OutputRead, ProcessStart, Signal, TerminalSize,
};
use crate::engines::{ContainerEngine, KvScope, Owner};
use crate::error_code::{Code, WharfError};
use crate::preview_signature::PREVIEW_KV_OWNER;
use crate::sessions::SessionManager;
use crate::tenant::Tenant;
use crate::terminal_ticket::{self as ticket, TICKET_TTL_SECONDS};

/// Terminals open on this host at most; the next is refused (4290) until one closes.
pub const MAX_TERMINALS: usize = 256;
/// The longest command a terminal may be opened with.
pub const MAX_TERMINAL_COMMAND_BYTES: usize = 4096;
/// Redeemed-ticket rows a session keeps before the expired ones are dropped.
const REDEEMED_ROWS_SWEPT_AT: usize = 64;
/// How often a terminal's input counts as the session's activity (its idle TTL).
const TOUCH_EVERY: Duration = Duration::from_secs(30);

/// What runs when the caller names no command: bash where the image has it, else `sh`.
const DEFAULT_SHELL: &str = "if command -v bash >/dev/null 2>&1; then exec bash; fi; exec sh";

/// A minted ticket.
#[derive(Debug, Clone)]
pub struct TerminalTicket {
    /// Present it as `?ticket=` when opening the terminal.
    pub ticket: String,
    /// When it stops working, Unix seconds.
    pub expires_at_s: u64,
}

/// How a terminal request proves it may use the session.
#[derive(Debug, Clone, Copy)]
pub enum TerminalAccess<'a> {
    /// A bearer token's tenant.
    Tenant(&'a Tenant),
    /// A ticket minted for the session (single use).
    Ticket(&'a str),
}

/// Which terminal to open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TerminalTarget {
    /// A new process on a new terminal: the shell, or this command line.
    New {
        /// A command line for the sandbox's shell, or `None` for the default shell.
        command: Option<String>,
    },
    /// A terminal process the session already runs (its pid in the sandbox).
    Attach {
        /// The process.
        pid: u32,
    },
}

/// One open terminal: a process on a pseudo-terminal in a session's sandbox. Its slot is
/// freed when it is dropped; a terminal it started is hung up ([`Terminal::hang_up`]).
pub struct Terminal {
    engine: Arc<dyn ContainerEngine>,
    sessions: Arc<SessionManager>,
    owner: Owner,
    container: String,
    session: String,
    /// The process.
    pub pid: u32,
    /// Where its output is read from first (an attached terminal: its recent output).
    pub first_offset: u64,
    started_here: bool,
    last_touch: std::sync::Mutex<Instant>,
    _slot: tokio::sync::OwnedSemaphorePermit,
}

impl std::fmt::Debug for Terminal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Terminal")
            .field("session", &self.session)
            .field("pid", &self.pid)
            .finish_non_exhaustive()
    }
}

/// Bytes of an attached terminal's earlier output replayed to the new connection.
const ATTACH_REPLAY_BYTES: u64 = 64 * 1024;

impl Terminal {
    /// Output from `offset`, waiting up to `wait_ms` when there is none yet.
    pub async fn read(
        &self,
        offset: u64,
        max_bytes: u32,
        wait_ms: u32,
    ) -> Result<OutputChunk, WharfError> {
        let read = OutputRead {
            pid: self.pid,
            offset,
            max_bytes,
            wait_ms,
        };
        Ok(self
            .engine
            .process_output(&self.owner, &self.container, read)
            .await?)
    }

    /// Types `data` (keys, a paste). Counts as the session's activity.
    pub async fn write(&self, data: Vec<u8>) -> Result<(), WharfError> {
        self.engine
            .process_input(&self.owner, &self.container, self.pid, data, false)
            .await?;
        self.touch_session().await;
        Ok(())
    }

    /// Resizes the terminal.
    pub async fn resize(&self, size: TerminalSize) -> Result<(), WharfError> {
        check_size(size)?;
        Ok(self
            .engine
            .resize_process(&self.owner, &self.container, self.pid, size)
            .await?)
    }

    /// Ends the connection's use of the terminal: a process this connection started gets
    /// SIGHUP (as when a terminal window closes); an attached one keeps running.
    pub async fn hang_up(&self) {
        if !self.started_here {
            return;
        }
        let signal = self
            .engine
            .signal_process(&self.owner, &self.container, self.pid, Signal::Hup)
            .await;
        if let Err(e) = signal {
            tracing::debug!(session = %self.session, pid = self.pid, "terminal hang-up: {e}");
        }
    }

    async fn touch_session(&self) {
        let due = match self.last_touch.lock() {
            Ok(mut last) if last.elapsed() >= TOUCH_EVERY => {
                *last = Instant::now();
                true
            }
            _ => false,
        };
        if due && let Err(e) = self.sessions.refresh(&Tenant::Every, &self.session).await {
            tracing::debug!(session = %self.session, "terminal activity not recorded: {e}");
        }
    }
}

/// A terminal size the agent takes: 1–1000 each way.
pub fn check_size(size: TerminalSize) -> Result<(), WharfError> {
    if size.fits() {
        Ok(())
    } else {
        Err(WharfError::new(
            Code::InvalidInput,
            format!(
                "a terminal is 1 to 1000 columns and rows, got {}x{}",
                size.cols, size.rows
            ),
        ))
    }
}

fn now_s() -> u64 {
    crate::clock::now_ms() / 1000
}

impl Wharf {
    /// A single-use ticket that opens a terminal in `tenant`'s session for 30 s.
    pub async fn terminal_ticket(
        &self,
        tenant: &Tenant,
        session_id: &str,
    ) -> Result<TerminalTicket, WharfError> {
        self.sessions.get(tenant, session_id).await?;
        let mut nonce = [0u8; 16];
        OsRng.fill_bytes(&mut nonce);
        let expires_at_s = now_s() + TICKET_TTL_SECONDS;
        let key = self.preview_key().await?;
        Ok(TerminalTicket {
            ticket: ticket::mint(key, session_id, expires_at_s, &hex::encode(nonce)),
            expires_at_s,
        })
    }

    /// Opens a terminal of `size` in a session's sandbox for a request that proved `access`:
    /// a new process on a terminal, or one the session runs. A session that is not the
    /// caller's, or a ticket that is not valid now for this session (or was used), is
    /// refused before the sandbox is touched.
    pub async fn open_terminal(
        &self,
        access: TerminalAccess<'_>,
        session_id: &str,
        target: TerminalTarget,
        size: TerminalSize,
    ) -> Result<Terminal, WharfError> {
        check_size(size)?;
        if let TerminalTarget::New {
            command: Some(command),
        } = &target
            && (command.len() > MAX_TERMINAL_COMMAND_BYTES || command.contains('\0'))
        {
            return Err(WharfError::new(
                Code::InvalidInput,
                format!(
                    "a terminal's command is at most {MAX_TERMINAL_COMMAND_BYTES} bytes, with no NUL"
                ),
            ));
        }
        let record = match access {
            TerminalAccess::Tenant(tenant) => self.sessions.get(tenant, session_id).await?,
            TerminalAccess::Ticket(presented) => {
                self.redeem_terminal_ticket(session_id, presented).await?;
                self.sessions.get(&Tenant::Every, session_id).await?
            }
        };
        let slot = self
            .terminal_slots
            .clone()
            .try_acquire_owned()
            .map_err(|_| {
                WharfError::new(
                    Code::RateLimited,
                    format!("this host has {MAX_TERMINALS} terminals open: close one first"),
                )
                .retryable(true)
            })?;
        // Asked afresh: a terminal is opened rarely, and a stale container would fail it.
        let (owner, container) = self
            .running_sandbox(&record, Lookup::Fresh, "terminal")
            .await?;
        let engine = self.services.containers.clone();
        let (pid, first_offset, started_here) = match target {
            TerminalTarget::New { command } => {
                let start = ProcessStart {
                    command: Command::Shell(command.unwrap_or_else(|| DEFAULT_SHELL.to_string())),
                    env: vec![("TERM".to_string(), "xterm-256color".to_string())],
                    workdir: None,
                    user: None,
                    buffer_bytes: 0,
                    terminal: Some(size),
                };
                let started = engine.start_process(&owner, &container, start).await?;
                (started.pid, 0, true)
            }
            TerminalTarget::Attach { pid } => {
                let processes = engine.list_processes(&owner, &container).await?;
                let Some(process) = processes.iter().find(|p| p.pid == pid) else {
                    return Err(WharfError::new(
                        Code::InvalidRequest,
                        format!("session {session_id} has no process {pid}"),
                    ));
                };
                if !process.terminal {
                    return Err(WharfError::new(
                        Code::InvalidRequest,
                        format!("process {pid} of session {session_id} runs on no terminal"),
                    ));
                }
                engine.resize_process(&owner, &container, pid, size).await?;
                let replay_from = process.output_bytes.saturating_sub(ATTACH_REPLAY_BYTES);
                (pid, replay_from, false)
            }
        };
        Ok(Terminal {
            engine,
            sessions: self.sessions.clone(),
            owner,
            container,
            session: session_id.to_string(),
            pid,
            first_offset,
            started_here,
            last_touch: std::sync::Mutex::new(Instant::now()),
            _slot: slot,
        })
    }

    /// Whether `presented` is a ticket for `session_id` now (its signature and expiry; not
    /// whether it was used): 4010 otherwise. A request with a ticket is checked this far
    /// before anything else is asked of it.
    pub async fn check_terminal_ticket(
        &self,
        session_id: &str,
        presented: &str,
    ) -> Result<ticket::Redeemable, WharfError> {
        let key = self.preview_key().await?;
        ticket::verify(key, session_id, presented, now_s())
            .map_err(|e| WharfError::new(Code::Unauthorized, e.to_string()))
    }

    /// Accepts a ticket for `session_id` once: its signature and expiry, then its nonce's
    /// row (a second use finds the row). Expired rows of the session go as new ones come.
    async fn redeem_terminal_ticket(
        &self,
        session_id: &str,
        presented: &str,
    ) -> Result<(), WharfError> {
        let redeemable = self.check_terminal_ticket(session_id, presented).await?;
        let kv = &self.services.kv;
        let scope = KvScope::Session(session_id.to_string());
        let fresh = kv
            .insert_if_absent(PREVIEW_KV_OWNER, &scope, &redeemable.row_key(), b"1")
            .await?;
        if !fresh {
            return Err(WharfError::new(
                Code::Unauthorized,
                "the terminal ticket was already used",
            ));
        }
        let rows = kv
            .keys(PREVIEW_KV_OWNER, &scope, ticket::REDEEMED_PREFIX)
            .await?;
        if rows.len() >= REDEEMED_ROWS_SWEPT_AT {
            let now = now_s();
            for row in rows {
                if ticket::row_expiry(&row).is_some_and(|at| at <= now) {
                    kv.delete(PREVIEW_KV_OWNER, &scope, &row).await?;
                }
            }
        }
        Ok(())
    }
}
