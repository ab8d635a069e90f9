//! `remote-provider`: a sandbox provider that drives a remote sandbox provisioner over REST,
//! using nothing but outbound HTTP (`wasi:http/outgoing-handler`).
//!
//! Operator config: `{"base_url": "http://host:port", "token": "optional bearer token"}`.
//! The handle of a sandbox is the provisioner's id; its API lives at
//! `{base_url}/api/sandboxes/{id}`, so any pooled instance can serve any sandbox.

mod client;
mod wire;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use client::{Remote, check_id};
use waki::Method;
use wharf_sdk::{
    Capabilities, CommandRequest, CommandResult, Provider, ProviderFeatures, ProviderInfo,
    SandboxSpec, ToolError, Value,
};

/// Code for a spec this provider cannot enforce (DESIGN.md §3: forbidden).
const FORBIDDEN: u32 = 4030;

/// One pooled instance: only the operator's config, no per-sandbox state.
struct RemoteProvider {
    remote: Option<Remote>,
}

impl RemoteProvider {
    fn remote(&self) -> Result<&Remote, ToolError> {
        self.remote.as_ref().ok_or_else(|| {
            ToolError::execution("the remote provider was not warmed up with a config")
        })
    }
}

/// Refuses what the provisioner cannot enforce: an egress allowlist or resource limits.
fn check_spec(spec: &SandboxSpec) -> Result<(), ToolError> {
    let net = &spec.network;
    if !net.block_network
        && (!net.allow_egress_to.is_empty() || !net.allow_egress_to_cidrs.is_empty())
    {
        return Err(ToolError::new(
            FORBIDDEN,
            "this provisioner cannot enforce an egress allowlist",
        ));
    }
    if spec.cpu_millis.is_some() || spec.memory_bytes.is_some() {
        return Err(ToolError::new(
            FORBIDDEN,
            "this provisioner cannot enforce CPU or memory limits",
        ));
    }
    Ok(())
}

fn to_json<T: serde::Serialize>(value: &T) -> Result<Vec<u8>, ToolError> {
    serde_json::to_vec(value).map_err(|e| ToolError::execution(format!("encoding a request: {e}")))
}

fn decode(what: &str, text: &str) -> Result<Vec<u8>, ToolError> {
    B64.decode(text).map_err(|e| {
        ToolError::execution(format!("the provisioner sent invalid base64 {what}: {e}"))
    })
}

impl Provider for RemoteProvider {
    fn new() -> Self {
        Self { remote: None }
    }

    fn info() -> ProviderInfo {
        ProviderInfo::new(
            "remote",
            "0.1.0",
            "Sandboxes from a remote sandbox provisioner, driven over REST.",
        )
        .features(ProviderFeatures::STDIN)
        .requires(Capabilities {
            http_hosts: vec!["*:*".into()],
            ..Capabilities::default()
        })
    }

    fn warmup(&mut self, config: Value) -> Result<(), ToolError> {
        self.remote = Some(Remote::from_config(config)?);
        Ok(())
    }

    fn create(&mut self, spec: SandboxSpec) -> Result<String, ToolError> {
        check_spec(&spec)?;
        let remote = self.remote()?;
        let body = wire::CreateBody {
            image: spec.image.as_deref(),
            env: spec
                .env
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect(),
            workdir: spec.workdir.as_deref(),
            lifetime_seconds: spec.lifetime_seconds,
            owner: spec.owner.as_deref(),
        };
        let reply = remote.send(Method::Post, &remote.sandboxes_url(), Some(to_json(&body)?))?;
        if !matches!(reply.status, 200 | 201) {
            return Err(reply.error("creating a sandbox"));
        }
        let created: wire::Created = reply.json("creating a sandbox")?;
        check_id(&created.id).map_err(|_| {
            ToolError::execution(format!(
                "the provisioner returned an unusable id `{}`",
                created.id
            ))
        })?;
        Ok(created.id)
    }

    fn run_command(
        &mut self,
        sandbox: &str,
        request: CommandRequest,
    ) -> Result<CommandResult, ToolError> {
        check_id(sandbox)?;
        let remote = self.remote()?;
        let body = wire::ExecBody {
            command: &request.command,
            timeout_ms: request.timeout_ms,
            stdin_base64: request.stdin.as_ref().map(|bytes| B64.encode(bytes)),
            max_output_bytes: request.max_output_bytes,
        };
        let url = format!("{}/v1/shell/exec", remote.sandbox_url(sandbox));
        let reply = remote.send(Method::Post, &url, Some(to_json(&body)?))?;
        if reply.status == 404 {
            return Ok(CommandResult::sandbox_terminated());
        }
        if reply.status != 200 {
            return Err(reply.error("running a command"));
        }
        let out: wire::ExecReply = reply.json("running a command")?;
        Ok(CommandResult {
            exit_code: out.exit_code,
            stdout: decode("stdout", &out.stdout_base64)?,
            stderr: decode("stderr", &out.stderr_base64)?,
            stdout_truncated: out.stdout_truncated,
            stderr_truncated: out.stderr_truncated,
            timed_out: out.timed_out,
            sandbox_terminated: false,
        })
    }

    fn destroy(&mut self, sandbox: &str) -> Result<(), ToolError> {
        check_id(sandbox)?;
        let remote = self.remote()?;
        let reply = remote.send(Method::Delete, &remote.sandbox_url(sandbox), None)?;
        match reply.status {
            200 | 204 | 404 => Ok(()),
            _ => Err(reply.error("destroying a sandbox")),
        }
    }

    fn is_alive(&mut self, sandbox: &str) -> Result<bool, ToolError> {
        check_id(sandbox)?;
        let remote = self.remote()?;
        let reply = remote.send(Method::Get, &remote.sandbox_url(sandbox), None)?;
        match reply.status {
            200 => Ok(true),
            404 => Ok(false),
            _ => Err(reply.error("checking a sandbox")),
        }
    }
}

wharf_sdk::export_provider!(RemoteProvider);
