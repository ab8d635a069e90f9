//! Commands starting at once through one engine's sandbox agents: at most
//! [`STARTS_PER_CORE`] per core of this host, the others waiting their turn in order.
//!
//! Why: a command's start is a chain of short steps on several processes (the agent, the
//! process it spawns, the runtime's filesystem daemon, this host), each waiting for a core.
//! With a hundred starting at once on two cores the kernel's run queue orders those steps
//! by luck, and the unlucky command waits three or four times the mean (measured:
//! docs/benchmarks.md, the 100-session row). Taken in turn here, the mean stays and the
//! tail goes. A command holds its slot until it ends or [`START_WINDOW`] passes, so a long
//! one (a build, a server) gives its slot back after its start and runs on unhindered.

use std::future::Future;
use std::time::Duration;

use tokio::sync::Semaphore;

/// Commands starting at once, per core of this host.
pub(crate) const STARTS_PER_CORE: usize = 8;
/// How long a running command keeps its start slot at most.
pub(crate) const START_WINDOW: Duration = Duration::from_millis(50);

/// The start slots of one engine's commands (FIFO: tokio's semaphore serves waiters in the
/// order they asked).
#[derive(Debug)]
pub(crate) struct CommandStarts {
    slots: Semaphore,
}

impl Default for CommandStarts {
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        Self::with_slots(cores.saturating_mul(STARTS_PER_CORE))
    }
}

impl CommandStarts {
    fn with_slots(slots: usize) -> Self {
        CommandStarts {
            slots: Semaphore::new(slots.clamp(1, Semaphore::MAX_PERMITS)),
        }
    }

    /// Runs `command` once a slot is free, holding it until `command` ends or
    /// [`START_WINDOW`] has passed.
    pub(crate) async fn run<F: Future>(&self, command: F) -> F::Output {
        // The semaphore is never closed; were it, the command would run unmetered.
        let slot = self.slots.acquire().await.ok();
        tokio::pin!(command);
        tokio::select! {
            ended = &mut command => ended,
            () = tokio::time::sleep(START_WINDOW) => {
                drop(slot);
                command.await
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test]
    async fn short_commands_take_turns_and_long_ones_give_their_slot_back() {
        let starts = Arc::new(CommandStarts::with_slots(2));
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let short = |starts: Arc<CommandStarts>| {
            let (running, most) = (running.clone(), most.clone());
            async move {
                starts
                    .run(async {
                        let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(5)).await;
                        running.fetch_sub(1, Ordering::SeqCst);
                    })
                    .await
            }
        };
        let shorts: Vec<_> = (0..6)
            .map(|_| tokio::spawn(short(starts.clone())))
            .collect();
        for task in shorts {
            task.await.expect("a short command");
        }
        assert_eq!(most.load(Ordering::SeqCst), 2, "two slots, two at once");

        // Two long commands hold both slots only for the window: a short one then starts.
        let longs: Vec<_> = (0..2)
            .map(|_| {
                let starts = starts.clone();
                tokio::spawn(async move {
                    starts
                        .run(tokio::time::sleep(Duration::from_secs(60)))
                        .await
                })
            })
            .collect();
        tokio::task::yield_now().await;
        let begun = std::time::Instant::now();
        short(starts.clone()).await;
        let waited = begun.elapsed();
        assert!(
            waited >= START_WINDOW && waited < Duration::from_secs(1),
            "{waited:?}"
        );
        for task in longs {
            task.abort();
        }
    }
}
