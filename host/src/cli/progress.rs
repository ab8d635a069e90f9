//! A live status line on stderr while the CLI waits on something slow.

/// Awaits `work`; if it takes longer than a second and stderr is a terminal, shows a live
/// `⠋ LABEL… 3.2s` status line on stderr meanwhile, cleared when `work` finishes.
pub(super) async fn with_progress<T>(label: &str, work: impl std::future::Future<Output = T>) -> T {
    use std::io::{IsTerminal, Write};
    const FRAMES: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
    if !std::io::stderr().is_terminal() {
        return work.await;
    }
    let started = std::time::Instant::now();
    let mut tick = tokio::time::interval_at(
        tokio::time::Instant::now() + std::time::Duration::from_secs(1),
        std::time::Duration::from_millis(100),
    );
    let mut shown = false;
    let mut frame = 0usize;
    tokio::pin!(work);
    let out = loop {
        tokio::select! {
            out = &mut work => break out,
            _ = tick.tick() => {
                let mut err = std::io::stderr().lock();
                let _ = write!(
                    err,
                    "\r\x1b[2K{} {label}… {:.1}s",
                    FRAMES[frame % FRAMES.len()],
                    started.elapsed().as_secs_f64()
                );
                let _ = err.flush();
                shown = true;
                frame += 1;
            }
        }
    };
    if shown {
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r\x1b[2K");
        let _ = err.flush();
    }
    out
}
