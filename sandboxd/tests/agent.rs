//! End to end: the built agent, started on a temporary socket (not as PID 1; it makes
//! itself a child subreaper then), driven through the protocol like the host does.
//!
//! `docker_pid1` (ignored) drives an agent that runs as PID 1 in a container; see its doc.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "support/harness.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command as StdCommand};
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, UnixStream};
use tokio_util::bytes::Bytes;
use tokio_util::codec::Framed;
use wharf_sandbox_protocol::{
    Command, ErrorKind, MAX_PROCESSES, MAX_RELAYS, MAX_RUN_OUTPUT_BYTES, MAX_RUN_STDIN_BYTES,
    OutputChunk, OutputRequest, ProcessInfo, ProcessSetup, Reply, Request, RunOutput, RunRequest,
    Signal, StartRequest, Stream, TerminalSize, VERSION, decode, encode,
};

use support::{
    Agent, call, codec, connect, echoed, error_kind, exchange, handed_over, open_raw, send_raw,
    tcp_of,
};

impl Agent {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    async fn run(&self, command: Command, timeout_ms: u32) -> RunOutput {
        match self
            .call(&Request::Run(run_request(command, timeout_ms)))
            .await
        {
            Reply::Ran(output) => output,
            other => panic!("not ran: {other:?}"),
        }
    }

    async fn start_process(&self, command: Command, buffer_bytes: u32) -> ProcessInfo {
        let request = Request::Start(StartRequest {
            command,
            setup: ProcessSetup::default(),
            terminal: None,
            buffer_bytes,
        });
        match self.call(&request).await {
            Reply::Process(info) => info,
            other => panic!("not started: {other:?}"),
        }
    }

    async fn output(&self, pid: u32, offset: u64, wait_ms: u32) -> OutputChunk {
        let request = Request::Output(OutputRequest {
            pid,
            offset,
            max_bytes: 1 << 20,
            wait_ms,
        });
        match self.call(&request).await {
            Reply::Output(chunk) => chunk,
            other => panic!("no output: {other:?}"),
        }
    }

    /// Every byte of a process's output, long-polling until it has ended.
    async fn all_output(&self, pid: u32) -> (Vec<u8>, ProcessInfo) {
        let mut offset = 0;
        let mut out = Vec::new();
        loop {
            let chunk = self.output(pid, offset, 5_000).await;
            assert_eq!(chunk.dropped, 0);
            assert_eq!(chunk.offset, offset);
            offset += chunk.data.len() as u64;
            out.extend_from_slice(&chunk.data);
            if !chunk.process.running && offset == chunk.process.output_bytes {
                return (out, chunk.process);
            }
        }
    }

    async fn wait(&self, pid: u32) -> ProcessInfo {
        match self
            .call(&Request::Wait {
                pid,
                timeout_ms: 10_000,
            })
            .await
        {
            Reply::Process(info) => info,
            other => panic!("no process: {other:?}"),
        }
    }

    fn rss_kib(&self) -> u64 {
        rss_kib(self.pid())
    }
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn sh(script: &str) -> Command {
    Command::Shell(script.into())
}

fn argv(args: &[&str]) -> Command {
    Command::Argv(args.iter().map(|s| s.to_string()).collect())
}

fn run_request(command: Command, timeout_ms: u32) -> RunRequest {
    RunRequest {
        command,
        setup: ProcessSetup::default(),
        stdin: None,
        timeout_ms,
        max_output_bytes: 64 * 1024,
        stream: false,
    }
}

#[tokio::test]
async fn hello() {
    let agent = Agent::start();
    assert_eq!(
        agent.call(&Request::Hello).await,
        Reply::Hello {
            version: VERSION,
            pid: agent.pid()
        }
    );
    // The socket is the owner's only, and so is the directory the agent made.
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&agent.socket), 0o600);
    assert_eq!(mode(agent.socket.parent().unwrap()), 0o700);
}

#[tokio::test]
async fn run_reports_output_and_exit_code() {
    let agent = Agent::start();
    let out = agent.run(sh("echo hi; echo err >&2; exit 3"), 10_000).await;
    assert_eq!(out.stdout, b"hi\n");
    assert_eq!(out.stderr, b"err\n");
    assert_eq!(out.exit_code, Some(3));
    assert!(!out.timed_out && !out.stdout_truncated && !out.stderr_truncated);
    // Killed by a signal: 128 + n.
    let out = agent.run(sh("kill -9 $$"), 10_000).await;
    assert_eq!(out.exit_code, Some(137));
}

#[tokio::test]
async fn run_times_out_and_kills_the_group() {
    let agent = Agent::start();
    let started = Instant::now();
    let out = agent.run(sh("sleep 5; echo late"), 200).await;
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert!(out.timed_out);
    assert_eq!(out.exit_code, None);
    assert_eq!(out.stdout, b"");
}

#[tokio::test]
async fn run_argv_without_a_shell() {
    let agent = Agent::start();
    let out = agent.run(argv(&["/bin/echo", "x"]), 10_000).await;
    assert_eq!(
        (out.stdout.as_slice(), out.exit_code),
        (&b"x\n"[..], Some(0))
    );
    // On PATH, with an environment and a directory.
    let mut request = run_request(argv(&["sh", "-c", "echo $GREETING; pwd"]), 10_000);
    request.setup.env = vec![("GREETING".into(), "bonjour".into())];
    request.setup.cwd = Some("/tmp".into());
    match agent.call(&Request::Run(request)).await {
        Reply::Ran(out) => assert_eq!(out.stdout, b"bonjour\n/tmp\n"),
        other => panic!("{other:?}"),
    }
    // The agent entered /tmp only for that spawn: a command without a directory starts
    // where the agent itself was started.
    let out = agent.run(argv(&["/bin/pwd"]), 10_000).await;
    let here = std::env::current_dir().expect("the test's directory");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim_end(),
        here.to_string_lossy()
    );
    // A missing program is an error naming it, not a crash of the agent.
    let reply = agent
        .call(&Request::Run(run_request(argv(&["no-such-program"]), 1000)))
        .await;
    match &reply {
        Reply::Error(error) => {
            assert_eq!(error.kind, ErrorKind::NotFound);
            assert!(
                error.message.contains("no-such-program"),
                "{}",
                error.message
            );
        }
        other => panic!("{other:?}"),
    }
    // Not executable, and as a user (which makes std fork instead of posix_spawn): exec
    // fails in the child, and std reaps that child itself, panicking if it cannot. The
    // reaper must not steal it, even while blocked waiting for another child (without the
    // spawn lock this panicked the agent within 200 tries).
    let sleeper = agent.start_process(argv(&["sleep", "100"]), 0).await;
    for _ in 0..200 {
        let mut request = run_request(argv(&["/etc/passwd"]), 1000);
        request.setup.user = Some("0:0".into());
        assert_eq!(
            error_kind(&agent.call(&Request::Run(request)).await),
            ErrorKind::Failed
        );
    }
    assert!(matches!(
        agent.call(&Request::Hello).await,
        Reply::Hello { .. }
    ));
    agent
        .call(&Request::Signal {
            pid: sleeper.pid,
            signal: Signal::Kill,
        })
        .await;
}

#[tokio::test]
async fn run_as_a_user() {
    let agent = Agent::start();
    let mut request = run_request(sh("id -u; id -g; id -G; echo $HOME"), 10_000);
    request.setup.user = Some("65534:65534".into());
    match agent.call(&Request::Run(request)).await {
        Reply::Ran(out) => {
            let text = String::from_utf8(out.stdout).unwrap();
            let lines: Vec<&str> = text.lines().collect();
            assert_eq!(&lines[..3], ["65534", "65534", "65534"], "{text}");
        }
        other => panic!("{other:?}"),
    }
    let mut request = run_request(sh("true"), 10_000);
    request.setup.user = Some("no-such-user".into());
    match agent.call(&Request::Run(request)).await {
        Reply::Error(error) => {
            assert_eq!(error.kind, ErrorKind::NotFound);
            assert_eq!(error.message, "no user no-such-user in /etc/passwd");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn run_feeds_stdin() {
    let agent = Agent::start();
    let mut request = run_request(argv(&["cat"]), 10_000);
    let input: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    request.stdin = Some(input.clone());
    request.max_output_bytes = 256 * 1024;
    match agent.call(&Request::Run(request)).await {
        Reply::Ran(out) => {
            assert_eq!(out.exit_code, Some(0));
            assert!(out.stdout_truncated);
            assert_eq!(out.stdout, input[input.len() - 256 * 1024..]);
        }
        other => panic!("{other:?}"),
    }
    // A child that never reads its stdin does not hold the run up.
    let mut request = run_request(sh("exit 0"), 10_000);
    request.stdin = Some(vec![1; 500_000]);
    assert!(matches!(
        agent.call(&Request::Run(request)).await,
        Reply::Ran(RunOutput {
            exit_code: Some(0),
            ..
        })
    ));
}

#[tokio::test]
async fn run_keeps_the_tail() {
    let agent = Agent::start();
    let mut request = run_request(
        sh("yes | head -c 1000000; yes e | head -c 5000 >&2"),
        10_000,
    );
    request.max_output_bytes = 100;
    match agent.call(&Request::Run(request)).await {
        Reply::Ran(out) => {
            assert_eq!(out.stdout.len(), 100);
            assert!(out.stdout.chunks(2).all(|c| c == b"y\n"));
            assert!(out.stdout_truncated);
            assert_eq!(out.stderr.len(), 100);
            assert!(out.stderr_truncated);
            assert_eq!(out.exit_code, Some(0));
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn run_streams_chunks_before_the_end() {
    let agent = Agent::start();
    let mut request = run_request(
        sh("echo a; sleep 0.2; echo b >&2; sleep 0.2; echo c"),
        10_000,
    );
    request.stream = true;
    let replies = exchange(&agent.socket, &Request::Run(request)).await;
    let (last, chunks) = replies.split_last().unwrap();
    assert!(chunks.len() >= 3, "{replies:?}");
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    for chunk in chunks {
        match chunk {
            Reply::Chunk {
                stream: Stream::Stdout,
                data,
            } => stdout.extend_from_slice(data),
            Reply::Chunk {
                stream: Stream::Stderr,
                data,
            } => stderr.extend_from_slice(data),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(
        (stdout.as_slice(), stderr.as_slice()),
        (&b"a\nc\n"[..], &b"b\n"[..])
    );
    match last {
        Reply::Ran(out) => {
            assert_eq!(out.stdout, b"a\nc\n");
            assert_eq!(out.exit_code, Some(0));
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn run_returns_soon_after_exit_despite_a_background_grandchild() {
    let agent = Agent::start();
    let started = Instant::now();
    let out = agent.run(sh("sleep 3 & echo main"), 10_000).await;
    assert_eq!(out.stdout, b"main\n");
    assert_eq!(out.exit_code, Some(0));
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn run_is_killed_when_the_client_leaves() {
    let agent = Agent::start();
    let pid_file = agent.dir.join("pid");
    let script = format!("echo $$ > {}; exec sleep 30", pid_file.display());
    let mut framed = connect(&agent.socket).await;
    framed
        .send(Bytes::from(encode(&Request::Run(run_request(
            sh(&script),
            60_000,
        )))))
        .await
        .unwrap();
    let started = Instant::now();
    while std::fs::read_to_string(&pid_file).map_or(true, |s| !s.ends_with('\n')) {
        assert!(started.elapsed() < Duration::from_secs(5));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let pid: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(Path::new(&format!("/proc/{pid}")).exists());
    drop(framed);
    let started = Instant::now();
    while Path::new(&format!("/proc/{pid}")).exists() {
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "the run survived its client"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn run_survives_a_half_close() {
    let agent = Agent::start();
    let mut stream = UnixStream::connect(&agent.socket).await.unwrap();
    let frame = encode(&Request::Run(run_request(
        sh("sleep 0.3; echo done"),
        10_000,
    )));
    stream
        .write_all(&(frame.len() as u32).to_be_bytes())
        .await
        .unwrap();
    stream.write_all(&frame).await.unwrap();
    stream.shutdown().await.unwrap();
    let mut framed = Framed::new(stream, codec());
    let reply = decode::<Reply>(&framed.next().await.unwrap().unwrap()).unwrap();
    match reply {
        Reply::Ran(out) => assert_eq!(out.stdout, b"done\n"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn run_validates() {
    let agent = Agent::start();
    let mut bad = Vec::new();
    bad.push(run_request(sh("true"), 0));
    let mut r = run_request(sh("true"), 1000);
    r.max_output_bytes = MAX_RUN_OUTPUT_BYTES + 1;
    bad.push(r);
    let mut r = run_request(sh("true"), 1000);
    r.stdin = Some(vec![0; MAX_RUN_STDIN_BYTES + 1]);
    bad.push(r);
    bad.push(run_request(sh(""), 1000));
    bad.push(run_request(argv(&[]), 1000));
    bad.push(run_request(argv(&["echo", "a\0b"]), 1000));
    let mut r = run_request(sh("true"), 1000);
    r.setup.env = vec![("A=B".into(), "c".into())];
    bad.push(r);
    let mut r = run_request(sh("true"), 1000);
    r.setup.cwd = Some("relative".into());
    bad.push(r);
    for request in bad {
        let reply = agent.call(&Request::Run(request.clone())).await;
        assert_eq!(error_kind(&reply), ErrorKind::Invalid, "{request:?}");
    }
}

#[tokio::test]
async fn background_output_is_long_polled() {
    let agent = Agent::start();
    let info = agent
        .start_process(
            sh("i=0; while [ $i -lt 5 ]; do echo $i; i=$((i+1)); sleep 0.1; done"),
            0,
        )
        .await;
    assert!(info.running);
    assert_eq!(info.output_bytes, 0);
    assert!(!info.terminal);
    let (out, end) = agent.all_output(info.pid).await;
    assert_eq!(out, b"0\n1\n2\n3\n4\n");
    assert_eq!(end.exit_code, Some(0));
    // It is still listed after it ended; an unknown pid is not found.
    match agent.call(&Request::List).await {
        Reply::Processes(list) => {
            assert_eq!(list.len(), 1);
            assert_eq!(list[0].pid, info.pid);
            assert!(!list[0].running);
        }
        other => panic!("{other:?}"),
    }
    let reply = agent
        .call(&Request::Output(OutputRequest {
            pid: 999_999_999,
            offset: 0,
            max_bytes: 10,
            wait_ms: 0,
        }))
        .await;
    assert_eq!(error_kind(&reply), ErrorKind::NotFound);
    // Past the end: at the end, empty, at once even with a wait (it has ended).
    let chunk = agent.output(info.pid, 1000, 5000).await;
    assert_eq!((chunk.offset, chunk.data.len()), (10, 0));
}

#[tokio::test]
async fn background_output_waits_for_new_output() {
    let agent = Agent::start();
    let info = agent.start_process(sh("sleep 0.5; echo late"), 0).await;
    let started = Instant::now();
    let chunk = agent.output(info.pid, 0, 5000).await;
    let waited = started.elapsed();
    assert_eq!(chunk.data, b"late\n");
    assert!(waited >= Duration::from_millis(300), "{waited:?}");
    // A wait that runs out returns empty, the process still running.
    let sleeper = agent.start_process(sh("sleep 5"), 0).await;
    let started = Instant::now();
    let chunk = agent.output(sleeper.pid, 0, 300).await;
    assert!(chunk.data.is_empty() && chunk.process.running);
    assert!(started.elapsed() >= Duration::from_millis(250));
    agent
        .call(&Request::Signal {
            pid: sleeper.pid,
            signal: Signal::Kill,
        })
        .await;
}

#[tokio::test]
async fn background_input() {
    let agent = Agent::start();
    let info = agent.start_process(argv(&["cat"]), 0).await;
    let input = |data: &[u8], close| Request::Input {
        pid: info.pid,
        data: data.to_vec(),
        close,
    };
    assert_eq!(agent.call(&input(b"hello\n", false)).await, Reply::Done);
    let chunk = agent.output(info.pid, 0, 5000).await;
    assert_eq!(chunk.data, b"hello\n");
    assert!(chunk.process.running);
    assert_eq!(agent.call(&input(b"bye\n", true)).await, Reply::Done);
    let end = agent.wait(info.pid).await;
    assert!(!end.running);
    assert_eq!(end.exit_code, Some(0));
    assert_eq!(end.output_bytes, 10);
    let (out, _) = agent.all_output(info.pid).await;
    assert_eq!(out, b"hello\nbye\n");
    assert_eq!(
        error_kind(&agent.call(&input(b"x", false)).await),
        ErrorKind::Invalid
    );
    let too_big = Request::Input {
        pid: info.pid,
        data: vec![0; 256 * 1024 + 1],
        close: false,
    };
    assert_eq!(error_kind(&agent.call(&too_big).await), ErrorKind::Invalid);
}

#[tokio::test]
async fn background_signal() {
    let agent = Agent::start();
    let info = agent.start_process(argv(&["sleep", "100"]), 0).await;
    let signal = Request::Signal {
        pid: info.pid,
        signal: Signal::Term,
    };
    assert_eq!(agent.call(&signal).await, Reply::Done);
    let end = agent.wait(info.pid).await;
    assert_eq!((end.running, end.exit_code), (false, Some(143)));
    // Not running any more: refused.
    assert_eq!(error_kind(&agent.call(&signal).await), ErrorKind::Invalid);
    // Wait with a timeout on a running process: still running.
    let sleeper = agent.start_process(argv(&["sleep", "100"]), 0).await;
    let started = Instant::now();
    match agent
        .call(&Request::Wait {
            pid: sleeper.pid,
            timeout_ms: 200,
        })
        .await
    {
        Reply::Process(info) => assert!(info.running),
        other => panic!("{other:?}"),
    }
    assert!(started.elapsed() >= Duration::from_millis(180));
    agent
        .call(&Request::Signal {
            pid: sleeper.pid,
            signal: Signal::Kill,
        })
        .await;
    assert_eq!(agent.wait(sleeper.pid).await.exit_code, Some(137));
}

#[tokio::test]
async fn background_flood_stays_bounded() {
    let agent = Agent::start();
    let info = agent.start_process(argv(&["yes"]), 64 * 1024).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let chunk = agent.output(info.pid, 0, 0).await;
    assert!(chunk.dropped > 0, "{:?}", chunk.process);
    assert_eq!(chunk.offset, chunk.dropped);
    assert_eq!(chunk.data.len(), 64 * 1024);
    assert!(chunk.process.output_bytes > 10 << 20, "{:?}", chunk.process);
    let rss = agent.rss_kib();
    eprintln!(
        "flood: {} MiB written in 1 s, agent RSS {rss} KiB",
        chunk.process.output_bytes >> 20
    );
    assert!(rss < 20 * 1024, "RSS {rss} KiB");
    // The agent still answers promptly meanwhile.
    let started = Instant::now();
    assert!(matches!(
        agent.call(&Request::Hello).await,
        Reply::Hello { .. }
    ));
    assert!(started.elapsed() < Duration::from_secs(1));
    agent
        .call(&Request::Signal {
            pid: info.pid,
            signal: Signal::Kill,
        })
        .await;
    assert_eq!(agent.wait(info.pid).await.exit_code, Some(137));
}

#[tokio::test]
async fn background_limit() {
    let agent = Agent::start();
    let mut pids = Vec::new();
    let first = agent.start_process(sh("exit 7"), 0).await;
    assert_eq!(agent.wait(first.pid).await.exit_code, Some(7));
    for _ in 1..MAX_PROCESSES {
        pids.push(agent.start_process(argv(&["sleep", "100"]), 4096).await.pid);
    }
    // Full: the oldest ended one is forgotten to make room.
    pids.push(agent.start_process(argv(&["sleep", "100"]), 4096).await.pid);
    match agent.call(&Request::List).await {
        Reply::Processes(list) => {
            assert_eq!(list.len(), MAX_PROCESSES);
            assert!(list.iter().all(|p| p.pid != first.pid && p.running));
        }
        other => panic!("{other:?}"),
    }
    // Full of running ones: refused.
    let request = Request::Start(StartRequest {
        command: argv(&["sleep", "100"]),
        setup: ProcessSetup::default(),
        terminal: None,
        buffer_bytes: 0,
    });
    assert_eq!(error_kind(&agent.call(&request).await), ErrorKind::Limit);
    let too_big = Request::Start(StartRequest {
        command: argv(&["true"]),
        setup: ProcessSetup::default(),
        terminal: None,
        buffer_bytes: (16 << 20) + 1,
    });
    assert_eq!(error_kind(&agent.call(&too_big).await), ErrorKind::Invalid);
    for pid in pids {
        agent
            .call(&Request::Signal {
                pid,
                signal: Signal::Kill,
            })
            .await;
    }
}

#[tokio::test]
async fn background_terminal() {
    let agent = Agent::start();
    let request = Request::Start(StartRequest {
        command: sh("tty; read a; stty size; read b; stty size; echo got $b"),
        setup: ProcessSetup::default(),
        terminal: Some(TerminalSize {
            cols: 100,
            rows: 30,
        }),
        buffer_bytes: 0,
    });
    let info = match agent.call(&request).await {
        Reply::Process(info) => info,
        other => panic!("{other:?}"),
    };
    assert!(info.terminal);
    let input = |data: &[u8]| Request::Input {
        pid: info.pid,
        data: data.to_vec(),
        close: false,
    };
    assert_eq!(agent.call(&input(b"1\n")).await, Reply::Done);
    let mut seen = Vec::new();
    while !String::from_utf8_lossy(&seen).contains("30 100") {
        let chunk = agent.output(info.pid, seen.len() as u64, 5000).await;
        assert!(
            chunk.process.running,
            "{:?}",
            String::from_utf8_lossy(&seen)
        );
        seen.extend_from_slice(&chunk.data);
    }
    let resize = Request::Resize {
        pid: info.pid,
        size: TerminalSize {
            cols: 120,
            rows: 40,
        },
    };
    assert_eq!(agent.call(&resize).await, Reply::Done);
    assert_eq!(agent.call(&input(b"hello\n")).await, Reply::Done);
    let (out, end) = agent.all_output(info.pid).await;
    let text = String::from_utf8_lossy(&out);
    assert!(text.contains("/dev/pts/"), "{text:?}");
    assert!(text.contains("40 120"), "{text:?}");
    assert!(text.contains("got hello"), "{text:?}");
    assert_eq!(end.exit_code, Some(0));
    assert_eq!(error_kind(&agent.call(&resize).await), ErrorKind::Invalid);
    // A missing program on a terminal is refused up front.
    let missing = Request::Start(StartRequest {
        command: argv(&["no-such-program"]),
        setup: ProcessSetup::default(),
        terminal: Some(TerminalSize { cols: 80, rows: 24 }),
        buffer_bytes: 0,
    });
    assert_eq!(error_kind(&agent.call(&missing).await), ErrorKind::NotFound);
    // Resizing a pipe process is refused.
    let piped = agent.start_process(argv(&["true"]), 0).await;
    let resize = Request::Resize {
        pid: piped.pid,
        size: TerminalSize { cols: 80, rows: 24 },
    };
    assert_eq!(error_kind(&agent.call(&resize).await), ErrorKind::Invalid);
}

#[tokio::test]
async fn orphans_are_reaped() {
    let agent = Agent::start();
    for _ in 0..10 {
        let out = agent.run(sh("sleep 0.1 & exit 0"), 10_000).await;
        assert_eq!(out.exit_code, Some(0));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let zombies = zombie_children(agent.pid());
    assert!(zombies.is_empty(), "zombies: {zombies:?}");
}

/// Children of `parent` in state Z.
fn zombie_children(parent: u32) -> Vec<u32> {
    let mut zombies = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // pid (comm) state ppid ...: comm may hold spaces, so parse after the last ')'.
        let Some(rest) = stat.rsplit_once(')').map(|(_, rest)| rest) else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.first() == Some(&"Z") && fields.get(1) == Some(&parent.to_string().as_str()) {
            zombies.push(pid);
        }
    }
    zombies
}

#[tokio::test]
async fn hostile_frames() {
    let agent = Agent::start();
    let raw = |bytes: Vec<u8>, shutdown: bool| {
        let socket = agent.socket.clone();
        async move {
            let mut stream = UnixStream::connect(&socket).await.unwrap();
            stream.write_all(&bytes).await.unwrap();
            if shutdown {
                stream.shutdown().await.unwrap();
            }
            let mut framed = Framed::new(stream, codec());
            let mut replies = Vec::new();
            let read = async {
                while let Some(Ok(frame)) = framed.next().await {
                    replies.push(decode::<Reply>(&frame).unwrap());
                }
            };
            tokio::time::timeout(Duration::from_secs(15), read)
                .await
                .unwrap();
            replies
        }
    };
    // Garbage in a well-formed frame: an Invalid error.
    let replies = raw(vec![0, 0, 0, 4, 200, 1, 2, 3], false).await;
    assert_eq!(replies.len(), 1);
    assert_eq!(error_kind(&replies[0]), ErrorKind::Invalid);
    // Empty frame, trailing bytes.
    let replies = raw(vec![0, 0, 0, 0], false).await;
    assert_eq!(error_kind(&replies[0]), ErrorKind::Invalid);
    let mut trailing = encode(&Request::Hello);
    trailing.push(0);
    let mut frame = (trailing.len() as u32).to_be_bytes().to_vec();
    frame.extend(trailing);
    assert_eq!(error_kind(&raw(frame, false).await[0]), ErrorKind::Invalid);
    // A huge declared length: refused at once, nothing allocated for it.
    let replies = raw(vec![0xff, 0xff, 0xff, 0xff, 1, 2, 3], false).await;
    assert!(
        replies.iter().all(|r| matches!(r, Reply::Error(_))),
        "{replies:?}"
    );
    // A declared length within bounds with a claim far past the frame.
    let replies = raw(vec![0, 0, 0, 7, 4, 1, 0x80, 0x80, 0x80, 0x80, 0x10], false).await;
    assert_eq!(error_kind(&replies[0]), ErrorKind::Invalid);
    // A truncated frame, then end of stream.
    let replies = raw(vec![0, 0, 0, 100, 1, 2, 3], true).await;
    assert!(
        replies.iter().all(|r| matches!(r, Reply::Error(_))),
        "{replies:?}"
    );
    // Garbage that is not even a length prefix.
    let replies = raw(vec![1, 2], true).await;
    assert!(
        replies.iter().all(|r| matches!(r, Reply::Error(_))),
        "{replies:?}"
    );
    // Connect and leave.
    drop(UnixStream::connect(&agent.socket).await.unwrap());
    assert_eq!(
        agent.call(&Request::Hello).await,
        Reply::Hello {
            version: VERSION,
            pid: agent.pid()
        }
    );
}

#[tokio::test]
async fn many_connections_at_once() {
    let agent = Agent::start();
    let mut tasks = Vec::new();
    for _ in 0..200 {
        let socket = agent.socket.clone();
        tasks.push(tokio::spawn(
            async move { call(&socket, &Request::Hello).await },
        ));
    }
    for task in tasks {
        assert!(matches!(task.await.unwrap(), Reply::Hello { .. }));
    }
}

/// An echo server on 127.0.0.1 (a random port): each connection gets its bytes back and,
/// after its end of stream, `bye` and the end of stream.
async fn echo_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            tokio::spawn(async move {
                let (mut read, mut write) = tcp.split();
                if tokio::io::copy(&mut read, &mut write).await.is_ok() {
                    let _ = write.write_all(b"bye").await;
                    let _ = write.shutdown().await;
                }
            });
        }
    });
    port
}

/// A server on 127.0.0.1 that reads each connection to its end and then keeps it open,
/// silent, for ever.
async fn silent_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut sink = Vec::new();
                let _ = tcp.read_to_end(&mut sink).await;
                std::future::pending::<()>().await;
            });
        }
    });
    port
}

/// Sends `Connect` on a new connection, `early` right behind the request frame, and reads
/// the one reply frame exactly (length prefix, then payload; nothing past it).
async fn relay_connect(socket: &Path, port: u16, early: &[u8]) -> (UnixStream, Reply) {
    open_raw(socket, &Request::Connect { port }, early).await
}

#[tokio::test]
async fn connect_relays_a_port_both_ways() {
    let agent = Agent::start();
    let port = echo_server().await;
    // Bytes sent before `Connected` arrives, read with the request, still reach the port.
    let (mut relay, reply) = relay_connect(&agent.socket, port, b"early ").await;
    assert_eq!(reply, Reply::Connected);
    relay.write_all(b"hello").await.unwrap();
    let mut back = [0u8; 11];
    tokio::time::timeout(Duration::from_secs(10), relay.read_exact(&mut back))
        .await
        .expect("no echo")
        .unwrap();
    assert_eq!(&back, b"early hello");
    // Many times a socket buffer, both ways at once.
    let big: Vec<u8> = (0..4_000_000u32).map(|i| (i % 253) as u8).collect();
    assert!(echoed(&mut relay, &big).await == big);
    // A half-close reaches the port, which still answers before its own end of stream.
    relay.shutdown().await.unwrap();
    let mut rest = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), relay.read_to_end(&mut rest))
        .await
        .expect("no end of stream")
        .unwrap();
    assert_eq!(rest, b"bye");
    assert!(matches!(
        agent.call(&Request::Hello).await,
        Reply::Hello { .. }
    ));
}

#[tokio::test]
async fn connect_refusals() {
    let agent = Agent::start();
    // A port that was just free: nothing listens on it.
    let port = {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        listener.local_addr().unwrap().port()
    };
    match agent.call(&Request::Connect { port }).await {
        Reply::Error(error) => {
            assert_eq!(error.kind, ErrorKind::NotFound);
            assert_eq!(
                error.message,
                format!("nothing listens on port {port} in this sandbox")
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        error_kind(&agent.call(&Request::Connect { port: 0 }).await),
        ErrorKind::Invalid
    );
}

#[tokio::test]
async fn connect_limit_keeps_command_slots() {
    let agent = Agent::start();
    let port = echo_server().await;
    // The first relay's port never ends its side: only the host's close can end it.
    let (silent, reply) = relay_connect(&agent.socket, silent_server().await, b"").await;
    assert_eq!(reply, Reply::Connected);
    let mut relays = Vec::new();
    for _ in 1..MAX_RELAYS {
        let (relay, reply) = relay_connect(&agent.socket, port, b"").await;
        assert_eq!(reply, Reply::Connected);
        relays.push(relay);
    }
    let (_, reply) = relay_connect(&agent.socket, port, b"").await;
    match reply {
        Reply::Error(error) => {
            assert_eq!(error.kind, ErrorKind::Limit);
            assert_eq!(error.message, "at most 64 port relays at once");
        }
        other => panic!("{other:?}"),
    }
    // Commands still have connection slots of their own.
    assert!(matches!(
        agent.call(&Request::Hello).await,
        Reply::Hello { .. }
    ));
    assert_eq!(agent.call(&Request::List).await, Reply::Processes(vec![]));
    assert_eq!(echoed(&mut relays[10], b"still here").await, b"still here");
    // Closing a relay frees its slot (once the agent has seen the close).
    drop(silent);
    let started = Instant::now();
    let mut relay = loop {
        match relay_connect(&agent.socket, port, b"").await {
            (relay, Reply::Connected) => break relay,
            (_, reply) => assert_eq!(error_kind(&reply), ErrorKind::Limit),
        }
        assert!(started.elapsed() < Duration::from_secs(5), "no slot freed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(echoed(&mut relay, b"new").await, b"new");
}

/// Asks `ConnectHandOver` for `port` on a new connection: the connection (held open, as
/// the host holds it), the reply and the descriptor that came with it.
async fn hand_over_port(
    socket: &Path,
    port: u16,
) -> (
    std::os::unix::net::UnixStream,
    Reply,
    Option<std::os::fd::OwnedFd>,
) {
    let host = send_raw(socket, &Request::ConnectHandOver { port }, b"").await;
    tokio::task::spawn_blocking(move || {
        let host = host.into_std().unwrap();
        let (reply, fd) = handed_over(&host);
        (host, reply, fd)
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn connect_hand_over_gives_the_host_the_port_and_keeps_its_slot() {
    let agent = Agent::start();
    let port = echo_server().await;
    let mut held = Vec::new();
    for round in 0..MAX_RELAYS {
        let (host, reply, fd) = hand_over_port(&agent.socket, port).await;
        assert_eq!(reply, Reply::Connected, "round {round}");
        let mut tcp = tcp_of(fd.unwrap_or_else(|| panic!("round {round}: no descriptor came")));
        // The host talks to the port itself.
        assert_eq!(echoed(&mut tcp, b"hello").await, b"hello");
        held.push((host, tcp));
    }
    // Every slot is held while the host keeps its agent connections: a relay, handed over
    // or not, is refused.
    for request in [Request::Connect { port }, Request::ConnectHandOver { port }] {
        assert_eq!(error_kind(&agent.call(&request).await), ErrorKind::Limit);
    }
    // Closing the agent connection gives the slot back.
    drop(held.pop());
    let watched = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let watched_port = watched.local_addr().unwrap().port();
    let started = Instant::now();
    let (_host, tcp) = loop {
        match hand_over_port(&agent.socket, watched_port).await {
            (host, Reply::Connected, fd) => break (host, tcp_of(fd.expect("a descriptor"))),
            (_, Reply::Error(e), _) if e.kind == ErrorKind::Limit => {}
            (_, other, _) => panic!("{other:?}"),
        }
        assert!(started.elapsed() < Duration::from_secs(5), "no slot freed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    // The agent kept no copy of the connection: the host's close reaches the port.
    let (mut accepted, _) = watched.accept().await.unwrap();
    drop(tcp);
    let mut rest = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), accepted.read_to_end(&mut rest))
        .await
        .expect("the host's close did not reach the port")
        .unwrap();
    assert!(rest.is_empty());
    // Port 0 is refused as for `Connect`.
    assert_eq!(
        error_kind(&agent.call(&Request::ConnectHandOver { port: 0 }).await),
        ErrorKind::Invalid
    );
    assert!(matches!(
        agent.call(&Request::Hello).await,
        Reply::Hello { .. }
    ));
}

#[tokio::test]
async fn idle_rss_is_small() {
    let agent = Agent::start();
    assert!(matches!(
        agent.call(&Request::Hello).await,
        Reply::Hello { .. }
    ));
    let rss = agent.rss_kib();
    eprintln!("idle agent RSS: {rss} KiB");
    assert!(rss < 8 * 1024, "{rss} KiB");
}

/// Drives an agent running as PID 1 in a container, from the host. Start it with
///
/// ```text
/// docker run -d --rm -v .../wharf-sandboxd:/.wharf/sandboxd:ro -v /tmp/sbd-dock:/.wharf/run \
///     --entrypoint /.wharf/sandboxd wharf-sandbox:test
/// ```
///
/// then `WHARF_SANDBOXD_SOCKET=/tmp/sbd-dock/agent.sock cargo test -- --ignored docker_pid1 --nocapture`.
#[tokio::test]
#[ignore = "needs an agent running in a container (see the doc comment)"]
async fn docker_pid1() {
    let socket = PathBuf::from(
        std::env::var("WHARF_SANDBOXD_SOCKET").unwrap_or("/tmp/sbd-dock/agent.sock".into()),
    );
    match call(&socket, &Request::Hello).await {
        Reply::Hello { pid, .. } => assert_eq!(pid, 1),
        other => panic!("{other:?}"),
    }
    let run = |command: Command| {
        let socket = socket.clone();
        async move {
            match call(&socket, &Request::Run(run_request(command, 10_000))).await {
                Reply::Ran(out) => out,
                other => panic!("{other:?}"),
            }
        }
    };
    let out = run(sh("echo hi; echo err >&2; exit 3")).await;
    assert_eq!(
        (out.stdout.as_slice(), out.exit_code),
        (&b"hi\n"[..], Some(3))
    );
    // Orphans: the shell exits before its background sleep, which PID 1 inherits.
    for _ in 0..20 {
        assert_eq!(run(sh("sleep 0.1 & exit 0")).await.exit_code, Some(0));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let ps = run(argv(&["ps", "-o", "pid,ppid,stat,comm"])).await;
    let ps = String::from_utf8_lossy(&ps.stdout).into_owned();
    eprintln!("ps in the container:\n{ps}");
    let zombies: Vec<&str> = ps
        .lines()
        .skip(1)
        .filter(|line| {
            line.split_whitespace()
                .nth(2)
                .is_some_and(|s| s.starts_with('Z'))
        })
        .collect();
    assert!(zombies.is_empty(), "zombies: {zombies:?}");
    // A user from the image's /etc/passwd.
    let mut request = run_request(argv(&["id"]), 10_000);
    request.setup.user = Some("nobody".into());
    match call(&socket, &Request::Run(request)).await {
        Reply::Ran(out) => {
            let id = String::from_utf8_lossy(&out.stdout).into_owned();
            assert!(id.starts_with("uid=65534(nobody) gid=65534"), "{id}");
        }
        other => panic!("{other:?}"),
    }
    // A terminal, as a user.
    let start = Request::Start(StartRequest {
        command: sh("tty; echo $((6*7)); id -u"),
        setup: ProcessSetup {
            user: Some("nobody".into()),
            ..ProcessSetup::default()
        },
        terminal: Some(TerminalSize { cols: 80, rows: 24 }),
        buffer_bytes: 0,
    });
    let Reply::Process(info) = call(&socket, &start).await else {
        panic!("no terminal process");
    };
    let mut offset = 0;
    let mut out = Vec::new();
    loop {
        let request = Request::Output(OutputRequest {
            pid: info.pid,
            offset,
            max_bytes: 1 << 20,
            wait_ms: 5000,
        });
        let Reply::Output(chunk) = call(&socket, &request).await else {
            panic!("no output");
        };
        offset += chunk.data.len() as u64;
        out.extend_from_slice(&chunk.data);
        if !chunk.process.running && offset == chunk.process.output_bytes {
            assert_eq!(chunk.process.exit_code, Some(0));
            break;
        }
    }
    let out = String::from_utf8_lossy(&out).into_owned();
    assert!(
        out.contains("/dev/pts/") && out.contains("42") && out.contains("65534"),
        "{out:?}"
    );
    // Round trip of `true`, 200 times.
    let mut times = Vec::new();
    for _ in 0..200 {
        let started = Instant::now();
        assert_eq!(run(argv(&["true"])).await.exit_code, Some(0));
        times.push(started.elapsed());
    }
    times.sort();
    eprintln!(
        "Run `true` round trip over 200: p50 {:?}, p90 {:?}, p99 {:?}, max {:?}",
        times[100], times[180], times[198], times[199]
    );
    let status = run(argv(&["cat", "/proc/1/status"])).await;
    let status = String::from_utf8_lossy(&status.stdout).into_owned();
    let rss = status
        .lines()
        .find(|l| l.starts_with("VmRSS"))
        .unwrap_or("?");
    eprintln!("agent in the container: {rss}");
}

#[tokio::test]
async fn concurrent_floods_stay_bounded() {
    let agent = Agent::start();
    let mut tasks = Vec::new();
    for i in 0..16 {
        let socket = agent.socket.clone();
        tasks.push(tokio::spawn(async move {
            let mut request = run_request(
                sh("yes | head -c 20000000; yes | head -c 5000000 >&2"),
                30_000,
            );
            request.max_output_bytes = 256 * 1024;
            request.stream = i % 2 == 0;
            let replies = exchange(&socket, &Request::Run(request)).await;
            match replies.last() {
                Some(Reply::Ran(out)) => {
                    assert_eq!(out.exit_code, Some(0));
                    assert_eq!(out.stdout.len(), 256 * 1024);
                    assert!(out.stdout_truncated && out.stderr_truncated);
                }
                other => panic!("{other:?}"),
            }
            replies.len()
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let status = std::fs::read_to_string(format!("/proc/{}/status", agent.pid())).unwrap();
    let peak: u64 = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap()
        .parse()
        .unwrap();
    eprintln!("16 concurrent floods of 25 MB: agent peak RSS {peak} KiB");
    assert!(peak < 40 * 1024, "{peak} KiB");
}

#[test]
fn main_command_exit_code_and_signals() {
    let dir = std::env::temp_dir().join(format!("sbd-main-{}", std::process::id()));
    let socket = dir.join("agent.sock");
    let agent = |args: &[&str]| {
        StdCommand::new(env!("CARGO_BIN_EXE_wharf-sandboxd"))
            .arg("--socket")
            .arg(&socket)
            .args(args)
            .spawn()
            .unwrap()
    };
    let wait_for_socket = || {
        let started = Instant::now();
        while !socket.exists() {
            assert!(started.elapsed() < Duration::from_secs(10));
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    let sigterm = |child: &Child| {
        StdCommand::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap();
    };
    use std::os::unix::process::ExitStatusExt;
    // The agent exits with the main command's code.
    let status = agent(&["--", "sh", "-c", "exit 7"]).wait().unwrap();
    assert_eq!(status.code(), Some(7));
    // SIGTERM goes to the main command; its death by it is the agent's exit code.
    let mut child = agent(&["--", "sleep", "100"]);
    wait_for_socket();
    sigterm(&child);
    assert_eq!(child.wait().unwrap().code(), Some(143));
    // Without a main command SIGTERM stops the agent at once, and the socket goes away.
    let mut child = agent(&[]);
    wait_for_socket();
    let started = Instant::now();
    sigterm(&child);
    let status = child.wait().unwrap();
    assert_eq!((status.code(), status.signal()), (Some(0), None));
    assert!(started.elapsed() < Duration::from_secs(1));
    assert!(!socket.exists());
    // A main command that cannot run: 127.
    assert_eq!(
        agent(&["--", "/no/such/program"]).wait().unwrap().code(),
        Some(127)
    );
    // Bad arguments: 2.
    let status = StdCommand::new(env!("CARGO_BIN_EXE_wharf-sandboxd"))
        .arg("--bogus")
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(2));
    let _ = std::fs::remove_dir_all(&dir);
}
