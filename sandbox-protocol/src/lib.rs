//! The protocol between the Wharf host and `wharf-sandboxd`, the agent that runs as PID 1
//! in every sandbox container the host creates.
//!
//! Transport: a Unix stream socket the agent listens on ([`SOCKET_PATH`] inside the
//! container, a per-sandbox directory on the host), reached directly or through the
//! engine ([`link`]: a yamux stream per connection, relayed to the socket). Framing: 4-byte big-endian length
//! prefixes (`tokio_util::codec::LengthDelimitedCodec`), at most [`MAX_FRAME_BYTES`] per
//! frame. Payload: one [`Request`] or [`Reply`], encoded with `postcard` ([`encode`],
//! [`decode`]). One connection carries one request: the client writes one request frame,
//! the agent answers with zero or more [`Reply::Chunk`] frames (only for a streamed
//! [`RunRequest`]) and exactly one final reply, then closes. A client that closes the
//! connection (both ways) before the final reply abandons the request: a command it ran
//! is killed. Background processes belong to the agent, not to a connection. The two
//! exceptions to the framing are [`Request::Connect`] and [`Request::EgressWait`] (and
//! [`Request::EgressHandOver`] and [`Request::ConnectHandOver`] when their descriptor did
//! not travel): after
//! their [`Reply::Connected`] frame the connection carries raw bytes, relayed to and from
//! a TCP connection in the sandbox (to a port there, or from a program that reached the
//! agent's egress listener). A [`Request::Files`] that takes input is followed by the
//! host's raw data frames (see [`FileOp`]).
//!
//! Both sides treat the other as hostile: every length is bounded by the constants here,
//! and a frame that does not decode ends the connection with [`Reply::Error`].

use serde::{Deserialize, Serialize};

mod files;
pub mod link;

pub use files::{
    FileEvent, FileEventKind, FileInfo, FileKind, FileOp, FilesRequest, Listing, MAX_ANSWER_BYTES,
    MAX_EVENT_BYTES, MAX_LIST_ENTRIES, MAX_PATH_BYTES, MAX_WATCHED_DIRECTORIES, valid_path,
};

/// The protocol version the agent reports in [`Reply::Hello`].
pub const VERSION: u32 = 1;
/// The largest frame either side writes or accepts (a [`Reply::Ran`] carries two output
/// tails of up to [`MAX_RUN_OUTPUT_BYTES`] each).
pub const MAX_FRAME_BYTES: usize = 4 << 20;
/// The largest data chunk in one reply ([`Reply::Chunk`], [`OutputChunk::data`]) and the
/// largest stdin write ([`Request::Input`]) the agent accepts.
pub const MAX_CHUNK_BYTES: u32 = 256 * 1024;
/// The largest `max_output_bytes` of a [`RunRequest`] (each of stdout and stderr).
pub const MAX_RUN_OUTPUT_BYTES: u32 = 1 << 20;
/// The longest [`ProcessInfo::command`] the agent reports (longer ones are cut), so 64
/// processes always fit one [`Reply::Processes`] frame.
pub const MAX_COMMAND_DISPLAY_BYTES: usize = 4096;
/// The largest stdin of a [`RunRequest`].
pub const MAX_RUN_STDIN_BYTES: usize = 512 * 1024;
/// The default and the largest ring buffer of a background process's output.
pub const DEFAULT_PROCESS_BUFFER_BYTES: u32 = 1 << 20;
/// See [`DEFAULT_PROCESS_BUFFER_BYTES`].
pub const MAX_PROCESS_BUFFER_BYTES: u32 = 16 << 20;
/// Background processes the agent keeps at once (running and exited); starting one more
/// forgets the oldest exited one, or is refused when all are running.
pub const MAX_PROCESSES: usize = 64;
/// The longest a request may wait (long-poll of [`Request::Output`], [`Request::Wait`]).
pub const MAX_WAIT_MS: u32 = 60_000;
/// Connections the agent serves at once; more wait in the listen backlog. Port relays
/// ([`MAX_RELAYS`]) and egress relays ([`MAX_EGRESS_RELAYS`]) together hold at most 96 of
/// them, so commands always keep at least 64.
pub const MAX_CONNECTIONS: usize = 160;
/// Port relays ([`Request::Connect`]) open at once per agent. Each holds one of the
/// [`MAX_CONNECTIONS`] connection slots; with [`MAX_EGRESS_RELAYS`] they leave commands at
/// least 64 slots of their own.
pub const MAX_RELAYS: usize = 64;
/// Egress relays ([`Request::EgressWait`], waiting and relaying together) at once per
/// agent. Each holds one of the [`MAX_CONNECTIONS`] connection slots; with [`MAX_RELAYS`]
/// they leave commands at least 64 slots of their own.
pub const MAX_EGRESS_RELAYS: usize = 32;
// Checked when the crate compiles, so a change to one limit cannot starve commands.
const _: () = assert!(MAX_CONNECTIONS >= MAX_RELAYS + MAX_EGRESS_RELAYS + 64);
/// How long the agent tries to reach the port of a [`Request::Connect`].
pub const RELAY_CONNECT_TIMEOUT_MS: u64 = 5_000;
/// The loopback port the host asks the agent to listen on for egress (`--egress-port`):
/// the host points `HTTP_PROXY` and `HTTPS_PROXY` at `http://127.0.0.1:3128`, and its
/// [`Request::EgressWait`]s pick up what programs send there.
pub const EGRESS_PORT: u16 = 3128;

/// Where the agent's binary is mounted, read-only, in the container.
pub const BINARY_PATH: &str = "/.wharf/sandboxd";
/// The directory the agent's socket lives in, in the container (a host directory is
/// bind-mounted there).
pub const SOCKET_DIR: &str = "/.wharf/run";
/// The agent's socket, in the container.
pub const SOCKET_PATH: &str = "/.wharf/run/agent.sock";
/// The socket's file name inside [`SOCKET_DIR`] (and inside the host's directory).
pub const SOCKET_NAME: &str = "agent.sock";

/// What to run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Command {
    /// A script for `/bin/sh -c`.
    Shell(String),
    /// A program and its arguments, executed directly (no shell needed in the image).
    Argv(Vec<String>),
}

/// Where and as whom a command runs; shared by [`RunRequest`] and [`StartRequest`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessSetup {
    /// Extra environment variables (on top of the agent's own environment).
    pub env: Vec<(String, String)>,
    /// Working directory; the container's when `None`.
    pub cwd: Option<String>,
    /// `name`, `uid`, `uid:gid` or `name:group` (either part a name or a number), looked
    /// up in the container's `/etc/passwd` and `/etc/group`; the container's user (root)
    /// when `None`. Supplementary groups are not kept.
    pub user: Option<String>,
}

/// Runs a command to completion (the `run_command` of a sandbox).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunRequest {
    /// What to run.
    pub command: Command,
    /// Environment, directory and user.
    pub setup: ProcessSetup,
    /// Written to stdin, which is then closed; `None`: stdin is `/dev/null`.
    pub stdin: Option<Vec<u8>>,
    /// Wall-clock limit (> 0); past it the whole process group is killed.
    pub timeout_ms: u32,
    /// How many bytes of stdout and of stderr (each) are kept: the last ones.
    pub max_output_bytes: u32,
    /// Send the output as [`Reply::Chunk`] frames while the command runs.
    pub stream: bool,
}

/// Which output stream a chunk is from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Stream {
    /// Standard output (and a terminal's output).
    Stdout,
    /// Standard error.
    Stderr,
}

/// The result of a [`RunRequest`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunOutput {
    /// Exit code (128 + n when killed by signal n); `None` when killed for the timeout.
    pub exit_code: Option<i32>,
    /// The last `max_output_bytes` of stdout.
    pub stdout: Vec<u8>,
    /// The last `max_output_bytes` of stderr.
    pub stderr: Vec<u8>,
    /// Stdout was longer than what is kept.
    pub stdout_truncated: bool,
    /// Stderr was longer than what is kept.
    pub stderr_truncated: bool,
    /// The command ran past its timeout and its process group was killed.
    pub timed_out: bool,
}

/// A terminal's size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TerminalSize {
    /// Columns (1–1000).
    pub cols: u16,
    /// Rows (1–1000).
    pub rows: u16,
}

impl TerminalSize {
    /// The most columns or rows a terminal has.
    pub const MAX: u16 = 1000;

    /// Whether both sides are within 1 to [`TerminalSize::MAX`].
    pub fn fits(self) -> bool {
        (1..=Self::MAX).contains(&self.cols) && (1..=Self::MAX).contains(&self.rows)
    }
}

/// Starts a background process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StartRequest {
    /// What to run.
    pub command: Command,
    /// Environment, directory and user.
    pub setup: ProcessSetup,
    /// Run it on a terminal of this size (stdout and stderr are then one stream).
    pub terminal: Option<TerminalSize>,
    /// The ring buffer of its output, in bytes; 0 means [`DEFAULT_PROCESS_BUFFER_BYTES`].
    pub buffer_bytes: u32,
}

/// Reads a background process's output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputRequest {
    /// The process.
    pub pid: u32,
    /// The first byte wanted, counted from the process's first byte of output.
    pub offset: u64,
    /// At most this many bytes (capped at [`MAX_CHUNK_BYTES`]).
    pub max_bytes: u32,
    /// When nothing is there yet and the process runs, wait up to this long for output.
    pub wait_ms: u32,
}

/// A signal the host may send (a closed set: nothing else crosses).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Signal {
    /// SIGTERM.
    Term,
    /// SIGKILL.
    Kill,
    /// SIGINT.
    Int,
    /// SIGHUP.
    Hup,
    /// SIGQUIT.
    Quit,
    /// SIGUSR1.
    Usr1,
    /// SIGUSR2.
    Usr2,
    /// SIGSTOP.
    Stop,
    /// SIGCONT.
    Cont,
}

/// What the host asks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// The agent's version and pid: [`Reply::Hello`].
    Hello,
    /// Runs a command to completion: [`Reply::Chunk`]s if streamed, then [`Reply::Ran`].
    Run(RunRequest),
    /// Starts a background process: [`Reply::Process`].
    Start(StartRequest),
    /// Reads a process's output: [`Reply::Output`].
    Output(OutputRequest),
    /// Writes to a process's stdin (at most [`MAX_CHUNK_BYTES`]), then closes it when
    /// `close` (on a terminal, `close` writes end-of-file, ^D, and keeps the terminal
    /// open): [`Reply::Done`].
    Input {
        /// The process.
        pid: u32,
        /// The bytes.
        data: Vec<u8>,
        /// Close stdin after writing.
        close: bool,
    },
    /// Signals a process's whole process group: [`Reply::Done`].
    Signal {
        /// The process.
        pid: u32,
        /// The signal.
        signal: Signal,
    },
    /// Resizes a process's terminal: [`Reply::Done`].
    Resize {
        /// The process.
        pid: u32,
        /// The new size.
        size: TerminalSize,
    },
    /// Waits up to `timeout_ms` for a process to exit: [`Reply::Process`] (still running
    /// when the wait ran out).
    Wait {
        /// The process.
        pid: u32,
        /// How long to wait (capped at [`MAX_WAIT_MS`]).
        timeout_ms: u32,
    },
    /// The processes the agent keeps: [`Reply::Processes`].
    List,
    /// Opens a TCP connection to `port` on the sandbox's loopback (`127.0.0.1`, then
    /// `[::1]`); after [`Reply::Connected`] the connection carries raw bytes both ways
    /// until either side closes. At most [`MAX_RELAYS`] are open at once.
    Connect {
        /// The port (not 0).
        port: u16,
    },
    /// Waits for the next TCP connection a program in the sandbox makes to the agent's
    /// egress listener (`--egress-port`, see [`EGRESS_PORT`]); when one arrives the agent
    /// answers [`Reply::Connected`] and the connection then carries that program's bytes
    /// both ways (raw, like [`Request::Connect`]) until either side closes. A host that
    /// closes its socket while waiting frees the slot. At most [`MAX_EGRESS_RELAYS`] at
    /// once (waiting and relaying together).
    EgressWait,
    /// A file operation (see the `files` module's documentation for its frames):
    /// [`Reply::Chunk`]s of output, then [`Reply::Done`] or [`Reply::Error`].
    Files(FilesRequest),
    /// As [`Request::EgressWait`], but the agent hands the program's TCP connection itself
    /// over: its descriptor travels with the [`Reply::Connected`] frame (`SCM_RIGHTS`, in
    /// the same `sendmsg`), the agent closes its copy and the host talks to the program
    /// directly. Where the socket refuses the descriptor (gVisor's do), `Connected` comes
    /// alone and the agent relays as for `EgressWait`: a host that finds no descriptor with
    /// the frame reads and writes the connection it asked on. Over the engine link the host
    /// asks `EgressWait`: a descriptor cannot cross it.
    EgressHandOver,
    /// As [`Request::Connect`], but the agent hands the TCP connection to the port over,
    /// as [`Request::EgressHandOver`] does a program's: its descriptor travels with the
    /// [`Reply::Connected`] frame and the agent closes its copy. The relay slot stays
    /// taken until the host closes the connection it asked on (so [`MAX_RELAYS`] still
    /// bounds a sandbox's open ports). Where the descriptor cannot travel, `Connected`
    /// comes alone and the agent relays as for `Connect`.
    ConnectHandOver {
        /// The port (not 0).
        port: u16,
    },
}

/// A background process, as the agent keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessInfo {
    /// Its pid inside the container (also its process group).
    pub pid: u32,
    /// The command, as started (an argv joined by spaces), at most
    /// [`MAX_COMMAND_DISPLAY_BYTES`].
    pub command: String,
    /// Still running: it has not exited, or its output has not ended yet (the pipes are
    /// open, for at most 200 ms after the exit). Once `false`, `output_bytes` is final.
    pub running: bool,
    /// Its exit code once exited (128 + n when killed by signal n).
    pub exit_code: Option<i32>,
    /// When it started, in milliseconds since the Unix epoch.
    pub started_at_ms: u64,
    /// Runs on a terminal.
    pub terminal: bool,
    /// Bytes of output it has written so far (the offset after its last byte).
    pub output_bytes: u64,
    /// Bytes of output dropped from the front of its ring buffer.
    pub dropped_bytes: u64,
}

/// Output of a background process (stdout and stderr together, in the order written).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputChunk {
    /// The offset of `data`'s first byte; larger than asked when older bytes were dropped.
    pub offset: u64,
    /// The bytes.
    pub data: Vec<u8>,
    /// Bytes between the asked offset and `offset` that were dropped from the buffer.
    pub dropped: u64,
    /// The process as of this read; when it is not `running` and `offset + data.len()`
    /// equals `output_bytes`, there is no more output.
    pub process: ProcessInfo,
}

/// Why a request failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ErrorKind {
    /// The request was malformed or out of bounds.
    Invalid,
    /// No such process (or user, or directory).
    NotFound,
    /// A limit of the agent's (processes, connections) was reached.
    Limit,
    /// The operating system refused (spawn, signal, write).
    Failed,
    /// The sandbox's user may not (a file operation on a path it cannot reach).
    Denied,
}

/// A refusal, with a message that names what was wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentError {
    /// The kind.
    pub kind: ErrorKind,
    /// What was wrong, for a person.
    pub message: String,
}

/// What the agent answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Reply {
    /// The agent's protocol version and its pid in the container.
    Hello {
        /// [`VERSION`].
        version: u32,
        /// The agent's own pid (1 when it is the container's init).
        pid: u32,
    },
    /// A piece of a streamed command's output (at most [`MAX_CHUNK_BYTES`]).
    Chunk {
        /// Which stream.
        stream: Stream,
        /// The bytes.
        data: Vec<u8>,
    },
    /// The end of a [`Request::Run`].
    Ran(RunOutput),
    /// A process ([`Request::Start`], [`Request::Wait`]).
    Process(ProcessInfo),
    /// Output of a process.
    Output(OutputChunk),
    /// Every process the agent keeps, oldest first.
    Processes(Vec<ProcessInfo>),
    /// Done, nothing to report.
    Done,
    /// The request failed.
    Error(AgentError),
    /// The port of a [`Request::Connect`] accepted the connection, or a program connected
    /// to the egress listener ([`Request::EgressWait`]); raw bytes follow, both ways.
    Connected,
}

/// A message that does not decode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError(pub String);

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "malformed agent message: {}", self.0)
    }
}

impl std::error::Error for DecodeError {}

/// Encodes a message for one frame.
pub fn encode<T: Serialize>(message: &T) -> Vec<u8> {
    // Serializing these types into a Vec cannot fail (no maps with non-string keys, no
    // custom serializers); an empty frame would be refused by the peer anyway.
    postcard::to_allocvec(message).unwrap_or_default()
}

/// Decodes one frame's message (the whole frame must be used).
pub fn decode<'a, T: Deserialize<'a>>(frame: &'a [u8]) -> Result<T, DecodeError> {
    match postcard::take_from_bytes(frame) {
        Ok((message, [])) => Ok(message),
        Ok((_, rest)) => Err(DecodeError(format!("{} trailing bytes", rest.len()))),
        Err(e) => Err(DecodeError(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip() {
        let request = Request::Run(RunRequest {
            command: Command::Argv(vec!["echo".into(), "hi".into()]),
            setup: ProcessSetup {
                env: vec![("A".into(), "b".into())],
                cwd: Some("/work".into()),
                user: Some("1000:1000".into()),
            },
            stdin: Some(b"in".to_vec()),
            timeout_ms: 1000,
            max_output_bytes: 10,
            stream: true,
        });
        assert_eq!(decode::<Request>(&encode(&request)).unwrap(), request);
        let reply = Reply::Chunk {
            stream: Stream::Stderr,
            data: vec![0, 255, 10],
        };
        assert_eq!(decode::<Reply>(&encode(&reply)).unwrap(), reply);
    }

    #[test]
    fn hostile_frames_are_refused_not_trusted() {
        // Empty, truncated, trailing bytes, and a length prefix far past the frame.
        assert!(decode::<Request>(&[]).is_err());
        let mut frame = encode(&Request::List);
        frame.push(0);
        assert!(decode::<Request>(&frame).is_err());
        let full = encode(&Request::Input {
            pid: 1,
            data: vec![7; 100],
            close: false,
        });
        assert!(decode::<Request>(&full[..full.len() - 1]).is_err());
        // Variant 4 (Input), pid 1, then a data length of 2^32 with no bytes behind it.
        assert!(decode::<Request>(&[4, 1, 0x80, 0x80, 0x80, 0x80, 0x10]).is_err());
        assert!(decode::<Request>(&[200]).is_err());
    }

    #[test]
    fn new_variants_keep_the_old_discriminants() {
        assert_eq!(encode(&Request::List), [8]);
        assert_eq!(encode(&Reply::Done), [6]);
        assert_eq!(encode(&Request::Connect { port: 8080 }), [9, 0x90, 0x3f]);
        assert_eq!(encode(&Reply::Connected), [8]);
        assert_eq!(encode(&Request::EgressWait), [10]);
        assert_eq!(encode(&Request::EgressHandOver), [12]);
        assert_eq!(encode(&Request::ConnectHandOver { port: 80 }), [13, 80]);
        assert_eq!(
            encode(&Request::Files(FilesRequest {
                op: FileOp::Stat { path: "a".into() },
                user: None
            }))[0],
            11
        );
    }
}
