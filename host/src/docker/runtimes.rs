//! Isolation levels on this engine: the operator maps each level beyond `container` to one
//! of the engine's OCI runtimes (`[server.runtimes] gvisor = "runsc"`), and a container
//! asking for a level gets that runtime, after the engine says it has it. A level with no
//! runtime, or a runtime the engine lacks, is refused: never a weaker sandbox than asked.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::error::DockerError;
use crate::policy::Isolation;

/// How long the engine's list of runtimes is trusted (dockerd reloads runtimes on SIGHUP).
const RUNTIMES_FRESH_FOR: Duration = Duration::from_secs(30);

/// Host threads gVisor's sentry holds at rest, with room (measured: about 80 under the
/// ptrace platform).
const GVISOR_SENTRY_THREADS: i64 = 128;
/// Host threads gVisor holds for each process running in its sandbox, with room (measured:
/// 12–27 under the ptrace platform, the threads of its stub).
const GVISOR_THREADS_PER_PROCESS: i64 = 32;
/// The most host threads a gVisor sandbox's pids limit allows, whatever it was asked for.
pub(crate) const GVISOR_MAX_HOST_PIDS: i64 = 4096;

/// The engine's pids limit for a gVisor sandbox asked to hold `processes`: under gVisor
/// the container's pids cgroup counts gVisor's own host threads, not the sandbox's
/// processes, and past it gVisor stops the whole sandbox. So the limit asked for is
/// translated into host threads (at most [`GVISOR_MAX_HOST_PIDS`]), which still bounds
/// what a fork bomb inside can take from this host.
pub(crate) fn gvisor_host_pids(processes: i64) -> i64 {
    processes
        .max(1)
        .saturating_mul(GVISOR_THREADS_PER_PROCESS)
        .saturating_add(GVISOR_SENTRY_THREADS)
        .min(GVISOR_MAX_HOST_PIDS)
}

/// The operator's runtime per isolation level, and what the engine last said it has.
#[derive(Debug)]
pub(crate) struct IsolationRuntimes {
    mapped: BTreeMap<Isolation, String>,
    engine_has: Mutex<Option<(Instant, EngineRuntimes)>>,
}

/// The runtime a container is created with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EngineRuntime {
    /// The engine's name for it.
    pub name: String,
    /// Whether it gives the host the sandbox's Unix sockets ([`shares_host_sockets`]).
    pub host_sockets: bool,
}

/// The engine's runtimes: name → the arguments it is registered with.
pub(crate) type EngineRuntimes = BTreeMap<String, Vec<String>>;

/// Whether a runtime registered with `args` gives the host the sandbox's Unix sockets:
/// gVisor only with `--host-uds=all` (this runsc binds host sockets with nothing less;
/// scripts/register-gvisor.sh). Without, the agent is reached through the engine.
pub(crate) fn shares_host_sockets(args: &[String]) -> bool {
    args.iter().any(|arg| arg == "--host-uds=all")
}

impl IsolationRuntimes {
    /// No level mapped: `container` only.
    pub(crate) const fn none() -> Self {
        Self {
            mapped: BTreeMap::new(),
            engine_has: Mutex::new(None),
        }
    }

    /// The operator's map; a level mapped to an empty or malformed name is an error.
    pub(crate) fn new(mapped: BTreeMap<Isolation, String>) -> Result<Self, DockerError> {
        for (level, runtime) in &mapped {
            if runtime.is_empty()
                || runtime.len() > 128
                || !runtime
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
            {
                return Err(DockerError::Invalid(format!(
                    "server.runtimes.{level}: bad runtime name {runtime:?}"
                )));
            }
        }
        Ok(Self {
            mapped,
            engine_has: Mutex::new(None),
        })
    }

    /// The levels this engine is configured to give (whether its runtimes are present is
    /// checked at create).
    pub(crate) fn levels(&self) -> Vec<Isolation> {
        Isolation::ALL
            .into_iter()
            .filter(|level| *level == Isolation::Container || self.mapped.contains_key(level))
            .collect()
    }

    /// The runtime the operator named for `level`; `None` for `container` left unmapped
    /// (the engine's default runtime).
    pub(crate) fn mapped(&self, level: Isolation) -> Result<Option<&str>, DockerError> {
        match (level, self.mapped.get(&level)) {
            (_, Some(runtime)) => Ok(Some(runtime)),
            (Isolation::Container, None) => Ok(None),
            (level, None) => Err(DockerError::Refused(format!(
                "isolation `{level}` is not offered by this host: the operator maps it to an engine runtime in [server.runtimes] (e.g. {level} = \"runsc\")"
            ))),
        }
    }

    /// What the engine said it has, if said recently.
    pub(crate) fn fresh(&self) -> Option<EngineRuntimes> {
        let known = self.engine_has.lock().ok()?;
        known
            .as_ref()
            .filter(|(at, _)| at.elapsed() < RUNTIMES_FRESH_FOR)
            .map(|(_, set)| set.clone())
    }

    /// Remembers what the engine says it has.
    pub(crate) fn remember(&self, runtimes: EngineRuntimes) {
        if let Ok(mut known) = self.engine_has.lock() {
            *known = Some((Instant::now(), runtimes));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gvisor_pids_limit_counts_gvisors_threads_within_a_ceiling() {
        assert_eq!(gvisor_host_pids(1), 160);
        assert_eq!(gvisor_host_pids(64), 64 * 32 + 128);
        assert_eq!(gvisor_host_pids(256), GVISOR_MAX_HOST_PIDS);
        assert_eq!(gvisor_host_pids(i64::MAX), GVISOR_MAX_HOST_PIDS);
        assert_eq!(
            gvisor_host_pids(-5),
            160,
            "a nonsense limit is not unlimited"
        );
    }

    #[test]
    fn levels_need_a_runtime_beyond_container() {
        let none = IsolationRuntimes::none();
        assert_eq!(none.levels(), vec![Isolation::Container]);
        assert_eq!(none.mapped(Isolation::Container).unwrap(), None);
        let refused = none.mapped(Isolation::Gvisor).unwrap_err();
        assert!(matches!(refused, DockerError::Refused(m) if m.contains("server.runtimes")));

        let gvisor =
            IsolationRuntimes::new(BTreeMap::from([(Isolation::Gvisor, "runsc".into())])).unwrap();
        assert_eq!(
            gvisor.levels(),
            vec![Isolation::Container, Isolation::Gvisor]
        );
        assert_eq!(gvisor.mapped(Isolation::Gvisor).unwrap(), Some("runsc"));
        assert!(shares_host_sockets(&[
            "--platform=ptrace".into(),
            "--host-uds=all".into()
        ]));
        assert!(!shares_host_sockets(&["--host-uds=open".into()]));
        assert!(!shares_host_sockets(&[]));
        for bad in ["", "run sc", "../x", "a;b"] {
            assert!(
                IsolationRuntimes::new(BTreeMap::from([(Isolation::Gvisor, bad.into())])).is_err()
            );
        }
    }
}
