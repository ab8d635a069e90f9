//! `wharf new`: the scaffolded crate passes its own test natively, builds to a component
//! with the one documented command, and that component serves `hello` in a real host.

use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Command;
use wharf_integration_tests::processes::wharf_bin;

/// Shared with other runs so the SDK and its dependencies are built once.
fn target_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/scaffold-test")
}

/// `cargo ARGS` in `dir`, without the outer `cargo test`'s build environment.
fn cargo(dir: &Path, args: &[&str]) -> std::process::Output {
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.args(args).current_dir(dir);
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy().into_owned();
        if key.starts_with("CARGO_")
            || key.starts_with("RUSTC")
            || matches!(
                key.as_str(),
                "RUSTFLAGS" | "RUSTDOCFLAGS" | "RUST_TEST_THREADS" | "OUT_DIR" | "TARGET"
            )
        {
            cmd.env_remove(&key);
        }
    }
    cmd.env("CARGO_TARGET_DIR", target_dir());
    let out = cmd.output().expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn new_backend_tests_builds_and_serves() {
    let parent = tempfile::tempdir().expect("temp dir");
    let sdk = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sdk");
    let out = Command::new(wharf_bin())
        .args(["new", "greeter", "--sdk-path"])
        .arg(&sdk)
        .arg("--dir")
        .arg(parent.path())
        .output()
        .expect("wharf runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = parent.path().join("greeter");
    for file in [
        "Cargo.toml",
        ".cargo/config.toml",
        "src/lib.rs",
        "README.md",
    ] {
        assert!(dir.join(file).is_file(), "{file} is missing");
    }
    let readme = std::fs::read_to_string(dir.join("README.md")).expect("readme");
    assert!(readme.contains("cargo build --release --target wasm32-wasip2"));

    // An existing directory is refused.
    let again = Command::new(wharf_bin())
        .args(["new", "greeter", "--dir"])
        .arg(parent.path())
        .output()
        .expect("wharf runs");
    assert!(!again.status.success());

    let dir2 = dir.clone();
    let test = tokio::task::spawn_blocking(move || cargo(&dir2, &["test"]))
        .await
        .expect("join");
    assert!(
        String::from_utf8_lossy(&test.stdout).contains("hello_greets_by_name ... ok"),
        "{}",
        String::from_utf8_lossy(&test.stdout)
    );
    let dir2 = dir.clone();
    tokio::task::spawn_blocking(move || {
        cargo(&dir2, &["build", "--release", "--target", "wasm32-wasip2"])
    })
    .await
    .expect("join");
    let wasm = target_dir().join("wasm32-wasip2/release/greeter.wasm");
    assert!(wasm.is_file(), "{} is missing", wasm.display());

    let mut config = wharf_integration_tests::bundled("echo");
    config.path = wasm.display().to_string();
    let host = wharf_integration_tests::start(vec![("greeter", config)]).await;
    let reply = host.call("greeter:hello", json!({ "name": "x" })).await;
    assert_eq!(reply.code(), 0, "{}", reply.body);
    assert_eq!(
        reply.body["data"]["result"]["greeting"], "hello, x",
        "{}",
        reply.body
    );
}

#[test]
fn new_refuses_an_invalid_name() {
    let parent = tempfile::tempdir().expect("temp dir");
    for bad in ["1bad", "a b", "fn"] {
        let out = Command::new(wharf_bin())
            .args(["new", bad, "--dir"])
            .arg(parent.path())
            .output()
            .expect("wharf runs");
        assert!(!out.status.success(), "`{bad}` was accepted");
        assert!(!parent.path().join(bad).exists());
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn new_python_backend_tests_builds_and_serves() {
    let parent = tempfile::tempdir().expect("temp dir");
    let out = Command::new(wharf_bin())
        .args(["new", "greeter-py", "--lang", "python", "--dir"])
        .arg(parent.path())
        .output()
        .expect("wharf runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = parent.path().join("greeter-py");
    for file in ["app.py", "test_app.py", "README.md"] {
        assert!(dir.join(file).is_file(), "{file} is missing");
    }
    let readme = std::fs::read_to_string(dir.join("README.md")).expect("readme");
    assert!(readme.contains("wharf-py build app.py -o greeter-py.wasm"));
    let provider = Command::new(wharf_bin())
        .args(["new", "prov", "--lang", "python", "--provider", "--dir"])
        .arg(parent.path())
        .output()
        .expect("wharf runs");
    assert!(
        !provider.status.success(),
        "a Python provider skeleton is not offered"
    );

    let venv = tokio::task::spawn_blocking(wharf_integration_tests::python::toolchain)
        .await
        .expect("join");
    let test = Command::new(venv.join("bin/python"))
        .args(["-m", "unittest", "-v"])
        .current_dir(&dir)
        .output()
        .expect("python runs");
    let report = String::from_utf8_lossy(&test.stderr);
    assert!(test.status.success(), "{report}");
    assert!(report.contains("test_hello_greets_by_name"), "{report}");

    let build = Command::new(venv.join("bin/wharf-py"))
        .args(["build", "app.py", "-o", "greeter-py.wasm", "-q"])
        .current_dir(&dir)
        .output()
        .expect("wharf-py runs");
    assert!(
        build.status.success(),
        "{}",
        String::from_utf8_lossy(&build.stderr)
    );
    let wasm = dir.join("greeter-py.wasm");
    let mut config = wharf_integration_tests::bundled("echo");
    config.path = wasm.display().to_string();
    let host = wharf_integration_tests::start(vec![("greeter", config)]).await;
    let reply = host
        .call("greeter:hello", json!({ "name": "x", "times": 2 }))
        .await;
    assert_eq!(
        reply.body["data"]["result"]["greeting"], "hello, x, hello, x",
        "{}",
        reply.body
    );
    let reply = host.call("greeter:hello", json!({ "times": 2 })).await;
    assert_eq!(reply.code(), 4003, "{}", reply.body);
    let session = host
        .post("/v1/sessions", json!({"backend": "greeter", "key": "k"}))
        .await;
    let id = session.body["data"]["id"].as_str().expect("id").to_string();
    host.call_in(&id, "greeter:remember", json!({"name": "a"}))
        .await;
    let reply = host
        .call_in(&id, "greeter:remember", json!({"name": "b"}))
        .await;
    assert_eq!(
        reply.body["data"]["result"]["greeted"],
        json!(["a", "b"]),
        "{}",
        reply.body
    );
}

/// Runs `cargo ARGS` in `dir` (stripped of the outer build's environment) and returns
/// whether it succeeded, with its stderr.
fn try_cargo(dir: &Path, args: &[&str], target: &Path) -> (bool, String) {
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.args(args).current_dir(dir);
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy().into_owned();
        if key.starts_with("CARGO_") || key.starts_with("RUSTC") || key == "RUSTFLAGS" {
            cmd.env_remove(&key);
        }
    }
    cmd.env("CARGO_TARGET_DIR", target);
    let out = cmd.output().expect("cargo runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The SDK as a third party will get it once published: `cargo package` makes the `.crate`
/// files (the WIT travels inside), a backend is scaffolded outside the repository with
/// `--sdk-registry`, `[patch.crates-io]` points it at the unpacked crates (what a
/// publish would serve), and it builds and serves a call.
#[tokio::test(flavor = "multi_thread")]
async fn a_backend_outside_the_repository_builds_against_the_packaged_sdk() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let work = tempfile::tempdir().expect("temp dir");
    let package_target = work.path().join("package-target");
    let (ok, err) = {
        let root = root.clone();
        let package_target = package_target.clone();
        tokio::task::spawn_blocking(move || {
            try_cargo(
                &root,
                &[
                    "package",
                    "-p",
                    "wharf-sdk-macros",
                    "-p",
                    "wharf-sdk",
                    "--no-verify",
                    "--allow-dirty",
                ],
                &package_target,
            )
        })
        .await
        .expect("join")
    };
    assert!(ok, "cargo package failed:\n{err}");
    let version = env!("CARGO_PKG_VERSION");
    let unpacked = work.path().join("unpacked");
    std::fs::create_dir_all(&unpacked).expect("mkdir");
    for krate in ["wharf-sdk", "wharf-sdk-macros"] {
        let file = package_target.join(format!("package/{krate}-{version}.crate"));
        let out = Command::new("tar")
            .arg("xzf")
            .arg(&file)
            .arg("-C")
            .arg(&unpacked)
            .output()
            .expect("tar runs");
        assert!(
            out.status.success(),
            "unpacking {}: {}",
            file.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let sdk = unpacked.join(format!("wharf-sdk-{version}"));
    assert!(
        sdk.join("wit/plugin.wit").is_file(),
        "the packaged SDK carries its WIT"
    );
    let manifest = std::fs::read_to_string(sdk.join("Cargo.toml")).expect("manifest");
    // What crates.io requires (description, license) and what its page shows. No
    // `repository`: this project has no public address yet, and a made-up one would mislead.
    for field in ["license", "description", "readme", "keywords", "categories"] {
        assert!(
            manifest.contains(&format!("{field} =")),
            "the packaged manifest has no `{field}`:\n{manifest}"
        );
    }

    let outside = work.path().join("outside");
    let out = Command::new(wharf_bin())
        .args(["new", "board", "--sdk-registry", "--dir"])
        .arg(&outside)
        .output()
        .expect("wharf runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = outside.join("board");
    let cargo_toml = std::fs::read_to_string(dir.join("Cargo.toml")).expect("Cargo.toml");
    let requirement = format!(
        "wharf-sdk = \"{}\"",
        version.rsplit_once('.').map_or(version, |(minor, _)| minor)
    );
    assert!(
        cargo_toml.contains(&requirement),
        "a registry dependency with --sdk-registry:\n{cargo_toml}"
    );
    assert!(!cargo_toml.contains("path ="), "{cargo_toml}");
    let patched = format!(
        "{cargo_toml}\n[patch.crates-io]\nwharf-sdk = {{ path = {:?} }}\nwharf-sdk-macros = {{ path = {:?} }}\n",
        sdk.display().to_string(),
        unpacked
            .join(format!("wharf-sdk-macros-{version}"))
            .display()
            .to_string()
    );
    std::fs::write(dir.join("Cargo.toml"), patched).expect("write");

    let target = target_dir();
    let (ok, err) = {
        let dir = dir.clone();
        let target = target.clone();
        tokio::task::spawn_blocking(move || {
            try_cargo(
                &dir,
                &["build", "--release", "--target", "wasm32-wasip2"],
                &target,
            )
        })
        .await
        .expect("join")
    };
    assert!(ok, "building outside the repository failed:\n{err}");
    let wasm = target.join("wasm32-wasip2/release/board.wasm");
    let mut config = wharf_integration_tests::bundled("echo");
    config.path = wasm.display().to_string();
    let host = wharf_integration_tests::start(vec![("board", config)]).await;
    let reply = host.call("board:hello", json!({ "name": "y" })).await;
    assert_eq!(reply.code(), 0, "{}", reply.body);
    assert_eq!(reply.body["data"]["result"]["greeting"], "hello, y");
}

#[test]
fn new_writes_a_path_or_git_dependency_only_when_asked() {
    let parent = tempfile::tempdir().expect("temp dir");
    let sdk = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sdk");
    let out = Command::new(wharf_bin())
        .args(["new", "by-path", "--sdk-path"])
        .arg(&sdk)
        .arg("--dir")
        .arg(parent.path())
        .output()
        .expect("wharf runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let manifest =
        std::fs::read_to_string(parent.path().join("by-path/Cargo.toml")).expect("manifest");
    assert!(manifest.contains("wharf-sdk = { path = "), "{manifest}");

    let out = Command::new(wharf_bin())
        .args([
            "new",
            "by-git",
            "--sdk-git",
            "https://example.invalid/wharf.git",
            "--dir",
        ])
        .arg(parent.path())
        .output()
        .expect("wharf runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let manifest =
        std::fs::read_to_string(parent.path().join("by-git/Cargo.toml")).expect("manifest");
    assert!(
        manifest.contains(r#"wharf-sdk = { git = "https://example.invalid/wharf.git" }"#),
        "{manifest}"
    );

    let both = Command::new(wharf_bin())
        .args(["new", "both", "--sdk-git", "x", "--sdk-path"])
        .arg(&sdk)
        .arg("--dir")
        .arg(parent.path())
        .output()
        .expect("wharf runs");
    assert!(
        !both.status.success(),
        "--sdk-path and --sdk-git together are refused"
    );
}

/// `wharf dev DIR`: builds the crate, serves it on loopback, and after a save serves the
/// rebuilt version without a restart.
#[tokio::test(flavor = "multi_thread")]
async fn dev_builds_serves_and_reloads_on_save() {
    let parent = tempfile::tempdir().expect("temp dir");
    let sdk = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sdk");
    let out = Command::new(wharf_bin())
        .args(["new", "devloop", "--sdk-path"])
        .arg(&sdk)
        .arg("--dir")
        .arg(parent.path())
        .output()
        .expect("wharf runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = parent.path().join("devloop");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let mut cmd = Command::new(wharf_bin());
    cmd.args(["dev"])
        .arg(&dir)
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy().into_owned();
        if key.starts_with("CARGO_")
            || key.starts_with("RUSTC")
            || key == "RUSTFLAGS"
            || key == "CARGO"
        {
            cmd.env_remove(&key);
        }
    }
    cmd.env("CARGO_TARGET_DIR", target_dir());
    let mut child = cmd.spawn().expect("wharf dev starts");
    let client = reqwest::Client::new();
    let call = |name: &'static str| {
        let client = client.clone();
        async move {
            let reply = client
                .post(format!("http://127.0.0.1:{port}/v1/call"))
                .json(&json!({ "tool": "devloop:hello", "args": { "name": name } }))
                .send()
                .await
                .ok()?;
            let body: serde_json::Value = reply.json().await.ok()?;
            body["data"]["result"]["greeting"]
                .as_str()
                .map(str::to_string)
        }
    };
    let until = |want: &'static str| {
        let call = &call;
        async move {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
            loop {
                if call("x").await.as_deref() == Some(want) {
                    return true;
                }
                if std::time::Instant::now() > deadline {
                    return false;
                }
                tokio::time::sleep(std::time::Duration::from_millis(250)).await;
            }
        }
    };
    let first = until("hello, x").await;
    let lib = dir.join("src/lib.rs");
    let source = std::fs::read_to_string(&lib).expect("lib.rs");
    std::fs::write(
        &lib,
        source.replace("\"hello, {name}\"", "\"hi there, {name}\""),
    )
    .expect("save");
    let reloaded = first && until("hi there, x").await;
    let _ = child.kill();
    let _ = child.wait();
    assert!(first, "wharf dev never served the first build");
    assert!(reloaded, "wharf dev did not serve the saved change");
}

/// `wharf dev` on a Python backend: `wharf-py build` on start and on every save of a `.py`
/// file, hot-swapped into the loopback server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_builds_and_reloads_a_python_backend() {
    let parent = tempfile::tempdir().expect("temp dir");
    let out = Command::new(wharf_bin())
        .args(["new", "pydev", "--lang", "python", "--dir"])
        .arg(parent.path())
        .output()
        .expect("wharf runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = parent.path().join("pydev");
    let venv = tokio::task::spawn_blocking(wharf_integration_tests::python::toolchain)
        .await
        .expect("join");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let mut child = Command::new(wharf_bin())
        .args(["dev"])
        .arg(&dir)
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .env("WHARF_PY", venv.join("bin/wharf-py"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("wharf dev starts");
    let client = reqwest::Client::new();
    let greeting = || async {
        let reply = client
            .post(format!("http://127.0.0.1:{port}/v1/call"))
            .json(&json!({ "tool": "pydev:hello", "args": { "name": "x" } }))
            .send()
            .await
            .ok()?;
        let body: serde_json::Value = reply.json().await.ok()?;
        body["data"]["result"]["greeting"]
            .as_str()
            .map(str::to_string)
    };
    let until = |want: &'static str| {
        let greeting = &greeting;
        async move {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
            while std::time::Instant::now() < deadline {
                if greeting().await.as_deref() == Some(want) {
                    return true;
                }
                tokio::time::sleep(std::time::Duration::from_millis(250)).await;
            }
            false
        }
    };
    let first = until("hello, x").await;
    let app = dir.join("app.py");
    let source = std::fs::read_to_string(&app).expect("app.py");
    std::fs::write(
        &app,
        source.replace(
            "get(\"greeting\", \"hello\")",
            "get(\"greeting\", \"ahoy\")",
        ),
    )
    .expect("save");
    let reloaded = first && until("ahoy, x").await;
    let _ = child.kill();
    let _ = child.wait();
    assert!(first, "wharf dev never served the first Python build");
    assert!(reloaded, "wharf dev did not serve the saved Python change");
}
