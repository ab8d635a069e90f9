//! The `wharf` command line: `serve`, `tools`, `call`, `sessions`, `inspect`, `new`, `dev`,
//! and `pull`, `push`, `sign`, `keygen` for OCI registries.

mod dev;
mod oci;
mod progress;
mod sessions;
mod volumes;

use progress::with_progress;

use crate::config::{BackendConfig, WharfConfig};
use crate::server::{BoundServer, termination_signal};
use crate::{Wharf, bundled};
use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::path::PathBuf;

/// Wharf: WebAssembly backends, served to agents.
#[derive(Debug, Parser)]
#[command(name = "wharf", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve backends over HTTP. With no config, serves the bundled examples on 127.0.0.1:7420.
    Serve {
        /// The config file.
        #[arg(long, env = "WHARF_CONFIG")]
        config: Option<PathBuf>,
        /// Listen address (overrides the config).
        #[arg(long)]
        listen: Option<SocketAddr>,
        /// Data directory: compile cache and state (overrides the config).
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// Serve without tokens on a non-loopback address.
        #[arg(long)]
        insecure: bool,
        /// Watch this directory: `NAME.wasm` (with an optional `NAME.toml`) is loaded as
        /// `NAME`, replaced when the file changes and unloaded when it goes. Without
        /// `--config`, only these backends are served (not the bundled examples).
        #[arg(long)]
        plugins: Option<PathBuf>,
    },
    /// List the tools of a running server.
    Tools {
        /// The server.
        #[arg(long, env = "WHARF_URL", default_value = "http://127.0.0.1:7420")]
        url: String,
        /// Bearer token.
        #[arg(long, env = "WHARF_TOKEN", hide_env_values = true)]
        token: Option<String>,
    },
    /// Call a tool on a running server.
    Call {
        /// `backend:action` (or an alias).
        tool: String,
        /// Arguments, a JSON object.
        #[arg(long, default_value = "{}")]
        args: String,
        /// Session id, for session tools.
        #[arg(long)]
        session: Option<String>,
        /// The server.
        #[arg(long, env = "WHARF_URL", default_value = "http://127.0.0.1:7420")]
        url: String,
        /// Bearer token.
        #[arg(long, env = "WHARF_TOKEN", hide_env_values = true)]
        token: Option<String>,
    },
    /// Create, list, delete, pause, resume, snapshot or fork sessions on a running server.
    Sessions {
        /// What to do.
        #[command(subcommand)]
        command: sessions::SessionsCommand,
        /// The server, and the token to reach it with.
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Create, list or delete the caller's named volumes on a running server.
    Volumes {
        /// What to do.
        #[command(subcommand)]
        command: volumes::VolumesCommand,
        /// The server, and the token to reach it with.
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Show what a component is: world, WIT version, tools with schemas, capabilities.
    Inspect {
        /// The `.wasm` file (or `bundled:NAME`).
        file: String,
        /// Data directory for the compile cache.
        #[arg(long, default_value = ".wharf")]
        data_dir: PathBuf,
    },
    /// Scaffold a backend `PARENT/NAME/`: a Rust crate that builds with
    /// `cargo build --release --target wasm32-wasip2`, or with `--lang python` a Python
    /// package that builds with `wharf-py build app.py -o NAME.wasm`.
    New {
        /// The crate name (also the backend's name).
        name: String,
        /// A sandbox provider skeleton instead of a resource backend (Rust).
        #[arg(long)]
        provider: bool,
        /// The directory to create the crate in.
        #[arg(long, default_value = ".")]
        dir: PathBuf,
        /// The language of the new backend.
        #[arg(long, value_enum, default_value = "rust")]
        lang: crate::scaffold::Lang,
        /// Depend on a local checkout of the SDK (the `sdk/` crate, or `sdk/python` for
        /// Python) instead of the copy this binary carries (written to `vendor/`).
        #[arg(long, alias = "sdk", conflicts_with_all = ["sdk_git", "sdk_registry"])]
        sdk_path: Option<PathBuf>,
        /// Depend on the `wharf-sdk` crate in this git repository (Rust).
        #[arg(long, conflicts_with = "sdk_registry")]
        sdk_git: Option<String>,
        /// Depend on the registry's `wharf-sdk` (crates.io; for Python, PyPI) instead of the
        /// copy this binary carries.
        #[arg(long)]
        sdk_registry: bool,
    },
    /// Build the backend crate in DIR for wasm32-wasip2, serve it on a loopback server, and
    /// rebuild and hot-swap it on every save. Grants what the backend declares.
    Dev {
        /// The crate directory.
        #[arg(default_value = ".")]
        dir: PathBuf,
        /// Listen address (loopback only).
        #[arg(long, default_value = "127.0.0.1:7420")]
        listen: SocketAddr,
    },
    /// Pull a component from an OCI registry into the data dir's cache; prints the
    /// reference pinned to its digest.
    Pull(oci::PullArgs),
    /// Push a component to an OCI registry as a Wasm artifact; prints the pinned reference.
    Push(oci::PushArgs),
    /// Sign a component in an OCI registry (cosign-compatible, ECDSA P-256).
    Sign(oci::SignArgs),
    /// Write a new signing key pair (`PREFIX.key`, `PREFIX.pub`).
    Keygen(oci::KeygenArgs),
    /// Internal: compiles the component on stdin into the compile cache at `--cache-dir`
    /// (the host runs cold compiles in this child so their memory leaves with it).
    #[command(name = "compile-worker", hide = true)]
    CompileWorker {
        /// The compile cache directory.
        #[arg(long)]
        cache_dir: PathBuf,
    },
}

/// The configuration `serve` uses: the file if given, else the bundled examples.
pub fn serve_config(
    config: Option<PathBuf>,
    listen: Option<SocketAddr>,
    data_dir: Option<PathBuf>,
) -> Result<WharfConfig> {
    let mut cfg = match config {
        Some(path) => WharfConfig::load(&path)?,
        None => {
            let mut cfg = WharfConfig::default();
            for name in bundled::DEFAULT_BACKENDS {
                cfg.backends.insert(
                    (*name).to_string(),
                    BackendConfig::at(format!("bundled:{name}")),
                );
            }
            cfg
        }
    };
    if let Some(listen) = listen {
        cfg.server.listen = listen;
    }
    if let Some(dir) = data_dir {
        cfg.server.data_dir = dir;
    }
    Ok(cfg)
}

/// Runs the command line.
pub async fn run(cli: Cli) -> Result<()> {
    // Cold compiles run in a child of this binary; a host that cannot start one (the binary
    // was replaced or removed) compiles in-process instead, as does one told to (to measure
    // the difference, or where starting processes is not allowed).
    if std::env::var_os("WHARF_COMPILE_IN_PROCESS").is_none()
        && let Ok(exe) = std::env::current_exe()
    {
        crate::runtime::compile_worker::compile_in_children_of(exe);
    }
    match cli.command {
        Command::Serve {
            config,
            listen,
            data_dir,
            insecure,
            plugins,
        } => {
            let bare = config.is_none();
            let mut cfg = serve_config(config, listen, data_dir)?;
            if bare && plugins.is_some() {
                cfg.backends.clear();
            }
            crate::server::check_exposure(cfg.server.listen, &cfg.server.auth, insecure)?;
            crate::audit::start(&cfg.audit)?;
            crate::telemetry::start(&cfg.telemetry)?;
            let started = std::time::Instant::now();
            let wharf = Wharf::from_config(&cfg).await?;
            let _watcher = match plugins {
                Some(dir) => Some(crate::hot_reload::watch(wharf.clone(), dir).await?),
                None => None,
            };
            let server = BoundServer::bind(wharf.clone(), cfg.server.listen).await?;
            let addr = server.local_addr()?;
            let names: Vec<String> = wharf
                .backends()
                .iter()
                .map(|b| b.name.to_string())
                .collect();
            tracing::info!(%addr, backends = ?names, startup_ms = started.elapsed().as_millis() as u64, "wharf is serving");
            eprintln!(
                "wharf: serving {} on http://{addr} (ready in {} ms)",
                names.join(", "),
                started.elapsed().as_millis()
            );
            server.serve(termination_signal()).await
        }
        Command::Tools { url, token } => {
            let reply = http_json(with_token(
                reqwest::Client::new().get(format!("{url}/v1/tools")),
                token,
            ))
            .await?;
            if reply["code"].as_u64() != Some(0) {
                bail!(
                    "{} ({})",
                    reply["message"].as_str().unwrap_or("the server refused"),
                    reply["code"]
                );
            }
            for tool in reply["data"]["tools"].as_array().into_iter().flatten() {
                println!(
                    "{:<28} {}",
                    tool["name"].as_str().unwrap_or(""),
                    tool["description"].as_str().unwrap_or("")
                );
            }
            Ok(())
        }
        Command::Call {
            tool,
            args,
            session,
            url,
            token,
        } => {
            let args: Value = serde_json::from_str(&args).context("--args is not valid JSON")?;
            let mut body = json!({ "tool": tool, "args": args });
            if let Some(session) = &session {
                body["session_id"] = json!(session);
            }
            let reply = with_progress(
                &format!("calling {tool}"),
                http_json(with_token(
                    reqwest::Client::new()
                        .post(format!("{url}/v1/call"))
                        .json(&body),
                    token,
                )),
            )
            .await?;
            println!("{}", serde_json::to_string_pretty(&reply)?);
            match reply["code"].as_u64() {
                Some(0) => Ok(()),
                Some(4007) => bail!(
                    "{}",
                    sessions::session_advice(&tool, &reply, session.as_deref())
                ),
                _ => bail!("the call failed with code {}", reply["code"]),
            }
        }
        Command::Inspect { file, data_dir } => {
            let wharf = Wharf::new(crate::config::ServerConfig {
                data_dir,
                ..Default::default()
            })
            .await?;
            let wasm = Wharf::read_wasm(&file)?;
            let description =
                with_progress(&format!("compiling {file}"), wharf.inspect(wasm)).await?;
            refuse_duplicate_tools(description.tools.iter().map(|t| t.action.as_str()))?;
            println!("{}", serde_json::to_string_pretty(&description)?);
            Ok(())
        }
        Command::Sessions { command, server } => {
            sessions::run(command, &server.url, server.token).await
        }
        Command::Volumes { command, server } => {
            volumes::run(command, &server.url, server.token).await
        }
        Command::Dev { dir, listen } => dev::run(dir, listen).await,
        Command::Pull(args) => oci::pull(args).await,
        Command::Push(args) => oci::push(args).await,
        Command::Sign(args) => oci::sign(args).await,
        Command::Keygen(args) => oci::keygen(args),
        Command::CompileWorker { cache_dir } => {
            crate::runtime::compile_cache::run_worker(&cache_dir)
        }
        Command::New {
            name,
            provider,
            dir,
            lang,
            sdk_path,
            sdk_git,
            sdk_registry,
        } => {
            use crate::scaffold::{Lang, SdkSource};
            let sdk = match (sdk_path, sdk_git, sdk_registry) {
                (Some(path), _, _) => SdkSource::Path(path),
                (None, Some(url), _) => SdkSource::Git(url),
                (None, None, true) => SdkSource::Registry,
                (None, None, false) => SdkSource::default(),
            };
            let build = match (lang, &sdk) {
                (Lang::Rust, _) => "cargo build --release --target wasm32-wasip2".to_string(),
                (Lang::Python, SdkSource::Bundled) => format!(
                    "pip install ./vendor/wharf-sdk` once (in a venv), then `wharf-py build app.py -o {name}.wasm"
                ),
                (Lang::Python, _) => format!("wharf-py build app.py -o {name}.wasm"),
            };
            let created = crate::scaffold::scaffold(&crate::scaffold::NewOptions {
                name,
                provider,
                parent: dir,
                sdk,
                lang,
            })?;
            eprintln!(
                "wharf: created `{}`; in it, build with `{build}`, or run `wharf dev` to build, serve and reload on save",
                created.display()
            );
            Ok(())
        }
    }
}

/// Refuses a component that declares a tool name twice, naming it (a host refuses to load
/// it for the same reason).
fn refuse_duplicate_tools<'a>(names: impl Iterator<Item = &'a str>) -> Result<()> {
    let mut seen = std::collections::BTreeSet::new();
    for name in names {
        if !seen.insert(name) {
            bail!("the backend declares tool `{name}` twice; tool names must be unique");
        }
    }
    Ok(())
}

/// Where a running server is, and the token to reach it with (the options of every
/// command group that talks to one).
#[derive(Debug, clap::Args)]
pub struct ServerArgs {
    /// The server.
    #[arg(
        long,
        env = "WHARF_URL",
        default_value = "http://127.0.0.1:7420",
        global = true
    )]
    pub url: String,
    /// Bearer token.
    #[arg(long, env = "WHARF_TOKEN", hide_env_values = true, global = true)]
    pub token: Option<String>,
}

fn with_token(request: reqwest::RequestBuilder, token: Option<String>) -> reqwest::RequestBuilder {
    match token {
        Some(token) => request.bearer_auth(token),
        None => request,
    }
}

async fn http_json(request: reqwest::RequestBuilder) -> Result<Value> {
    let response = request
        .send()
        .await
        .context("could not reach the Wharf server (is `wharf serve` running?)")?;
    response
        .json::<Value>()
        .await
        .context("the server's reply is not JSON")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_duplicate_tool_name_is_refused_by_name() {
        assert!(refuse_duplicate_tools(["a", "b"].into_iter()).is_ok());
        let err = refuse_duplicate_tools(["a", "b", "a"].into_iter()).unwrap_err();
        assert!(err.to_string().contains("`a` twice"), "{err}");
    }
}
