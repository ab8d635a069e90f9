//! `progress` (contract 0.3.0): how far the call in progress has come, passed to a caller
//! that streams the call (its [`OutputSink`](crate::call_output::OutputSink)) and dropped
//! otherwise. The numbers are hostile input: each report is checked (finite, at least 0,
//! growing within the call, a positive total) before anything is sent, and the message is
//! cut to [`MAX_MESSAGE_BYTES`].

use super::{HasView, HostImportsView, View, guest_error};
use crate::call_output::ProgressReport;
use crate::error_code::Code;
use crate::runtime::bindings::v0_2::backend::wharf::plugin0_2_0::types::Error;
use crate::runtime::bindings::v0_3::backend::wharf::plugin0_3_0::progress::Host;
use wasmtime::component::Linker;

/// The longest message passed on, bytes (a longer one is cut at a character boundary).
pub const MAX_MESSAGE_BYTES: usize = 4096;

/// What one call of `progress` sees: the call in progress (where its reports go, and the
/// last one) and the counter. It has no context of its own.
pub type ProgressView<'a> = View<'a, ()>;

/// Links `progress` (0.3.0 on).
pub fn add_to_linker<T: HostImportsView>(linker: &mut Linker<T>) -> anyhow::Result<()> {
    crate::runtime::bindings::v0_3::backend::wharf::plugin0_3_0::progress::add_to_linker::<
        T,
        HasView<()>,
    >(linker, HasView::view)?;
    Ok(())
}

/// The report as checked against the call's `last` one; a refusal says which rule it broke.
pub fn checked(
    last: Option<f64>,
    progress: f64,
    total: Option<f64>,
    message: Option<String>,
) -> Result<ProgressReport, String> {
    if !progress.is_finite() || progress < 0.0 {
        return Err(format!(
            "progress {progress} is not a finite number of at least 0"
        ));
    }
    if let Some(last) = last
        && progress <= last
    {
        return Err(format!(
            "progress {progress} does not grow past the call's last report ({last})"
        ));
    }
    if let Some(total) = total
        && (!total.is_finite() || total <= 0.0)
    {
        return Err(format!("total {total} is not a finite positive number"));
    }
    let message = message.map(|mut m| {
        if m.len() > MAX_MESSAGE_BYTES {
            let mut end = MAX_MESSAGE_BYTES;
            while !m.is_char_boundary(end) {
                end -= 1;
            }
            m.truncate(end);
        }
        m
    });
    Ok(ProgressReport {
        progress,
        total,
        message,
    })
}

impl Host for ProgressView<'_> {
    async fn report(
        &mut self,
        progress: f64,
        total: Option<f64>,
        message: Option<String>,
    ) -> wasmtime::Result<Result<(), Error>> {
        let answer = match checked(self.call.last_progress, progress, total, message) {
            Ok(report) => {
                self.call.last_progress = Some(report.progress);
                if let Some(sink) = &self.call.output {
                    sink.progress(report);
                }
                Ok(())
            }
            Err(why) => Err(guest_error(Code::InvalidInput, why)),
        };
        self.counter.counted("progress.report", answer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_numbers_are_refused_and_long_messages_cut() {
        assert!(checked(None, f64::NAN, None, None).is_err());
        assert!(checked(None, f64::INFINITY, None, None).is_err());
        assert!(checked(None, -1.0, None, None).is_err());
        assert!(checked(Some(2.0), 2.0, None, None).is_err());
        assert!(checked(Some(2.0), 1.0, None, None).is_err());
        assert!(checked(None, 1.0, Some(0.0), None).is_err());
        assert!(checked(None, 1.0, Some(f64::NAN), None).is_err());
        let r = checked(Some(1.0), 2.0, Some(3.0), Some("é".repeat(5000))).unwrap();
        let m = r.message.unwrap();
        assert!(m.len() <= MAX_MESSAGE_BYTES && m.len() >= MAX_MESSAGE_BYTES - 1);
        assert_eq!((r.progress, r.total), (2.0, Some(3.0)));
        assert!(checked(None, 0.0, None, None).is_ok());
    }
}
