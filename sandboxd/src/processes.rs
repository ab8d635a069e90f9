//! Background processes: `Start`, `Output`, `Input`, `Signal`, `Resize`, `Wait`, `List`.
//!
//! A process outlives the connection that started it (it lives as long as the
//! container); its stdout and stderr (or its terminal) go into one ring buffer that later
//! connections read by offset. At most [`MAX_PROCESSES`] are kept.
//!
//! A process counts as running until it has exited *and* its output has ended (its
//! pipes closed, or [`DRAIN`] after the exit), so that once a reply says it is not
//! running, its `output_bytes` is final.

use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rustix::pipe::PipeFlags;
use rustix::process::Pid;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::pipe;
use tokio::sync::{oneshot, watch};
use tokio::time::{Instant, sleep_until, timeout, timeout_at};
use wharf_sandbox_protocol::{
    AgentError, DEFAULT_PROCESS_BUFFER_BYTES, ErrorKind, MAX_CHUNK_BYTES, MAX_PROCESS_BUFFER_BYTES,
    MAX_PROCESSES, MAX_WAIT_MS, OutputChunk, OutputRequest, ProcessInfo, Reply, Signal,
    StartRequest, TerminalSize,
};

use crate::pty::{self, Master};
use crate::reaper::lock;
use crate::refuse;
use crate::ring::Ring;
use crate::run::{DRAIN, READ_PIECE, kill_group};
use crate::server::{Agent, IO_TIMEOUT};
use crate::spawn;

/// The end-of-file character a terminal's input is "closed" with (a terminal cannot be
/// closed without hanging up its whole session).
const TERMINAL_EOF: u8 = 0x04;

/// The background processes the agent keeps, oldest first.
#[derive(Default)]
pub struct Processes {
    table: Mutex<Vec<Arc<Process>>>,
}

/// One background process.
struct Process {
    pid: u32,
    command: String,
    started_at_ms: u64,
    terminal: bool,
    state: Mutex<State>,
    /// Bumped on every new output and on the end.
    changes: watch::Sender<u64>,
    /// True once the process has ended (see the module doc).
    ended: watch::Sender<bool>,
    /// Its stdin; `None` once closed (or the process ended).
    input: tokio::sync::Mutex<Option<Input>>,
}

struct State {
    output: Ring,
    exit_code: Option<i32>,
    ended: bool,
    /// The terminal, while the process runs (for resizes).
    master: Option<Arc<Master>>,
}

/// Where a process's input goes.
enum Input {
    Pipe(pipe::Sender),
    Terminal(Arc<Master>),
}

/// Where a process's output comes from.
enum Source {
    Pipe(pipe::Receiver),
    Terminal(Arc<Master>),
}

impl Processes {
    /// `Start`.
    pub fn start(&self, agent: &Agent, request: StartRequest) -> Reply {
        match self.try_start(agent, request) {
            Ok(info) => Reply::Process(info),
            Err(error) => Reply::Error(error),
        }
    }

    fn try_start(&self, agent: &Agent, request: StartRequest) -> Result<ProcessInfo, AgentError> {
        let capacity = match request.buffer_bytes {
            0 => DEFAULT_PROCESS_BUFFER_BYTES,
            n if n > MAX_PROCESS_BUFFER_BYTES => {
                return Err(refuse(
                    ErrorKind::Invalid,
                    format!("buffer_bytes is above {MAX_PROCESS_BUFFER_BYTES}"),
                ));
            }
            n => n,
        };
        if request.terminal.is_some_and(|size| !pty::valid_size(size)) {
            return Err(refuse(
                ErrorKind::Invalid,
                "a terminal is 1 to 1000 columns and rows",
            ));
        }
        let prepared = spawn::prepare(&request.command, &request.setup)?;
        if !self.has_room() {
            return Err(limit());
        }
        let failed = |what: &str, error: io::Error| {
            refuse(ErrorKind::Failed, format!("cannot {what}: {error}"))
        };
        let (mut command, source, input) = match request.terminal {
            Some(size) => {
                let Some(helper) = &agent.self_exe else {
                    return Err(refuse(
                        ErrorKind::Failed,
                        "terminals need the agent's own binary, which was not found",
                    ));
                };
                // The helper execs the program out of the agent's sight: check it first.
                prepared.check_program()?;
                let (master, slave) =
                    pty::open(size, prepared.ids()).map_err(|e| failed("open a terminal", e))?;
                let stdio = |fd: &OwnedFd| fd.try_clone().map(Stdio::from);
                let (stdin, stdout) = stdio(&slave)
                    .and_then(|i| Ok((i, stdio(&slave)?)))
                    .map_err(|e| failed("open a terminal", e))?;
                let mut command = prepared.command_via(helper, &[pty::HELPER_FLAG]);
                // No process group here: the helper's setsid makes one.
                command
                    .stdin(stdin)
                    .stdout(stdout)
                    .stderr(Stdio::from(slave));
                let master = Arc::new(master);
                (
                    command,
                    Source::Terminal(master.clone()),
                    Some(Input::Terminal(master)),
                )
            }
            None => {
                // One pipe for stdout and stderr: one stream, in the order written.
                let (reader, writer) = rustix::pipe::pipe_with(PipeFlags::CLOEXEC)
                    .map_err(|e| failed("make a pipe", e.into()))?;
                let reader =
                    pipe::Receiver::from_owned_fd(reader).map_err(|e| failed("make a pipe", e))?;
                let stderr = writer.try_clone().map_err(|e| failed("make a pipe", e))?;
                let mut command = prepared.command();
                command
                    .stdin(Stdio::piped())
                    .stdout(Stdio::from(writer))
                    .stderr(Stdio::from(stderr))
                    .process_group(0);
                (command, Source::Pipe(reader), None)
            }
        };
        let spawned = agent
            .reaper
            .spawn_in(&mut command, prepared.spawn_dir())
            .map_err(|e| prepared.spawn_error(&e))?;
        // The command holds the child's ends of the pipes: the output ends only once
        // they are closed here.
        drop(command);
        let pid = spawned.pid;
        let mut child = spawned.child;
        let input = match (input, child.stdin.take()) {
            (Some(input), _) => input,
            (None, Some(stdin)) => match pipe::Sender::from_owned_fd(OwnedFd::from(stdin)) {
                Ok(sender) => Input::Pipe(sender),
                Err(error) => {
                    kill_group(pid);
                    return Err(failed("write to the process", error));
                }
            },
            (None, None) => {
                kill_group(pid);
                return Err(refuse(ErrorKind::Failed, "the process has no stdin"));
            }
        };
        let master = match &input {
            Input::Terminal(master) => Some(master.clone()),
            Input::Pipe(_) => None,
        };
        let process = Arc::new(Process {
            pid,
            command: prepared.display,
            started_at_ms: now_ms(),
            terminal: request.terminal.is_some(),
            state: Mutex::new(State {
                output: Ring::new(capacity as usize),
                exit_code: None,
                ended: false,
                master,
            }),
            changes: watch::Sender::new(0),
            ended: watch::Sender::new(false),
            input: tokio::sync::Mutex::new(Some(input)),
        });
        {
            let mut table = lock(&self.table);
            if table.len() >= MAX_PROCESSES {
                // Room was checked before the spawn, and nothing ran in between.
                match table.iter().position(|p| p.is_ended()) {
                    Some(oldest_ended) => {
                        table.remove(oldest_ended);
                    }
                    None => {
                        kill_group(pid);
                        return Err(limit());
                    }
                }
            }
            table.push(process.clone());
        }
        tokio::spawn(pump(process.clone(), source, spawned.exit));
        Ok(process.info())
    }

    fn has_room(&self) -> bool {
        let table = lock(&self.table);
        table.len() < MAX_PROCESSES || table.iter().any(|p| p.is_ended())
    }

    fn find(&self, pid: u32) -> Result<Arc<Process>, AgentError> {
        lock(&self.table)
            .iter()
            .find(|p| p.pid == pid)
            .cloned()
            .ok_or_else(|| refuse(ErrorKind::NotFound, format!("no process {pid}")))
    }

    /// `Output`: from `offset`, waiting up to `wait_ms` when there is nothing yet.
    pub async fn output(&self, request: OutputRequest) -> Reply {
        let process = match self.find(request.pid) {
            Ok(process) => process,
            Err(error) => return Reply::Error(error),
        };
        let max = request.max_bytes.min(MAX_CHUNK_BYTES) as usize;
        let deadline = Instant::now() + wait_time(request.wait_ms);
        let mut changes = process.changes.subscribe();
        loop {
            let (slice, info) = {
                let state = lock(&process.state);
                (
                    state.output.read(request.offset, max),
                    process.info_of(&state),
                )
            };
            let nothing_yet = slice.data.is_empty() && info.running && max > 0;
            if !nothing_yet
                || Instant::now() >= deadline
                || matches!(timeout_at(deadline, changes.changed()).await, Ok(Err(_)))
            {
                return Reply::Output(OutputChunk {
                    offset: slice.offset,
                    data: slice.data,
                    dropped: slice.dropped,
                    process: info,
                });
            }
        }
    }

    /// `Input`: writes `data` to the process's stdin, then closes it when `close`.
    pub async fn input(&self, pid: u32, data: Vec<u8>, close: bool) -> Reply {
        if data.len() > MAX_CHUNK_BYTES as usize {
            return Reply::Error(refuse(
                ErrorKind::Invalid,
                format!("input is longer than {MAX_CHUNK_BYTES} bytes"),
            ));
        }
        let process = match self.find(pid) {
            Ok(process) => process,
            Err(error) => return Reply::Error(error),
        };
        let write = async {
            let mut input = process.input.lock().await;
            let result = match input.as_mut() {
                None => {
                    return Err(refuse(
                        ErrorKind::Invalid,
                        format!("the input of process {pid} is closed"),
                    ));
                }
                Some(Input::Pipe(stdin)) => stdin.write_all(&data).await,
                Some(Input::Terminal(master)) => {
                    let result = master.write_all(&data).await;
                    if close && result.is_ok() {
                        master.write_all(&[TERMINAL_EOF]).await
                    } else {
                        result
                    }
                }
            };
            result.map_err(|error| {
                let why = if error.kind() == io::ErrorKind::BrokenPipe {
                    "it no longer reads its input".to_owned()
                } else {
                    error.to_string()
                };
                refuse(
                    ErrorKind::Failed,
                    format!("cannot write to process {pid}: {why}"),
                )
            })?;
            if close && matches!(*input, Some(Input::Pipe(_))) {
                *input = None;
            }
            Ok(())
        };
        match timeout(IO_TIMEOUT, write).await {
            Ok(Ok(())) => Reply::Done,
            Ok(Err(error)) => Reply::Error(error),
            Err(_) => Reply::Error(refuse(
                ErrorKind::Failed,
                format!("process {pid} did not take its input within 10 s"),
            )),
        }
    }

    /// `Signal`: to the process's whole process group, while it runs.
    pub fn signal(&self, pid: u32, signal: Signal) -> Reply {
        let process = match self.find(pid) {
            Ok(process) => process,
            Err(error) => return Reply::Error(error),
        };
        if process.is_ended() {
            return Reply::Error(not_running(pid));
        }
        let signal = match signal {
            Signal::Term => rustix::process::Signal::TERM,
            Signal::Kill => rustix::process::Signal::KILL,
            Signal::Int => rustix::process::Signal::INT,
            Signal::Hup => rustix::process::Signal::HUP,
            Signal::Quit => rustix::process::Signal::QUIT,
            Signal::Usr1 => rustix::process::Signal::USR1,
            Signal::Usr2 => rustix::process::Signal::USR2,
            Signal::Stop => rustix::process::Signal::STOP,
            Signal::Cont => rustix::process::Signal::CONT,
        };
        let Some(group) = i32::try_from(pid).ok().and_then(Pid::from_raw) else {
            return Reply::Error(refuse(ErrorKind::Invalid, format!("invalid pid {pid}")));
        };
        match rustix::process::kill_process_group(group, signal) {
            // Exited, its end not yet noticed: the signal had nothing left to reach.
            Ok(()) | Err(rustix::io::Errno::SRCH) => Reply::Done,
            Err(error) => Reply::Error(refuse(
                ErrorKind::Failed,
                format!("cannot signal process {pid}: {error}"),
            )),
        }
    }

    /// `Resize`: a terminal process's terminal.
    pub fn resize(&self, pid: u32, size: TerminalSize) -> Reply {
        if !pty::valid_size(size) {
            return Reply::Error(refuse(
                ErrorKind::Invalid,
                "a terminal is 1 to 1000 columns and rows",
            ));
        }
        let process = match self.find(pid) {
            Ok(process) => process,
            Err(error) => return Reply::Error(error),
        };
        if !process.terminal {
            return Reply::Error(refuse(
                ErrorKind::Invalid,
                format!("process {pid} has no terminal"),
            ));
        }
        let Some(master) = lock(&process.state).master.clone() else {
            return Reply::Error(not_running(pid));
        };
        match master.resize(size) {
            Ok(()) => Reply::Done,
            Err(error) => Reply::Error(refuse(
                ErrorKind::Failed,
                format!("cannot resize the terminal of process {pid}: {error}"),
            )),
        }
    }

    /// `Wait`: until the process has ended or `timeout_ms` passed.
    pub async fn wait(&self, pid: u32, timeout_ms: u32) -> Reply {
        let process = match self.find(pid) {
            Ok(process) => process,
            Err(error) => return Reply::Error(error),
        };
        let mut ended = process.ended.subscribe();
        let _ = timeout(wait_time(timeout_ms), ended.wait_for(|ended| *ended)).await;
        Reply::Process(process.info())
    }

    /// `List`: every process kept, oldest first.
    pub fn list(&self) -> Reply {
        let table = lock(&self.table);
        Reply::Processes(table.iter().map(|p| p.info()).collect())
    }
}

impl Process {
    fn info(&self) -> ProcessInfo {
        self.info_of(&lock(&self.state))
    }

    fn info_of(&self, state: &State) -> ProcessInfo {
        ProcessInfo {
            pid: self.pid,
            command: self.command.clone(),
            running: !state.ended,
            exit_code: if state.ended { state.exit_code } else { None },
            started_at_ms: self.started_at_ms,
            terminal: self.terminal,
            output_bytes: state.output.total(),
            dropped_bytes: state.output.dropped(),
        }
    }

    fn is_ended(&self) -> bool {
        lock(&self.state).ended
    }

    fn append(&self, data: &[u8]) {
        lock(&self.state).output.push(data);
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    async fn end(&self, exit_code: Option<i32>) {
        {
            let mut state = lock(&self.state);
            state.exit_code = exit_code;
            state.ended = true;
            state.master = None;
        }
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
        self.ended.send_replace(true);
        // May wait for an Input in progress (at most its timeout).
        *self.input.lock().await = None;
    }
}

/// Moves a process's output into its ring until it has exited and its output ended.
async fn pump(process: Arc<Process>, source: Source, mut exit: oneshot::Receiver<i32>) {
    let mut source = Some(source);
    let mut buffer = vec![0u8; READ_PIECE];
    let mut exit_code = None;
    let mut exited = false;
    let mut end: Option<Instant> = None;
    while !(exited && source.is_none()) {
        tokio::select! {
            biased;
            code = &mut exit, if !exited => {
                exited = true;
                exit_code = code.ok();
                end = Some(Instant::now() + DRAIN);
            }
            () = sleep_until(end.unwrap_or_else(Instant::now)), if end.is_some() => break,
            read = read_source(&mut source, &mut buffer) => match read {
                Ok(n) if n > 0 => process.append(&buffer[..n]),
                _ => source = None,
            },
        }
    }
    // Closes the pipe (a grandchild still writing gets EPIPE) or our terminal reference.
    drop(source);
    process.end(exit_code).await;
}

async fn read_source(source: &mut Option<Source>, buffer: &mut [u8]) -> io::Result<usize> {
    match source {
        Some(Source::Pipe(pipe)) => pipe.read(buffer).await,
        Some(Source::Terminal(master)) => master.read(buffer).await,
        None => std::future::pending().await,
    }
}

fn wait_time(ms: u32) -> Duration {
    Duration::from_millis(u64::from(ms.min(MAX_WAIT_MS)))
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn limit() -> AgentError {
    refuse(
        ErrorKind::Limit,
        format!("{MAX_PROCESSES} processes are running already"),
    )
}

fn not_running(pid: u32) -> AgentError {
    refuse(ErrorKind::Invalid, format!("process {pid} is not running"))
}
