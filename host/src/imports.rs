//! Host imports: one file per interface, each implementing the generated `Host` trait on
//! [`HostState`](crate::runtime::host_state::HostState) with its grant checks and its one
//! wrapper (each ends in `HostState::counted`, the import metrics), and
//! linking itself for every contract version it serves (`add_to_linker`). [`add_to_linker`]
//! below is the one list of them. Guest mistakes and policy denials come back as WIT
//! errors; only host bugs trap. (ARCHITECTURE.md, "Adding a host import".)

pub mod container;
mod container_quota;
pub mod container_turns;
pub mod egress;
pub mod exec;
pub mod host_mounts;
pub mod http;
pub mod kv;
pub mod log;
pub mod v0_1;

use crate::error_code::Code;
use crate::runtime::bindings::v0_2::backend::wharf::plugin::types as wit_types;
use crate::runtime::host_state::HostState;
use wasmtime::component::{HasSelf, Linker};

/// Links every host import, each for every contract version it serves: the one
/// registration list (a new import adds its line here).
pub fn add_to_linker(linker: &mut Linker<HostState>) -> anyhow::Result<()> {
    add_types_to_linker(linker)?;
    log::add_to_linker(linker)?;
    kv::add_to_linker(linker)?;
    container::add_to_linker(linker)?;
    exec::add_to_linker(linker)?;
    egress::add_to_linker(linker)?;
    http::add_to_linker(linker)?;
    Ok(())
}

/// `types`, the records the other interfaces share (nothing to call).
fn add_types_to_linker(linker: &mut Linker<HostState>) -> anyhow::Result<()> {
    type H = HasSelf<HostState>;
    wit_types::add_to_linker::<HostState, H>(linker, |s| s)?;
    crate::runtime::bindings::v0_1::backend::wharf::plugin::types::add_to_linker::<HostState, H>(
        linker,
        |s| s,
    )?;
    Ok(())
}

/// A WIT error for the guest.
pub fn guest_error(code: Code, message: impl Into<String>) -> wit_types::Error {
    wit_types::Error {
        code: code.as_u32(),
        message: message.into(),
        retryable: false,
        data: None,
    }
}

/// A host error as the guest sees it, code and retryability kept.
pub fn wharf_error(e: crate::error_code::WharfError) -> wit_types::Error {
    let mut err = guest_error(e.code, e.message);
    err.retryable = e.retryable;
    err
}

/// The answer of an import whose capability the operator has not granted this backend.
pub fn not_granted(what: &str) -> wit_types::Error {
    guest_error(
        Code::Forbidden,
        format!("{what} is not granted to this backend"),
    )
}

impl HostState {
    /// The one place an import's answer is counted (`wharf_imports_total{backend, import,
    /// outcome}`); every import's wrapper ends here. `import` is `interface.function`.
    pub(crate) fn counted<T>(
        &self,
        import: &str,
        answer: Result<T, wit_types::Error>,
    ) -> wasmtime::Result<Result<T, wit_types::Error>> {
        self.services
            .metrics
            .import_answer(&self.backend, import, Ok(answer))
    }
}

impl wit_types::Host for HostState {}
