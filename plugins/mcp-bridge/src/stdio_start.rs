//! Starting the stdio server: its container (the backend's own, labelled
//! `mcp-bridge.role=server` and with its config's fingerprint, created and started when
//! there is none running), its process (through the sandbox agent, with the config's env)
//! and its MCP handshake (`initialize`, then `notifications/initialized`).

use crate::jsonrpc;
use crate::redact::Redactor;
use crate::server_state::Published;
use crate::session::PROTOCOL_VERSION;
use crate::stdio::{Failure, IdMaker, exchange, exited, line_of, read_reply, write_line};
use crate::stdio_config::StdioSettings;
use crate::stdio_server::{Proc, kill, pause, probe};
use std::time::{Duration, Instant};
use wharf_sdk::host::container::{self, ContainerSpec, ContainerState};
use wharf_sdk::host::exec::Command;
use wharf_sdk::host::process::{self, ProcessSpec};
use wharf_sdk::host::{log, secrets};
use wharf_sdk::{ToolError, Value, json};

/// The label that marks the server's container, and the one naming its config.
pub const ROLE_LABEL: &str = "mcp-bridge.role";
const FINGERPRINT_LABEL: &str = "mcp-bridge.fingerprint";
/// Output kept by the agent for the server (stdout and stderr).
const BUFFER_BYTES: u32 = 4 << 20;
/// How long a new container's agent may take to take its first process.
const AGENT_READY: Duration = Duration::from_secs(5);
/// How long the end of a process that would not take its handshake is waited for.
const END_WAIT: Duration = Duration::from_secs(2);

fn probe_running(server: &Proc) -> bool {
    !matches!(probe(server), Ok(None))
}

/// Starts the server in the backend's server container (labelled with `fingerprint`)
/// and runs its handshake; `starts` counts the starts of this streak, for the log.
pub fn start_server(
    settings: &StdioSettings,
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
    let (container, created) = server_container(settings, fingerprint)?;
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
        user: None,
        buffer_bytes: BUFFER_BYTES,
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
    log::info(&format!(
        "started the MCP server `{}` (container {}, pid {}, start {} of this streak), protocol {version}",
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

/// A running container for the server: the backend's own with this config, or a new
/// one (containers of an older config are removed then). `true` when it is new.
fn server_container(
    settings: &StdioSettings,
    fingerprint: &str,
) -> Result<(String, bool), ToolError> {
    let label = |c: &container::ContainerInfo, key: &str| {
        c.labels
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
    };
    let mut servers: Vec<_> = container::list_owned(None)?
        .into_iter()
        .filter(|c| label(c, ROLE_LABEL).as_deref() == Some("server"))
        .collect();
    servers.sort_by_key(|c| std::cmp::Reverse(c.created_at_ms));
    let ours =
        |c: &container::ContainerInfo| label(c, FINGERPRINT_LABEL).as_deref() == Some(fingerprint);
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
        labels: vec![
            (ROLE_LABEL.into(), "server".into()),
            (FINGERPRINT_LABEL.into(), fingerprint.to_string()),
        ],
        mounts: Vec::new(),
        network: settings.network.to_spec(),
        cpu_millis: Some(settings.cpu_millis),
        memory_bytes: Some(settings.memory_bytes),
        pids_limit: Some(settings.pids_limit),
        read_only_root: false,
    };
    let info = container::create(&spec)?;
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
