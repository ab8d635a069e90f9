//! Starting a stdio server: its container (the backend's own, labelled
//! `mcp-bridge.role=server` — or `session` and `mcp-bridge.session=ID` for one session's
//! own server — and with its config's fingerprint, created and started when there is none
//! running), its process (through the sandbox agent, with the config's env) and its MCP
//! handshake (`initialize`, then `notifications/initialized`). The shared server and the
//! servers of sessions start the same way, each in a container of its own.

use crate::jsonrpc;
use crate::redact::Redactor;
use crate::server_state::Published;
use crate::session::PROTOCOL_VERSION;
use crate::stdio::{Failure, IdMaker, exchange, exited, line_of, read_reply, write_line};
use crate::stdio_config::StdioSettings;
use crate::stdio_server::{Proc, kill, pause, probe};
use std::time::{Duration, Instant};
use wharf_sdk::host::container::{self, ContainerInfo, ContainerSpec, ContainerState};
use wharf_sdk::host::exec::Command;
use wharf_sdk::host::process::{self, ProcessSpec};
use wharf_sdk::host::{log, sandboxing, secrets};
use wharf_sdk::{ToolError, Value, json};

/// The label that marks the server's container, and the one naming its config.
pub const ROLE_LABEL: &str = "mcp-bridge.role";
const FINGERPRINT_LABEL: &str = "mcp-bridge.fingerprint";
/// The label naming the session whose server a `session` container holds.
pub const SESSION_LABEL: &str = "mcp-bridge.session";

/// Whose server a container holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerOwner<'a> {
    /// The server every instance shares (`mcp-bridge.role=server`).
    Shared,
    /// One Wharf session's own (`mcp-bridge.role=session`, `mcp-bridge.session=ID`),
    /// created inside the session, so the host labels it with the session too.
    Session(&'a str),
}

impl ServerOwner<'_> {
    fn role(self) -> &'static str {
        match self {
            ServerOwner::Shared => "server",
            ServerOwner::Session(_) => "session",
        }
    }

    fn labels(self, fingerprint: &str) -> Vec<(String, String)> {
        let mut labels = vec![
            (ROLE_LABEL.into(), self.role().into()),
            (FINGERPRINT_LABEL.into(), fingerprint.to_string()),
        ];
        if let ServerOwner::Session(id) = self {
            labels.push((SESSION_LABEL.into(), id.to_string()));
        }
        labels
    }

    /// Whether `info` is a server container of this owner (any config, any state).
    pub fn holds(self, info: &ContainerInfo) -> bool {
        let label = |key: &str| info.labels.iter().find(|(k, _)| k == key).map(|(_, v)| v);
        label(ROLE_LABEL).map(String::as_str) == Some(self.role())
            && match self {
                ServerOwner::Shared => true,
                ServerOwner::Session(id) => label(SESSION_LABEL).map(String::as_str) == Some(id),
            }
    }

    /// The server containers of this owner: the backend's shared ones, or the session's.
    pub fn containers(self) -> Result<Vec<ContainerInfo>, ToolError> {
        let session = match self {
            ServerOwner::Shared => None,
            ServerOwner::Session(id) => Some(id.to_string()),
        };
        Ok(container::list_owned(session.as_deref())?
            .into_iter()
            .filter(|c| self.holds(c))
            .collect())
    }
}

/// Output kept by the agent for the server (stdout and stderr).
const BUFFER_BYTES: u32 = 4 << 20;
/// How long a new container's agent may take to take its first process.
const AGENT_READY: Duration = Duration::from_secs(5);
/// How long the end of a process that would not take its handshake is waited for.
const END_WAIT: Duration = Duration::from_secs(2);

fn probe_running(server: &Proc) -> bool {
    !matches!(probe(server), Ok(None))
}

/// Starts `owner`'s server in its container (labelled with `fingerprint`) and runs its
/// handshake; `starts` counts the starts of this streak, for the log.
pub fn start_server(
    settings: &StdioSettings,
    owner: ServerOwner,
    fingerprint: &str,
    redactor: &mut Redactor,
    ids: &mut IdMaker,
    deadline: Instant,
    starts: u32,
) -> Result<(Published, u64), ToolError> {
    let env = settings.resolve_env(&mut |name| {
        let value = secrets::get(name)?;
        redactor.remember(name, &value);
        Ok(value)
    })?;
    let (container, created) = server_container(settings, owner, fingerprint)?;
    // Processes nobody published (a start cut short by its call's deadline) go.
    for stray in process::list(&container)?.iter().filter(|p| p.running) {
        kill(&Proc {
            container: container.clone(),
            pid: stray.pid,
        });
    }
    let spec = ProcessSpec {
        container: container.clone(),
        command: Command::Argv(settings.command.clone()),
        env,
        workdir: None,
        user: settings.sandbox.as_ref().and_then(|o| o.user.clone()),
        buffer_bytes: BUFFER_BYTES,
        terminal: None,
    };
    let ready_by = Instant::now() + AGENT_READY;
    let info = loop {
        match process::start(&spec) {
            Ok(info) => break info,
            // A new container's agent may not listen yet.
            Err(e)
                if created
                    && e.code == 4000
                    && e.message.contains("agent")
                    && Instant::now() < ready_by.min(deadline) =>
            {
                pause(Duration::from_millis(100));
            }
            Err(e) => return Err(e.into()),
        }
    };
    let server = Proc {
        container: container.clone(),
        pid: info.pid,
    };
    let (version, end) = handshake(&server, ids, deadline).inspect_err(|_| kill(&server))?;
    let whose = match owner {
        ServerOwner::Shared => String::new(),
        ServerOwner::Session(id) => format!(" of session {id}"),
    };
    log::info(&format!(
        "started the MCP server `{}`{whose} (container {}, pid {}, start {} of this streak), protocol {version}",
        jsonrpc::truncate(&settings.command.join(" "), 120),
        &container[..12.min(container.len())],
        info.pid,
        starts
    ));
    Ok((
        Published {
            container,
            pid: info.pid,
            version,
            started_at_ms: info.started_at_ms,
        },
        end,
    ))
}

/// A running container for `owner`'s server: its own with this config, or a new one
/// (its containers of an older config, or stopped, are removed then). `true` when it is new.
fn server_container(
    settings: &StdioSettings,
    owner: ServerOwner,
    fingerprint: &str,
) -> Result<(String, bool), ToolError> {
    let label = |c: &ContainerInfo, key: &str| {
        c.labels
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
    };
    let mut servers = owner.containers()?;
    servers.sort_by_key(|c| std::cmp::Reverse(c.created_at_ms));
    let ours = |c: &ContainerInfo| label(c, FINGERPRINT_LABEL).as_deref() == Some(fingerprint);
    if let Some(running) = servers
        .iter()
        .find(|c| ours(c) && c.state == ContainerState::Running)
    {
        return Ok((running.id.clone(), false));
    }
    for stale in &servers {
        let _ = container::remove(&stale.id);
    }
    let spec = ContainerSpec {
        image: settings.image.clone(),
        command: settings.keep_alive_command.clone(),
        env: Vec::new(),
        workdir: None,
        labels: owner.labels(fingerprint),
        mounts: Vec::new(),
        network: settings.network.to_spec(),
        cpu_millis: Some(settings.cpu_millis),
        memory_bytes: Some(settings.memory_bytes),
        pids_limit: Some(settings.pids_limit),
        read_only_root: false,
    };
    let info = match &settings.sandbox {
        Some(options) => sandboxing::create(&spec, options)?,
        None => container::create(&spec)?,
    };
    if let Err(e) = container::start(&info.id) {
        let _ = container::remove(&info.id);
        return Err(e.into());
    }
    Ok((info.id, true))
}

/// The MCP handshake on a new process: `initialize`, then `notifications/initialized`.
/// Returns the protocol version and the output's offset after the reply.
fn handshake(
    server: &Proc,
    ids: &mut IdMaker,
    deadline: Instant,
) -> Result<(String, u64), ToolError> {
    let id = ids.next_id();
    let params = json!({
        "protocolVersion": PROTOCOL_VERSION,
        "capabilities": {},
        "clientInfo": {"name": "wharf-mcp-bridge", "version": env!("CARGO_PKG_VERSION")},
    });
    let line = line_of(
        &jsonrpc::request(id.as_str(), "initialize", Some(params)),
        "initialize",
    )?;
    let read = match exchange(server, 0, &line, &id, "initialize", deadline) {
        // A process that exits at once no longer takes its input: its end says why.
        Err(Failure::NotSent(e)) if !probe_running(server) => read_reply(
            server,
            0,
            &id,
            "initialize",
            deadline.min(Instant::now() + END_WAIT),
        )
        .and(Err(Failure::NotSent(e))),
        read => read,
    };
    let (reply, end) = match read {
        Ok(done) => done,
        Err(Failure::Exited(code, tail)) => {
            return Err(exited(code, &tail, " before its handshake was done"));
        }
        Err(Failure::NotSent(e) | Failure::Error(e)) => return Err(e),
    };
    let result = reply.into_result().map_err(|e| {
        ToolError::execution(format!(
            "the MCP server refused to initialize: {}",
            e.message
        ))
    })?;
    let version = match result.get("protocolVersion").and_then(Value::as_str) {
        Some(v)
            if !v.is_empty() && v.len() <= 64 && v.bytes().all(|b| (0x21..=0x7e).contains(&b)) =>
        {
            v.to_string()
        }
        _ => {
            return Err(ToolError::execution(
                "the MCP server's initialize result has no valid `protocolVersion`",
            ));
        }
    };
    write_line(
        server,
        &line_of(
            &jsonrpc::notification("notifications/initialized"),
            "notifications/initialized",
        )?,
    )?;
    Ok((version, end))
}
