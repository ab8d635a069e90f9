//! Host imports: one file per interface, each implementing the generated `Host` trait on
//! [`HostState`](crate::runtime::host_state::HostState). Guest mistakes and policy denials
//! come back as WIT errors; only host bugs trap.

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

impl wit_types::Host for crate::runtime::host_state::HostState {}
