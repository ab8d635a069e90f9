//! The Docker module against a real engine and the local image `wharf-sandbox:test`
//! (static busybox, built by `scripts/build-test-image.sh`, which these tests run if the
//! image is missing).
//!
//! Without a reachable engine the tests print a skip note and pass, unless
//! `WHARF_REQUIRE_DOCKER=1`, where they fail. Every test uses its own backend name and
//! force-removes that backend's containers when it ends, passed or failed.

use std::process::Command as Cli;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use wharf::docker::{
    Command, ContainerInfo, ContainerSpec, ContainerState, Docker, DockerError, ExecOutput,
    ExecRequest, LABEL_BACKEND, LABEL_NODE, LABEL_SESSION, Network, Owner,
};

const IMAGE: &str = "wharf-sandbox:test";
const NODE: &str = "test-node";

fn docker_required() -> bool {
    std::env::var("WHARF_REQUIRE_DOCKER").is_ok_and(|v| v == "1")
}

/// Skips (or fails, when Docker is required) with a reason.
fn skip(reason: &str) -> Option<Docker> {
    assert!(!docker_required(), "WHARF_REQUIRE_DOCKER=1 but {reason}");
    eprintln!("skipping Docker test: {reason}");
    None
}

static IMAGE_READY: Mutex<Option<bool>> = Mutex::new(None);

/// Builds the test image once per test binary if it is missing.
fn ensure_image() -> bool {
    let mut ready = IMAGE_READY.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(ok) = *ready {
        return ok;
    }
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../scripts/build-test-image.sh"
    );
    let ok = Cli::new("bash")
        .arg(script)
        .status()
        .is_ok_and(|s| s.success());
    *ready = Some(ok);
    ok
}

/// A client for the local engine, or `None` (test skipped).
async fn docker() -> Option<Docker> {
    let docker = match Docker::connect(NODE) {
        Ok(d) => d,
        Err(e) => return skip(&format!("cannot configure the Docker client: {e}")),
    };
    if let Err(e) = docker.ping().await {
        return skip(&format!("Docker is not reachable: {e}"));
    }
    if !tokio::task::spawn_blocking(ensure_image)
        .await
        .unwrap_or(false)
    {
        return skip(&format!("the image {IMAGE} could not be built"));
    }
    Some(docker)
}

/// A unique backend name for one test; removes all its containers when dropped.
struct Backend {
    name: String,
}

impl Backend {
    fn new(test: &str) -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        Backend {
            name: format!("wharf-test-{test}-{}-{nanos}", std::process::id()),
        }
    }

    fn owner(&self) -> Owner {
        Owner::session(self.name.clone(), "session-1")
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        let filter = format!("label={LABEL_BACKEND}={}", self.name);
        let Ok(out) = Cli::new("docker")
            .args(["ps", "-aq", "--filter", &filter])
            .output()
        else {
            return;
        };
        let ids: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .map(String::from)
            .collect();
        if !ids.is_empty() {
            let _ = Cli::new("docker").args(["rm", "-fv"]).args(&ids).output();
        }
    }
}

fn sandbox_spec() -> ContainerSpec {
    ContainerSpec {
        image: IMAGE.to_string(),
        command: Some(vec!["sleep".into(), "3600".into()]),
        labels: vec![("wharf-test".into(), "1".into())],
        ..Default::default()
    }
}

async fn running(docker: &Docker, owner: &Owner, spec: &ContainerSpec) -> ContainerInfo {
    let info = docker.create(owner, spec).await.expect("create");
    docker.start(owner, &info.id).await.expect("start");
    info
}

async fn sh(docker: &Docker, owner: &Owner, id: &str, script: &str, timeout_ms: u32) -> ExecOutput {
    docker
        .exec(
            owner,
            ExecRequest::new(id, Command::Shell(script.into()), timeout_ms, 1 << 20),
        )
        .await
        .expect("exec")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `ps` output: one `PID STAT ARGS` line per process, zombies (dead, not yet reaped by
/// the image's PID 1) left out.
async fn processes(docker: &Docker, owner: &Owner, id: &str) -> String {
    let ps = text(
        &sh(docker, owner, id, "ps -o pid,stat,args", 10_000)
            .await
            .stdout,
    );
    ps.lines()
        .filter(|l| {
            l.split_whitespace()
                .nth(1)
                .is_none_or(|stat| !stat.starts_with('Z'))
        })
        .map(|l| format!("{l}\n"))
        .collect()
}

/// Waits up to `within` for no live process line to contain `needle`.
async fn gone(docker: &Docker, owner: &Owner, id: &str, needle: &str, within: Duration) -> bool {
    let until = Instant::now() + within;
    loop {
        let ps = processes(docker, owner, id).await;
        if !ps.lines().any(|l| l.contains(needle)) {
            return true;
        }
        if Instant::now() > until {
            eprintln!("still running:\n{ps}");
            return false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn create_start_exec_echo() {
    let Some(docker) = docker().await else { return };
    let backend = Backend::new("echo");
    let owner = backend.owner();
    let info = running(&docker, &owner, &sandbox_spec()).await;
    assert_eq!(info.id.len(), 64);
    assert_eq!(info.backend, backend.name);
    assert_eq!(info.session.as_deref(), Some("session-1"));
    assert_eq!(info.label(LABEL_NODE), Some(NODE));
    assert_eq!(info.label(LABEL_SESSION), Some("session-1"));
    assert_eq!(info.label("wharf-test"), Some("1"));
    assert!(
        info.created_at_ms > 1_600_000_000_000,
        "created_at_ms {}",
        info.created_at_ms
    );

    let out = docker
        .exec(
            &owner,
            ExecRequest::new(
                &info.id,
                Command::Argv(vec!["echo".into(), "hi".into()]),
                10_000,
                1024,
            ),
        )
        .await
        .expect("exec");
    assert_eq!(text(&out.stdout), "hi\n");
    assert_eq!(
        text(&out.stderr),
        "",
        "the wrapper's pid line is not part of stderr"
    );
    assert_eq!(out.exit_code, Some(0));
    assert!(!out.timed_out && !out.stdout_truncated && !out.stderr_truncated);
    assert!(out.duration_ms < 10_000);

    // Exit codes, stderr, env, workdir and user come through.
    let mut request = ExecRequest::new(
        &info.id,
        Command::Shell("echo \"$GREETING\" >&2; pwd; id -u; exit 3".into()),
        10_000,
        1024,
    );
    request.env = vec![("GREETING".into(), "hello there".into())];
    request.workdir = Some("/tmp".into());
    request.user = Some("65534".into());
    let out = docker.exec(&owner, request).await.expect("exec");
    assert_eq!(out.exit_code, Some(3));
    assert_eq!(text(&out.stderr), "hello there\n");
    assert_eq!(text(&out.stdout), "/tmp\n65534\n");

    // Stdin is written, then closed.
    let mut request =
        ExecRequest::new(&info.id, Command::Argv(vec!["cat".into()]), 10_000, 1 << 20);
    request.stdin = Some(b"line one\nline two".to_vec());
    let out = docker.exec(&owner, request).await.expect("exec");
    assert_eq!(text(&out.stdout), "line one\nline two");
    assert_eq!(out.exit_code, Some(0));
    let mut request = ExecRequest::new(&info.id, Command::Shell("wc -c".into()), 10_000, 1024);
    request.stdin = Some(vec![b'x'; 3 << 20]);
    let out = docker.exec(&owner, request).await.expect("exec");
    assert_eq!(text(&out.stdout).trim(), (3 << 20).to_string());

    // Network `none` by default: loopback only.
    let out = sh(&docker, &owner, &info.id, "ls /sys/class/net", 10_000).await;
    assert_eq!(
        text(&out.stdout).split_whitespace().collect::<Vec<_>>(),
        ["lo"]
    );

    let seen = docker
        .inspect(&owner, &info.id)
        .await
        .expect("inspect")
        .expect("owned container");
    assert_eq!(seen.state, ContainerState::Running);
    let listed = docker.list_owned(&backend.name, None).await.expect("list");
    assert_eq!(
        listed.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(),
        [info.id.as_str()]
    );
    assert_eq!(
        docker
            .list_owned(&backend.name, Some("session-1"))
            .await
            .expect("list")
            .len(),
        1
    );
    assert!(
        docker
            .list_owned(&backend.name, Some("other-session"))
            .await
            .expect("list")
            .is_empty()
    );
    assert!(
        docker
            .list_all_wharf()
            .await
            .expect("list")
            .iter()
            .any(|c| c.id == info.id)
    );

    docker.stop(&owner, &info.id, 0).await.expect("stop");
    let seen = docker
        .inspect(&owner, &info.id)
        .await
        .expect("inspect")
        .expect("owned container");
    assert_eq!(seen.state, ContainerState::Exited);
    let err = sh_err(&docker, &owner, &info.id).await;
    assert!(matches!(err, DockerError::Failed(_)), "{err:?}");
    docker.remove(&owner, &info.id).await.expect("remove");
}

async fn sh_err(docker: &Docker, owner: &Owner, id: &str) -> DockerError {
    docker
        .exec(
            owner,
            ExecRequest::new(id, Command::Shell("true".into()), 5_000, 10),
        )
        .await
        .expect_err("exec should fail")
}

#[tokio::test]
async fn timeout_kills_the_process_group() {
    let Some(docker) = docker().await else { return };
    let backend = Backend::new("timeout");
    let owner = backend.owner();
    let info = running(&docker, &owner, &sandbox_spec()).await;

    let begun = Instant::now();
    let out = sh(
        &docker,
        &owner,
        &info.id,
        "echo before; sleep 31 & setsid sleep 32 & sleep 30; echo never",
        1000,
    )
    .await;
    let took = begun.elapsed();
    assert!(out.timed_out);
    assert_eq!(out.exit_code, None);
    assert_eq!(text(&out.stdout), "before\n");
    assert!(
        took >= Duration::from_millis(1000) && took < Duration::from_secs(8),
        "took {took:?}"
    );
    assert!(out.duration_ms >= 1000);
    // The command and its background child were in the killed group.
    assert!(
        gone(
            &docker,
            &owner,
            &info.id,
            "sleep 30",
            Duration::from_secs(3)
        )
        .await
    );
    assert!(
        gone(
            &docker,
            &owner,
            &info.id,
            "sleep 31",
            Duration::from_secs(3)
        )
        .await
    );
}

#[tokio::test]
async fn dropped_exec_future_kills_its_process() {
    let Some(docker) = docker().await else { return };
    let backend = Backend::new("dropped");
    let owner = backend.owner();
    let info = running(&docker, &owner, &sandbox_spec()).await;

    let request = ExecRequest::new(
        &info.id,
        Command::Argv(vec!["sleep".into(), "40".into()]),
        60_000,
        1024,
    );
    let result =
        tokio::time::timeout(Duration::from_millis(500), docker.exec(&owner, request)).await;
    assert!(
        result.is_err(),
        "the exec should still be running at 500 ms"
    );
    assert!(
        gone(
            &docker,
            &owner,
            &info.id,
            "sleep 40",
            Duration::from_secs(5)
        )
        .await
    );
}

#[tokio::test]
async fn output_truncation_keeps_the_tail() {
    let Some(docker) = docker().await else { return };
    let backend = Backend::new("truncate");
    let owner = backend.owner();
    let info = running(&docker, &owner, &sandbox_spec()).await;

    let script = "i=0; while [ $i -lt 2000 ]; do echo line$i; echo err$i >&2; i=$((i+1)); done";
    let out = docker
        .exec(
            &owner,
            ExecRequest::new(&info.id, Command::Shell(script.into()), 30_000, 100),
        )
        .await
        .expect("exec");
    assert_eq!(out.exit_code, Some(0));
    assert!(out.stdout_truncated && out.stderr_truncated);
    assert_eq!(out.stdout.len(), 100);
    assert_eq!(out.stderr.len(), 100);
    assert!(
        text(&out.stdout).ends_with("line1998\nline1999\n"),
        "{}",
        text(&out.stdout)
    );
    assert!(
        text(&out.stderr).ends_with("err1999\n"),
        "{}",
        text(&out.stderr)
    );

    // A lot of output streams through without being kept.
    let out = docker
        .exec(
            &owner,
            ExecRequest::new(
                &info.id,
                Command::Shell("head -c 200000000 /dev/zero; echo end".into()),
                60_000,
                16,
            ),
        )
        .await
        .expect("exec");
    assert_eq!(out.exit_code, Some(0));
    assert!(out.stdout_truncated);
    assert_eq!(out.stdout.len(), 16);
    assert!(out.stdout.ends_with(b"end\n"));

    // A command that never stops printing still times out.
    let begun = Instant::now();
    let out = docker
        .exec(
            &owner,
            ExecRequest::new(
                &info.id,
                Command::Argv(vec!["cat".into(), "/dev/zero".into()]),
                1000,
                8,
            ),
        )
        .await
        .expect("exec");
    assert!(out.timed_out && out.exit_code.is_none() && out.stdout_truncated);
    assert!(
        begun.elapsed() < Duration::from_secs(6),
        "took {:?}",
        begun.elapsed()
    );
    assert!(
        gone(
            &docker,
            &owner,
            &info.id,
            "cat /dev/zero",
            Duration::from_secs(3)
        )
        .await
    );

    // Killed before the wrapper reported a pid: found by its marker.
    let out = sh(&docker, &owner, &info.id, "sleep 45", 1).await;
    assert!(out.timed_out);
    assert!(
        gone(
            &docker,
            &owner,
            &info.id,
            "sleep 45",
            Duration::from_secs(3)
        )
        .await
    );

    // Exactly at the limit is not truncated.
    let out = docker
        .exec(
            &owner,
            ExecRequest::new(&info.id, Command::Shell("printf 12345".into()), 10_000, 5),
        )
        .await
        .expect("exec");
    assert_eq!(
        (text(&out.stdout).as_str(), out.stdout_truncated),
        ("12345", false)
    );
}

#[tokio::test]
async fn commands_share_a_resident_shell_until_one_leaves_processes_behind() {
    let Some(docker) = docker().await else { return };
    let backend = Backend::new("resident");
    let owner = backend.owner();
    let info = running(&docker, &owner, &sandbox_spec()).await;
    let parent = |out: ExecOutput| {
        assert_eq!(out.exit_code, Some(0), "{}", text(&out.stderr));
        text(&out.stdout).trim().to_string()
    };

    // Commands without stdin or a user run as children of one shell that stays.
    let first = parent(sh(&docker, &owner, &info.id, "echo $PPID", 10_000).await);
    let second = parent(sh(&docker, &owner, &info.id, "echo $PPID", 10_000).await);
    assert_eq!(first, second);

    // Env (quoted as the shell needs), workdir, exit codes and both streams come through.
    let mut request = ExecRequest::new(
        &info.id,
        Command::Argv(vec![
            "/bin/sh".into(),
            "-c".into(),
            "printf '%s|' \"$V\" \"$1\"; pwd; echo oops >&2; exit 7".into(),
            "arg0".into(),
            "it's $HOME; `x`".into(),
        ]),
        10_000,
        1024,
    );
    request.env = vec![("V".into(), "a 'quoted' $value\nline".into())];
    request.workdir = Some("/tmp".into());
    let out = docker.exec(&owner, request).await.expect("exec");
    assert_eq!(out.exit_code, Some(7));
    assert_eq!(
        text(&out.stdout),
        "a 'quoted' $value\nline|it's $HOME; `x`|/tmp\n"
    );
    assert_eq!(text(&out.stderr), "oops\n");
    assert_eq!(
        parent(sh(&docker, &owner, &info.id, "echo $PPID", 10_000).await),
        first
    );

    // A command that leaves a process running retires its shell: the leftover cannot
    // write into the next command's output.
    let out = sh(
        &docker,
        &owner,
        &info.id,
        "(sleep 1; echo late) & echo started",
        10_000,
    )
    .await;
    assert_eq!(text(&out.stdout), "started\n");
    let after = sh(&docker, &owner, &info.id, "sleep 1.5; echo $PPID", 10_000).await;
    let replacement = parent(after);
    assert_ne!(replacement, first);
    assert!(!replacement.contains("late"));

    // Side by side commands each get a shell; all answer correctly.
    let runs = (0..4).map(|i| {
        let script = format!("echo start {i}; sleep 0.3; echo end {i}");
        let (docker, owner, id) = (&docker, &owner, &info.id);
        async move { sh(docker, owner, id, &script, 10_000).await }
    });
    for (i, out) in futures::future::join_all(runs)
        .await
        .into_iter()
        .enumerate()
    {
        assert_eq!(text(&out.stdout), format!("start {i}\nend {i}\n"));
    }

    // A command that kills its own shell reports no exit code; the next one still runs.
    let out = sh(&docker, &owner, &info.id, "kill -9 $PPID", 10_000).await;
    assert_eq!(out.exit_code, None);
    assert!(!out.timed_out);
    assert_eq!(
        text(
            &sh(&docker, &owner, &info.id, "echo ok", 10_000)
                .await
                .stdout
        ),
        "ok\n"
    );
}

#[tokio::test]
async fn backgrounded_child_does_not_hang() {
    let Some(docker) = docker().await else { return };
    let backend = Backend::new("background");
    let owner = backend.owner();
    let info = running(&docker, &owner, &sandbox_spec()).await;

    let begun = Instant::now();
    let out = sh(&docker, &owner, &info.id, "sleep 60 & echo started", 20_000).await;
    assert!(
        begun.elapsed() < Duration::from_secs(5),
        "took {:?}",
        begun.elapsed()
    );
    assert!(!out.timed_out);
    assert_eq!(out.exit_code, Some(0));
    assert_eq!(text(&out.stdout), "started\n");
    // A finished command's background children are left alone.
    assert!(
        processes(&docker, &owner, &info.id)
            .await
            .contains("sleep 60")
    );
}

#[tokio::test]
async fn copy_roundtrip_on_read_only_root_with_work_volume() {
    let Some(docker) = docker().await else { return };
    let backend = Backend::new("copy");
    let owner = backend.owner();
    let spec = ContainerSpec {
        read_only_root: true,
        work_volume: Some("/work".into()),
        memory_bytes: Some(256 << 20),
        cpu_millis: Some(500),
        pids_limit: Some(64),
        ..sandbox_spec()
    };
    let info = running(&docker, &owner, &spec).await;

    let host_config = Cli::new("docker")
        .args(["inspect", "-f", "{{.HostConfig.NetworkMode}} {{.HostConfig.ReadonlyRootfs}} {{.HostConfig.Memory}} {{.HostConfig.NanoCpus}} {{.HostConfig.PidsLimit}}", &info.id])
        .output()
        .expect("docker inspect");
    assert_eq!(
        text(&host_config.stdout).trim(),
        format!("none true {} 500000000 64", 256 << 20)
    );

    // 10 MiB of pseudo-random bytes.
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let content: Vec<u8> = (0..10 << 20)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect();
    docker
        .copy_in(&owner, &info.id, "/work/sub/dir/data.bin", &content, 0o600)
        .await
        .expect("copy in");
    let back = docker
        .copy_out(&owner, &info.id, "/work/sub/dir/data.bin", 11 << 20)
        .await
        .expect("copy out");
    assert!(
        back == content,
        "the file came back different ({} bytes)",
        back.len()
    );
    let out = sh(
        &docker,
        &owner,
        &info.id,
        "stat -c '%a %s' /work/sub/dir/data.bin; stat -c %a /work/sub",
        10_000,
    )
    .await;
    assert_eq!(text(&out.stdout), format!("600 {}\n755\n", 10 << 20));

    // Replacing, symlinks, and the errors.
    docker
        .copy_in(&owner, &info.id, "/work/sub/dir/data.bin", b"small", 0o644)
        .await
        .expect("replace");
    sh(
        &docker,
        &owner,
        &info.id,
        "ln -s sub/dir/data.bin /work/link",
        10_000,
    )
    .await;
    assert_eq!(
        docker
            .copy_out(&owner, &info.id, "/work/link", 100)
            .await
            .expect("via link"),
        b"small"
    );
    let err = docker
        .copy_out(&owner, &info.id, "/work/sub/dir/data.bin", 4)
        .await
        .expect_err("too large");
    assert!(matches!(err, DockerError::TooLarge(_)), "{err:?}");
    let err = docker
        .copy_out(&owner, &info.id, "/work/sub", 100)
        .await
        .expect_err("directory");
    assert!(matches!(err, DockerError::Invalid(_)), "{err:?}");
    let err = docker
        .copy_out(&owner, &info.id, "/work/missing", 100)
        .await
        .expect_err("missing");
    assert!(matches!(err, DockerError::NotFound(_)), "{err:?}");
    assert!(
        docker
            .copy_in(&owner, &info.id, "/etc/outside", b"x", 0o644)
            .await
            .is_err(),
        "read-only root"
    );
    let out = sh(&docker, &owner, &info.id, "touch /etc/outside", 10_000).await;
    assert_ne!(out.exit_code, Some(0));

    // The work volume goes away with the container.
    let volume = Cli::new("docker")
        .args([
            "inspect",
            "-f",
            "{{range .Mounts}}{{.Name}}{{end}}",
            &info.id,
        ])
        .output()
        .expect("docker inspect");
    let volume = text(&volume.stdout).trim().to_string();
    assert!(!volume.is_empty());
    docker.remove(&owner, &info.id).await.expect("remove");
    let still = Cli::new("docker")
        .args(["volume", "inspect", &volume])
        .output()
        .expect("docker volume inspect");
    assert!(
        !still.status.success(),
        "anonymous volume {volume} outlived its container"
    );
}

#[tokio::test]
async fn other_backends_see_nothing() {
    let Some(docker) = docker().await else { return };
    let backend = Backend::new("owner");
    let intruder = Backend::new("intruder");
    let owner = backend.owner();
    let other = intruder.owner();
    let info = running(&docker, &owner, &sandbox_spec()).await;

    assert_eq!(
        docker.inspect(&other, &info.id).await.expect("inspect"),
        None
    );
    // The owner's command leaves an idle resident shell: it must not serve the intruder.
    assert_eq!(
        sh(&docker, &owner, &info.id, "true", 5_000).await.exit_code,
        Some(0)
    );
    let request = ExecRequest::new(&info.id, Command::Shell("true".into()), 5_000, 10);
    assert!(matches!(
        docker.exec(&other, request).await,
        Err(DockerError::NotFound(_))
    ));
    assert!(matches!(
        docker.remove(&other, &info.id).await,
        Err(DockerError::NotFound(_))
    ));
    assert!(matches!(
        docker.stop(&other, &info.id, 0).await,
        Err(DockerError::NotFound(_))
    ));
    assert!(matches!(
        docker.start(&other, &info.id).await,
        Err(DockerError::NotFound(_))
    ));
    assert!(matches!(
        docker.copy_out(&other, &info.id, "/etc/passwd", 1000).await,
        Err(DockerError::NotFound(_))
    ));
    assert!(matches!(
        docker
            .copy_in(&other, &info.id, "/tmp/x", b"x", 0o644)
            .await,
        Err(DockerError::NotFound(_))
    ));
    assert!(
        docker
            .list_owned(&intruder.name, None)
            .await
            .expect("list")
            .is_empty()
    );

    // Names and id prefixes are not ids, even for the owner.
    for not_an_id in [
        &info.id[..12],
        info.name.as_str(),
        info.id.to_uppercase().as_str(),
    ] {
        assert_eq!(
            docker.inspect(&owner, not_an_id).await.expect("inspect"),
            None,
            "{not_an_id}"
        );
        let err = docker
            .start(&owner, not_an_id)
            .await
            .expect_err("not an id");
        assert!(
            matches!(err, DockerError::NotFound(_)) && err.code() == 4000,
            "{err:?}"
        );
    }

    // Still running, untouched.
    assert_eq!(
        docker
            .inspect(&owner, &info.id)
            .await
            .expect("inspect")
            .map(|c| c.state),
        Some(ContainerState::Running)
    );
}

#[tokio::test]
async fn remove_is_idempotent() {
    let Some(docker) = docker().await else { return };
    let backend = Backend::new("remove");
    let owner = backend.owner();
    let info = running(&docker, &owner, &sandbox_spec()).await;
    docker.remove(&owner, &info.id).await.expect("remove");
    docker.remove(&owner, &info.id).await.expect("remove again");
    assert_eq!(
        docker.inspect(&owner, &info.id).await.expect("inspect"),
        None
    );
    assert!(
        docker
            .list_owned(&backend.name, None)
            .await
            .expect("list")
            .is_empty()
    );
    // A created, never started container is removed too.
    let created = docker
        .create(&owner, &sandbox_spec())
        .await
        .expect("create");
    assert_eq!(created.state, ContainerState::Created);
    docker
        .remove(&owner, &created.id)
        .await
        .expect("remove created");
}

#[tokio::test]
async fn policy_refusals() {
    let Some(docker) = docker().await else { return };
    let backend = Backend::new("policy");
    let owner = backend.owner();

    let mut spec = sandbox_spec();
    spec.labels.push(("wharf.x".into(), "forged".into()));
    let err = docker
        .create(&owner, &spec)
        .await
        .expect_err("wharf.* label");
    assert!(
        matches!(err, DockerError::Refused(_)) && err.code() == 4030,
        "{err:?}"
    );

    for network in ["host", "container:abc"] {
        let spec = ContainerSpec {
            network: Network::Named(network.into()),
            ..sandbox_spec()
        };
        let err = docker.create(&owner, &spec).await.expect_err("network");
        assert!(
            matches!(err, DockerError::Refused(_)) && err.code() == 4030,
            "{network}: {err:?}"
        );
    }

    let spec = ContainerSpec {
        image: "wharf-no-such-image:never".into(),
        ..sandbox_spec()
    };
    let err = docker
        .create(&owner, &spec)
        .await
        .expect_err("missing image");
    assert!(matches!(err, DockerError::NotFound(_)), "{err:?}");

    assert!(
        docker
            .list_owned(&backend.name, None)
            .await
            .expect("list")
            .is_empty(),
        "nothing was created"
    );
}

#[tokio::test]
async fn unreachable_engine_is_unavailable_fast() {
    for endpoint in ["unix:///nonexistent.sock", "tcp://127.0.0.1:1"] {
        let docker = Docker::connect_to(endpoint, NODE).expect("configure");
        let begun = Instant::now();
        let err = docker.ping().await.expect_err("unreachable");
        assert!(
            matches!(err, DockerError::Unavailable(_)) && err.code() == 5012,
            "{endpoint}: {err:?}"
        );
        assert!(err.retryable());
        let owner = Owner::backend("b");
        let err = docker
            .create(&owner, &sandbox_spec())
            .await
            .expect_err("unreachable");
        assert!(
            matches!(err, DockerError::Unavailable(_)),
            "{endpoint}: {err:?}"
        );
        let err = docker.list_owned("b", None).await.expect_err("unreachable");
        assert!(
            matches!(err, DockerError::Unavailable(_)),
            "{endpoint}: {err:?}"
        );
        assert!(
            begun.elapsed() < Duration::from_secs(2),
            "{endpoint}: took {:?}",
            begun.elapsed()
        );
    }
    assert!(matches!(
        Docker::connect_to("ftp://x", NODE),
        Err(DockerError::Invalid(_))
    ));
}
