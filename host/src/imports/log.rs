//! `log`: guest logs into the host's tracing, tagged with backend and session. A guest's
//! message is escaped (line breaks, control and bidi characters) so it stays on its own
//! line and cannot pass for another line of the host's log, an audit line included.

mod v0_1_adapter;

use super::{HasView, HostImportsView, View};
use crate::runtime::bindings::v0_2::backend::wharf::plugin0_2_0::log::{Host, Level};
use crate::runtime::bindings::{v0_1, v0_2};
use wasmtime::component::Linker;

/// What one call of `log` sees: whose it is (the counter's backend) and the call (`panic`
/// leaves its message there). It has no context of its own.
pub type LogView<'a> = View<'a, ()>;

/// Links `log` for components of every served contract version (0.1.0 through `v0_1`).
pub fn add_to_linker<T: HostImportsView>(linker: &mut Linker<T>) -> anyhow::Result<()> {
    v0_2::backend::wharf::plugin0_2_0::log::add_to_linker::<T, HasView<()>>(linker, HasView::view)?;
    v0_1::backend::wharf::plugin0_1_0::log::add_to_linker::<T, HasView<()>>(linker, HasView::view)?;
    Ok(())
}

/// Longest message kept; a guest cannot flood the host's logs with one call.
const MAX_MESSAGE: usize = 8 * 1024;

impl Host for LogView<'_> {
    async fn log(&mut self, level: Level, message: String) -> wasmtime::Result<()> {
        let message = crate::redact::one_line(&truncate(message));
        let backend = self.counter.backend();
        let session = self.call.session_id.as_deref().unwrap_or("-");
        // The call's span is off unless traces are exported (runtime/guest_call), so the
        // line names its request itself.
        let trace_id = self.call.trace_id.as_deref().unwrap_or("-");
        match level {
            Level::Trace => {
                tracing::trace!(target: "wharf::guest", backend, session, trace_id, "{message}")
            }
            Level::Debug => {
                tracing::debug!(target: "wharf::guest", backend, session, trace_id, "{message}")
            }
            Level::Info => {
                tracing::info!(target: "wharf::guest", backend, session, trace_id, "{message}")
            }
            Level::Warn => {
                tracing::warn!(target: "wharf::guest", backend, session, trace_id, "{message}")
            }
            Level::Error => {
                tracing::error!(target: "wharf::guest", backend, session, trace_id, "{message}")
            }
        }
        Ok(())
    }

    async fn panic(&mut self, message: String) -> wasmtime::Result<()> {
        let message = truncate(message);
        let shown = crate::redact::one_line(&message);
        tracing::error!(target: "wharf::guest", backend = self.counter.backend(), session = self.call.session_id.as_deref().unwrap_or("-"), trace_id = self.call.trace_id.as_deref().unwrap_or("-"), "panicked: {shown}");
        self.call.panic = Some(message);
        Ok(())
    }
}

/// At most [`MAX_MESSAGE`] bytes, cut on a character boundary.
fn truncate(mut message: String) -> String {
    if message.len() > MAX_MESSAGE {
        let mut end = MAX_MESSAGE;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
        message.push('…');
    }
    message
}
