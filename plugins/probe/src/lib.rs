//! `probe`: exposes the host imports as tools (create / inspect / exec / remove a container,
//! fetch a URL, read a secret), so tests can check what a backend is and is not allowed to
//! do. For tests.

use wharf_sdk::host::{container, exec, kv, process, secrets};
use wharf_sdk::{
    Backend, BackendInfo, Call, Capabilities, Deserialize, JsonSchema, Serialize, ToolError, Tools,
};

struct Probe;

#[derive(Deserialize, JsonSchema)]
struct CreateArgs {
    image: String,
    #[serde(default)]
    mounts: Vec<String>,
    /// Ask for the mounts read-write (read-only otherwise).
    #[serde(default)]
    read_write: bool,
    /// `none`, `bridge` or a network name.
    #[serde(default)]
    network: Option<String>,
    #[serde(default)]
    labels: Vec<(String, String)>,
}

#[derive(Deserialize, JsonSchema)]
struct IdArgs {
    id: String,
}

#[derive(Deserialize, JsonSchema)]
struct ExecArgs {
    id: String,
    command: String,
    /// Output kept per stream (default 65536); a guest may ask for anything.
    #[serde(default)]
    max_output_bytes: Option<u32>,
}

#[derive(Deserialize, JsonSchema)]
struct RunArgs {
    id: String,
    /// A shell command line (or use `argv`).
    #[serde(default)]
    command: Option<String>,
    /// A program and its arguments, run without a shell.
    #[serde(default)]
    argv: Option<Vec<String>>,
    #[serde(default)]
    stdin: Option<String>,
    #[serde(default)]
    user: Option<String>,
    #[serde(default)]
    timeout_ms: Option<u32>,
    #[serde(default)]
    max_output_bytes: Option<u32>,
}

#[derive(Deserialize, JsonSchema)]
struct StartArgs {
    id: String,
    #[serde(default)]
    command: Option<String>,
    #[serde(default)]
    argv: Option<Vec<String>>,
    /// Output kept (0: the agent's default).
    #[serde(default)]
    buffer_bytes: u32,
}

#[derive(Deserialize, JsonSchema)]
struct OutputArgs {
    id: String,
    pid: u32,
    #[serde(default)]
    offset: u64,
    #[serde(default)]
    max_bytes: Option<u32>,
    #[serde(default)]
    wait_ms: u32,
}

#[derive(Deserialize, JsonSchema)]
struct InputArgs {
    id: String,
    pid: u32,
    data: String,
    #[serde(default)]
    close: bool,
}

#[derive(Deserialize, JsonSchema)]
struct SignalArgs {
    id: String,
    pid: u32,
    /// `term`, `kill`, `int`, `hup`, `quit`, `usr1`, `usr2`, `stop` or `cont`.
    signal: String,
}

fn command(line: Option<String>, argv: Option<Vec<String>>) -> Result<exec::Command, ToolError> {
    match (line, argv) {
        (Some(line), None) => Ok(exec::Command::Shell(line)),
        (None, Some(argv)) => Ok(exec::Command::Argv(argv)),
        _ => Err(ToolError::invalid_input("give `command` or `argv`")),
    }
}

fn process_json(p: &process::ProcessInfo) -> wharf_sdk::Value {
    wharf_sdk::json!({
        "pid": p.pid, "command": p.command, "running": p.running, "exit_code": p.exit_code,
        "output_bytes": p.output_bytes, "dropped_bytes": p.dropped_bytes,
    })
}

#[derive(Deserialize, JsonSchema)]
struct CopyOutArgs {
    id: String,
    path: String,
    max_bytes: u64,
}

#[derive(Deserialize, JsonSchema)]
struct KvArgs {
    /// `backend` or `session`.
    scope: String,
    key: String,
    /// Set when given; otherwise read.
    #[serde(default)]
    value: Option<String>,
    /// Repeat the value this many times (to test quotas).
    #[serde(default)]
    repeat: Option<usize>,
}

#[derive(Deserialize, JsonSchema)]
struct SecretArgs {
    name: String,
}

#[derive(Deserialize, JsonSchema)]
struct CounterArgs {
    /// `backend` or `session`.
    scope: String,
    key: String,
    /// Added atomically by the host (contract 0.2.0's `kv.increment`).
    by: i64,
}

#[derive(Deserialize, JsonSchema)]
struct SwapArgs {
    /// `backend` or `session`.
    scope: String,
    key: String,
    /// What the value must be now (absent: the key must be absent).
    #[serde(default)]
    expected: Option<String>,
    /// The new value (absent: delete the key).
    #[serde(default)]
    new: Option<String>,
}

fn scope(name: &str) -> Result<kv::Scope, ToolError> {
    match name {
        "backend" => Ok(kv::Scope::Backend),
        "session" => Ok(kv::Scope::Session),
        other => Err(ToolError::invalid_input(format!("unknown scope `{other}`"))),
    }
}

#[derive(Deserialize, JsonSchema)]
struct FetchArgs {
    url: String,
}

#[derive(Serialize, JsonSchema)]
struct Fetched {
    status: u16,
    body: String,
}

#[derive(Deserialize, JsonSchema)]
struct FloodArgs {
    /// `http://host:port/path` every request GETs.
    url: String,
    /// Requests fired before any is awaited (at most 5000).
    count: u32,
}

/// Fires `count` GETs without awaiting any (as a hostile guest would), then waits for each
/// and counts how they ended: what the host's in-flight caps are for.
fn flood(a: &FloodArgs) -> Result<wharf_sdk::Value, ToolError> {
    use wharf_sdk::bindings::backend_world::wasi::http::{outgoing_handler, types as wasi};
    let rest = a
        .url
        .strip_prefix("http://")
        .ok_or_else(|| ToolError::invalid_input("flood takes an http:// URL"))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let mut pending = Vec::new();
    let mut refused_at_once = 0u32;
    for _ in 0..a.count.min(5000) {
        let request = wasi::OutgoingRequest::new(wasi::Fields::new());
        let _ = request.set_scheme(Some(&wasi::Scheme::Http));
        let _ = request.set_authority(Some(authority));
        let _ = request.set_path_with_query(Some(path));
        let Ok(body) = request.body() else {
            refused_at_once += 1;
            continue;
        };
        match outgoing_handler::handle(request, None) {
            Ok(future) => {
                let _ = wasi::OutgoingBody::finish(body, None);
                pending.push(future);
            }
            Err(_) => refused_at_once += 1,
        }
    }
    let mut ok = 0u32;
    let mut errors = std::collections::BTreeMap::<String, u32>::new();
    for future in &pending {
        future.subscribe().block();
        match future.get() {
            Some(Ok(Ok(_response))) => ok += 1,
            Some(Ok(Err(e))) => *errors.entry(format!("{e:?}")).or_default() += 1,
            _ => *errors.entry("no answer".into()).or_default() += 1,
        }
    }
    Ok(wharf_sdk::json!({
        "sent": pending.len(), "refused_at_once": refused_at_once, "ok": ok, "errors": errors,
    }))
}

fn fetch(url: &str) -> Result<Fetched, ToolError> {
    let response = waki::Client::new().get(url).send().map_err(|e| {
        let text = format!("{e:?}");
        if text.contains("HttpRequestDenied") || text.contains("DestinationIpProhibited") {
            ToolError::new(
                4030,
                format!("outbound HTTP to {url} is not granted: {text}"),
            )
        } else {
            ToolError::execution(format!("fetching {url} failed: {text}"))
        }
    })?;
    let status = response.status_code();
    let body = response
        .body()
        .map_err(|e| ToolError::execution(format!("reading the body failed: {e:?}")))?;
    Ok(Fetched {
        status,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

impl Backend for Probe {
    fn new() -> Self {
        Probe
    }

    fn info() -> BackendInfo {
        BackendInfo::new(
            "probe",
            "0.1.0",
            "Calls host imports on request. For tests.",
        )
        .requires(Capabilities {
            images: vec!["wharf-sandbox:*".into()],
            http_hosts: vec!["*:*".into()],
            ..Default::default()
        })
    }

    fn tools() -> Tools<Self> {
        Tools::new()
            .tool("create", "Create and start a container.", |_: &mut Self, a: CreateArgs, _: &mut Call| {
                let network = match a.network.as_deref() {
                    None | Some("none") => container::Network::None,
                    Some("bridge") => container::Network::Bridge,
                    Some(other) => container::Network::Named(other.to_string()),
                };
                let info = container::create(&container::ContainerSpec {
                    image: a.image,
                    command: Some(vec!["/bin/sh".into(), "-c".into(), "sleep 3600".into()]),
                    env: vec![],
                    workdir: None,
                    labels: a.labels,
                    mounts: a
                        .mounts
                        .into_iter()
                        .map(|m| container::Mount { host_path: m, container_path: "/mnt/data".into(), read_only: !a.read_write })
                        .collect(),
                    network,
                    cpu_millis: None,
                    memory_bytes: None,
                    pids_limit: None,
                    read_only_root: false,
                })?;
                container::start(&info.id)?;
                Ok(info.id)
            })
            .tool("inspect", "Inspect a container by id.", |_: &mut Self, a: IdArgs, _: &mut Call| {
                Ok(container::inspect(&a.id)?.map(|i| i.id))
            })
            .tool("exec", "Run a shell command in a container.", |_: &mut Self, a: ExecArgs, _: &mut Call| {
                let out = exec::run(&exec::ExecRequest {
                    container: a.id,
                    command: exec::Command::Shell(a.command),
                    env: vec![],
                    workdir: None,
                    user: None,
                    stdin: None,
                    timeout_ms: 10_000,
                    max_output_bytes: a.max_output_bytes.unwrap_or(65_536),
                })?;
                Ok(String::from_utf8_lossy(&out.stdout).into_owned())
            })
            .tool("run", "Run a command in a container; returns its whole result.", |_: &mut Self, a: RunArgs, _: &mut Call| {
                let out = exec::run(&exec::ExecRequest {
                    container: a.id,
                    command: command(a.command, a.argv)?,
                    env: vec![],
                    workdir: None,
                    user: a.user,
                    stdin: a.stdin.map(String::into_bytes),
                    timeout_ms: a.timeout_ms.unwrap_or(10_000),
                    max_output_bytes: a.max_output_bytes.unwrap_or(65_536),
                })?;
                Ok(wharf_sdk::json!({
                    "exit_code": out.exit_code,
                    "stdout": String::from_utf8_lossy(&out.stdout),
                    "stderr": String::from_utf8_lossy(&out.stderr),
                    "stdout_truncated": out.stdout_truncated,
                    "stdout_len": out.stdout.len(),
                    "timed_out": out.timed_out,
                }))
            })
            .tool("process_start", "Start a background process in a container (contract 0.3.0's `process`).", |_: &mut Self, a: StartArgs, _: &mut Call| {
                let started = process::start(&process::ProcessSpec {
                    container: a.id,
                    command: command(a.command, a.argv)?,
                    env: vec![],
                    workdir: None,
                    user: None,
                    buffer_bytes: a.buffer_bytes,
                    terminal: None,
                })?;
                Ok(process_json(&started))
            })
            .tool("process_output", "Read a background process's output from an offset.", |_: &mut Self, a: OutputArgs, _: &mut Call| {
                let out = process::output(&a.id, a.pid, a.offset, a.max_bytes.unwrap_or(65_536), a.wait_ms)?;
                Ok(wharf_sdk::json!({
                    "offset": out.offset,
                    "text": String::from_utf8_lossy(&out.data),
                    "len": out.data.len(),
                    "dropped": out.dropped,
                    "process": process_json(&out.process),
                }))
            })
            .tool("process_input", "Write to a background process's stdin.", |_: &mut Self, a: InputArgs, _: &mut Call| {
                process::write_stdin(&a.id, a.pid, a.data.as_bytes(), a.close)?;
                Ok(true)
            })
            .tool("process_signal", "Signal a background process.", |_: &mut Self, a: SignalArgs, _: &mut Call| {
                let signal = match a.signal.as_str() {
                    "term" => process::Signal::Term,
                    "kill" => process::Signal::Kill,
                    "int" => process::Signal::Int,
                    "hup" => process::Signal::Hup,
                    "quit" => process::Signal::Quit,
                    "usr1" => process::Signal::Usr1,
                    "usr2" => process::Signal::Usr2,
                    "stop" => process::Signal::Stop,
                    "cont" => process::Signal::Cont,
                    other => return Err(ToolError::invalid_input(format!("no signal `{other}`"))),
                };
                process::send_signal(&a.id, a.pid, signal)?;
                Ok(true)
            })
            .tool("process_list", "A container's background processes.", |_: &mut Self, a: IdArgs, _: &mut Call| {
                Ok(process::list(&a.id)?.iter().map(process_json).collect::<Vec<_>>())
            })
            .tool("copy_out", "Copy a file out of a container; returns its length.", |_: &mut Self, a: CopyOutArgs, _: &mut Call| {
                Ok(container::copy_out(&a.id, &a.path, a.max_bytes)?.len() as u64)
            })
            .tool("remove", "Remove a container by id.", |_: &mut Self, a: IdArgs, _: &mut Call| {
                container::remove(&a.id)?;
                Ok(true)
            })
            .tool("list", "Ids of this backend's containers.", |_: &mut Self, _: wharf_sdk::NoArgs, _: &mut Call| {
                Ok(container::list_owned(None)?.into_iter().map(|c| c.id).collect::<Vec<_>>())
            })
            .tool("fetch", "GET a URL through wasi:http.", |_: &mut Self, a: FetchArgs, _: &mut Call| fetch(&a.url))
            .tool("flood", "Fire `count` GETs of `url` before awaiting any; count how they ended.", |_: &mut Self, a: FloodArgs, _: &mut Call| flood(&a))
            .tool("kv", "Set (with `value`) or get a key; returns the value and the scope's keys.", |_: &mut Self, a: KvArgs, _: &mut Call| {
                let s = scope(&a.scope)?;
                if let Some(v) = &a.value {
                    kv::set(s, &a.key, v.repeat(a.repeat.unwrap_or(1)).as_bytes())?;
                }
                let value = kv::get(s, &a.key)?.map(|b| String::from_utf8_lossy(&b).into_owned());
                let keys = kv::list_keys(s, "")?;
                Ok(wharf_sdk::json!({ "value": value, "keys": keys }))
            })
            .session(wharf_sdk::SessionNeed::Optional)
            .tool("secret", "A granted secret's value and the names granted (contract 0.3.0's `secrets`).", |_: &mut Self, a: SecretArgs, _: &mut Call| {
                let value = secrets::get(&a.name)?;
                Ok(wharf_sdk::json!({ "value": value, "names": secrets::names() }))
            })
            .tool("counter", "Add `by` to the integer under `key`, atomically; returns the new value.", |_: &mut Self, a: CounterArgs, _: &mut Call| {
                Ok(kv::increment(scope(&a.scope)?, &a.key, a.by)?)
            })
            .session(wharf_sdk::SessionNeed::Optional)
            .tool("swap", "Replace `expected` with `new` under `key` if it is still `expected`.", |_: &mut Self, a: SwapArgs, _: &mut Call| {
                let swapped = kv::compare_and_swap(
                    scope(&a.scope)?,
                    &a.key,
                    a.expected.as_ref().map(|v| v.as_bytes()),
                    a.new.as_ref().map(|v| v.as_bytes()),
                )?;
                Ok(swapped)
            })
            .session(wharf_sdk::SessionNeed::Optional)
    }
}

wharf_sdk::export_backend!(Probe);
