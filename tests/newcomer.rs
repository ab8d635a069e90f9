//! A newcomer with only the `wharf` binary: outside the repository, with `PATH` holding only
//! `wharf`, the Rust toolchain (cargo, rustc, rustdoc), a C linker and Python, `wharf new` (Rust and Python) makes a
//! backend that builds against the SDK the binary carries; the newcomer adds tools that use
//! a session, a kv counter, one outbound HTTP call and an error, serves it with `wharf dev`,
//! calls it over REST and MCP, meets a denial that says what to declare, declares it and
//! sees the hot-swapped backend answer.

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use wharf_integration_tests::processes::wharf_bin;
use wharf_integration_tests::raw_mcp::RawMcpSession;

/// The repository's root, which no generated file may name.
fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .expect("repo root")
}

/// Compiled dependencies shared across runs (the first build of wit-bindgen and serde is
/// the slow part, and it is not what this test is about).
fn shared_target() -> PathBuf {
    repo_root().join("target/newcomer-test")
}

fn real_path_of(program: &str) -> PathBuf {
    let out = Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .expect("sh runs");
    let found = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(!found.is_empty(), "`{program}` is not installed");
    std::fs::canonicalize(found).expect("resolves")
}

/// The toolchain's own binaries (not rustup's proxies, which need rustup).
fn toolchain_bin(name: &str) -> PathBuf {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let out = Command::new(rustc)
        .args(["--print", "sysroot"])
        .output()
        .expect("rustc runs");
    let sysroot = String::from_utf8_lossy(&out.stdout).trim().to_string();
    Path::new(&sysroot).join("bin").join(name)
}

fn python_executable() -> PathBuf {
    let out = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3 runs");
    std::fs::canonicalize(String::from_utf8_lossy(&out.stdout).trim()).expect("python3")
}

/// A directory outside the repository whose `bin/` is the newcomer's whole `PATH`.
struct Desk {
    dir: tempfile::TempDir,
}

impl Desk {
    fn new() -> Desk {
        let dir = tempfile::tempdir().expect("temp dir");
        assert!(!dir.path().starts_with(repo_root()));
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).expect("bin");
        let link = |name: &str, to: PathBuf| {
            std::os::unix::fs::symlink(to, bin.join(name)).expect("link");
        };
        link("wharf", wharf_bin());
        link("cargo", toolchain_bin("cargo"));
        link("rustc", toolchain_bin("rustc"));
        link("rustdoc", toolchain_bin("rustdoc"));
        link("cc", real_path_of("cc"));
        link("python3", python_executable());
        Desk { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `PATH` for the newcomer's commands: `bin/`, and a virtual environment's if given.
    fn path_var(&self, venv: Option<&Path>) -> String {
        let mut parts = Vec::new();
        if let Some(venv) = venv {
            parts.push(venv.join("bin").display().to_string());
        }
        parts.push(self.path().join("bin").display().to_string());
        parts.join(":")
    }

    /// `program` (found on the newcomer's `PATH`) in `dir`, with nothing of this build's
    /// environment.
    fn command(&self, program: &str, dir: &Path, venv: Option<&Path>) -> Command {
        let path = self.path_var(venv);
        let resolved = path
            .split(':')
            .map(|d| Path::new(d).join(program))
            .find(|p| p.exists())
            .unwrap_or_else(|| panic!("`{program}` is not on the newcomer's PATH"));
        let mut cmd = Command::new(resolved);
        cmd.current_dir(dir)
            .env_clear()
            .env("PATH", path)
            .env(
                "HOME",
                std::env::var_os("HOME").unwrap_or_else(|| "/root".into()),
            )
            .env("CARGO_TARGET_DIR", shared_target())
            .env("TMPDIR", self.path());
        if let Some(venv) = venv {
            cmd.env("VIRTUAL_ENV", venv);
        }
        cmd
    }

    fn run(&self, program: &str, args: &[&str], dir: &Path, venv: Option<&Path>) -> String {
        let out = self
            .command(program, dir, venv)
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("{program} {args:?}: {e}"));
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "{program} {args:?} failed:\n{text}");
        text
    }
}

/// Every file `wharf new` wrote: none names the machine the binary was built on.
fn assert_no_build_machine_path(dir: &Path) {
    let root = repo_root().display().to_string();
    let mut stack = vec![dir.to_path_buf()];
    let mut files = 0;
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("read dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
            } else {
                files += 1;
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                assert!(
                    !text.contains(&root) && !text.contains(env!("CARGO_MANIFEST_DIR")),
                    "`{}` names the build machine's repository",
                    path.display()
                );
            }
        }
    }
    assert!(files > 5, "the scaffold wrote {files} files");
}

/// `wharf dev` serving a backend directory on a free loopback port.
struct Dev {
    child: Child,
    port: u16,
    log: PathBuf,
    client: reqwest::Client,
}

impl Dev {
    fn start(desk: &Desk, dir: &Path, venv: Option<&Path>) -> Dev {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        let log = desk.path().join(format!("dev-{port}.log"));
        let file = std::fs::File::create(&log).expect("log");
        let child = desk
            .command("wharf", dir, venv)
            .args(["dev", "--listen", &format!("127.0.0.1:{port}")])
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .expect("wharf dev starts");
        Dev {
            child,
            port,
            log,
            client: reqwest::Client::new(),
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    async fn call(&self, tool: &str, args: Value, session: Option<&str>) -> Option<Value> {
        let mut body = json!({ "tool": tool, "args": args });
        if let Some(session) = session {
            body["session_id"] = json!(session);
        }
        let reply = self
            .client
            .post(format!("http://127.0.0.1:{}/v1/call", self.port))
            .json(&body)
            .send()
            .await
            .ok()?;
        reply.json().await.ok()
    }

    /// Calls `tool` until `done` holds for the reply, or fails after `limit`.
    async fn until(
        &self,
        tool: &str,
        args: Value,
        limit: Duration,
        done: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = Instant::now() + limit;
        loop {
            let reply = self.call(tool, args.clone(), None).await;
            if let Some(reply) = reply.filter(|r| done(r)) {
                return reply;
            }
            assert!(
                Instant::now() < deadline,
                "`{tool}` never answered as expected; wharf dev said:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    async fn session(&self, backend: &str) -> String {
        let reply: Value = self
            .client
            .post(format!("http://127.0.0.1:{}/v1/sessions", self.port))
            .json(&json!({ "backend": backend, "key": uuid::Uuid::new_v4().to_string() }))
            .send()
            .await
            .expect("create session")
            .json()
            .await
            .expect("json");
        reply["data"]["id"]
            .as_str()
            .expect("session id")
            .to_string()
    }
}

impl Drop for Dev {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The same five-minute path for both languages once the backend is served: a session
/// tool twice, the kv counter twice, the error, the tools over MCP, a denied HTTP call
/// whose message names what to declare; then the declaration saved, and the call answered.
/// Prints how long the newcomer took since `wharf new` (the figures the docs quote).
async fn exercise(dev: &Dev, name: &str, started: Instant, save_the_declaration: impl FnOnce()) {
    let tool = |action: &str| format!("{name}:{action}");
    dev.until(
        &tool("hello"),
        json!({"name": "x"}),
        Duration::from_secs(600),
        |r| r["code"] == 0,
    )
    .await;
    eprintln!(
        "newcomer {name}: first call answered {:.1} s after `wharf new`",
        started.elapsed().as_secs_f64()
    );

    let session = dev.session(name).await;
    let first = dev
        .call(&tool("add"), json!({"note": "milk"}), Some(&session))
        .await
        .expect("add");
    assert_eq!(first["code"], 0, "{first}");
    let second = dev
        .call(&tool("add"), json!({"note": "eggs"}), Some(&session))
        .await
        .expect("add");
    assert_eq!(
        second["data"]["result"],
        json!(["milk", "eggs"]),
        "{second}"
    );
    let no_session = dev
        .call(&tool("add"), json!({"note": "x"}), None)
        .await
        .expect("add");
    assert_eq!(no_session["code"], 4007, "{no_session}");

    let one = dev
        .call(&tool("count"), json!({"by": 1}), None)
        .await
        .expect("count");
    let three = dev
        .call(&tool("count"), json!({"by": 2}), None)
        .await
        .expect("count");
    // `wharf dev` keeps its state beside the build (a shared target keeps the count).
    let before = one["data"]["result"].as_i64().expect("a count");
    assert_eq!(three["data"]["result"], before + 2, "{three}");

    let refused = dev
        .call(&tool("refuse"), json!({}), None)
        .await
        .expect("refuse");
    assert_eq!(refused["code"], 4001, "{refused}");

    let mcp = RawMcpSession::open(&format!("http://127.0.0.1:{}/mcp", dev.port)).await;
    let (status, _, body) = mcp.call(1, &tool("count"), json!({"by": 1}), None).await;
    assert_eq!(status, 200, "{body}");
    let reply: Value = serde_json::from_str(&body).expect("one JSON reply");
    assert_eq!(reply["result"]["isError"], false, "{body}");
    assert!(
        reply["result"]["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains(&(before + 3).to_string())),
        "MCP count: {body}"
    );

    let port = wharf_integration_tests::loopback_upstream("fetched over loopback");
    let url = format!("http://127.0.0.1:{port}/data");
    let denied = dev
        .call(&tool("fetch"), json!({"url": url}), None)
        .await
        .expect("fetch");
    assert_eq!(denied["code"], 4030, "{denied}");
    let why = denied["message"].as_str().unwrap_or_default();
    assert!(
        why.contains("requires") && why.contains("http_hosts") && why.contains("wharf dev"),
        "the denial says what to declare under `wharf dev`: {why}"
    );

    save_the_declaration();
    let fetched = dev
        .until(
            &tool("fetch"),
            json!({"url": url}),
            Duration::from_secs(600),
            |r| r["code"] == 0,
        )
        .await;
    assert_eq!(
        fetched["data"]["result"], "fetched over loopback",
        "{fetched}"
    );
    eprintln!(
        "newcomer {name}: all five tools answered {:.1} s after `wharf new`",
        started.elapsed().as_secs_f64()
    );
    assert!(
        dev.log().contains("requires"),
        "dev's banner names `requires`:\n{}",
        dev.log()
    );
}

/// What the Rust newcomer adds to the scaffold's `src/lib.rs` (counted in the docs).
const RUST_TOOLS: &str = r#"
    /// Add a note to this session's list; answers the list.
    #[tool(session = "required")]
    fn add(&mut self, call: &mut wharf_sdk::Call, note: String) -> Result<Vec<String>, ToolError> {
        let mut notes: Vec<String> = call.require_session()?.data_as().unwrap_or_default();
        notes.push(note);
        call.set_session_data(serde_json::to_value(&notes)?);
        Ok(notes)
    }

    /// Add `by` to a counter every session shares; answers the new value.
    #[tool]
    fn count(&mut self, by: i64) -> Result<i64, ToolError> {
        Ok(wharf_sdk::host::kv::increment(wharf_sdk::host::kv::Scope::Backend, "count", by)?)
    }

    /// GET `url`; answers the body.
    #[tool(read_only, open_world)]
    fn fetch(&mut self, url: String) -> Result<String, ToolError> {
        Ok(wharf_sdk::http::get(&url)?.text())
    }

    /// Always says no.
    #[tool]
    fn refuse(&mut self) -> Result<String, ToolError> {
        Err(ToolError::business("no, as asked"))
    }
"#;

#[tokio::test(flavor = "multi_thread")]
async fn a_rust_newcomer_with_only_the_binary() {
    let desk = Desk::new();
    let started = Instant::now();
    let said = desk.run("wharf", &["new", "notes"], desk.path(), None);
    assert!(said.contains("cargo build"), "{said}");
    let dir = desk.path().join("notes");
    assert_no_build_machine_path(&dir);
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).expect("Cargo.toml");
    assert!(
        manifest.contains(r#"path = "vendor/wharf-sdk""#),
        "{manifest}"
    );

    // The scaffold's own unit test passes natively, as its README says.
    let tested = tokio::task::spawn_blocking({
        let mut cmd = desk.command("cargo", &dir, None);
        move || cmd.arg("test").output().expect("cargo test")
    })
    .await
    .expect("join");
    assert!(
        tested.status.success(),
        "{}",
        String::from_utf8_lossy(&tested.stderr)
    );

    let lib = dir.join("src/lib.rs");
    let source = std::fs::read_to_string(&lib).expect("lib.rs");
    let marker = "    /// Greet `name`.";
    assert!(source.contains(marker), "the scaffold's hello tool moved");
    std::fs::write(
        &lib,
        source.replacen(marker, &format!("{RUST_TOOLS}\n{marker}"), 1),
    )
    .expect("write");

    let dev = Dev::start(&desk, &dir, None);
    exercise(&dev, "notes", started, || {
        let source = std::fs::read_to_string(&lib).expect("lib.rs");
        let declared = source.replace(
            r#"BackendInfo::new("notes", "0.1.0", "Greets whoever it is asked to.")"#,
            r#"BackendInfo::new("notes", "0.2.0", "Greets whoever it is asked to.").requires(wharf_sdk::Capabilities { http_hosts: vec!["127.0.0.1:*".into()], ..Default::default() })"#,
        );
        assert_ne!(source, declared, "the scaffold's BackendInfo moved");
        std::fs::write(&lib, declared).expect("save");
    })
    .await;
}

/// What the Python newcomer adds to the scaffold's `app.py`.
const PYTHON_TOOLS: &str = r#"
    @tool("add", session="required")
    def add(self, note: str, session: Session) -> list:
        """Adds a note to this session's list; answers the list."""
        session.data.setdefault("notes", []).append(note)
        return session.data["notes"]

    @tool("count")
    def count(self, by: int) -> int:
        """Adds `by` to a counter every session shares; answers the new value."""
        return kv.increment("count", by)

    @tool("fetch", read_only=True)
    def fetch(self, url: str) -> str:
        """GETs `url`; answers the body."""
        return http.get(url).text

    @tool("refuse")
    def refuse(self) -> str:
        """Always says no."""
        raise ToolError.business("no, as asked")
"#;

#[tokio::test(flavor = "multi_thread")]
async fn a_python_newcomer_with_only_the_binary() {
    let desk = Desk::new();
    let started = Instant::now();
    let said = desk.run(
        "wharf",
        &["new", "--lang", "python", "pynotes"],
        desk.path(),
        None,
    );
    assert!(said.contains("pip install ./vendor/wharf-sdk"), "{said}");
    let dir = desk.path().join("pynotes");
    assert_no_build_machine_path(&dir);
    let readme = std::fs::read_to_string(dir.join("README.md")).expect("README");
    assert!(
        readme.contains("pip install ./vendor/wharf-sdk"),
        "{readme}"
    );

    let venv = desk.path().join("venv");
    desk.run(
        "python3",
        &["-m", "venv", venv.to_str().expect("utf-8")],
        &dir,
        None,
    );
    desk.run(
        "pip",
        &[
            "install",
            "--disable-pip-version-check",
            "-q",
            "./vendor/wharf-sdk",
        ],
        &dir,
        Some(&venv),
    );
    let leftovers: Vec<_> = std::fs::read_dir(dir.join("vendor/wharf-sdk"))
        .expect("vendor")
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n == "build" || n.ends_with(".egg-info"))
        .collect();
    assert!(leftovers.is_empty(), "pip left {leftovers:?} in the SDK");
    desk.run("python3", &["-m", "unittest", "-q"], &dir, Some(&venv));

    let app = dir.join("app.py");
    let source = std::fs::read_to_string(&app).expect("app.py");
    let source = source.replace(
        "from wharf_sdk import Backend, Session, ToolError, tool",
        "from wharf_sdk import Backend, Capabilities, Session, ToolError, http, kv, tool",
    );
    let marker = "    @tool(\"hello\", read_only=True)";
    assert!(source.contains(marker), "the scaffold's hello tool moved");
    std::fs::write(
        &app,
        source.replacen(marker, &format!("{PYTHON_TOOLS}\n{marker}"), 1),
    )
    .expect("write");

    let dev = Dev::start(&desk, &dir, Some(&venv));
    exercise(&dev, "pynotes", started, || {
        let source = std::fs::read_to_string(&app).expect("app.py");
        let declared = source.replace(
            "    version = \"0.1.0\"\n",
            "    version = \"0.2.0\"\n    requires = Capabilities(http_hosts=[\"127.0.0.1:*\"])\n",
        );
        assert_ne!(source, declared, "the scaffold's version moved");
        std::fs::write(&app, declared).expect("save");
    })
    .await;
}
