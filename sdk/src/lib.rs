//! # wharf-sdk
//!
//! Write Wharf backends in plain Rust. A backend is a struct
//! that implements [`Backend`] (tools plus optional lifecycle hooks) or [`Provider`] (a
//! sandbox provider), exported with [`export_backend!`] or [`export_provider!`]. Tool
//! arguments are ordinary Rust types: their JSON Schema is generated with `schemars` and the
//! host validates every call against it before your code runs.
//!
//! Tools are registered with the [`Tools`] builder or, shorter, with `#[tools]` on an impl
//! block and `#[tool(...)]` on its methods (see [`tools`]). The host imports are
//! [`host::kv`], [`host::log`], [`host::container`], [`host::exec`] and [`http`].
//!
//! The WebAssembly plumbing (`wit-bindgen`, the component model) stays inside this crate.

#![cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]

extern crate self as wharf_sdk;

mod backend;
#[doc(hidden)]
pub mod bindings;
mod error;
mod export;
pub mod host;
pub mod http;
mod provider;
mod session;
mod tools;

pub use backend::{Backend, BackendInfo, Capabilities, Discovery};
pub use error::{ToolError, codes};
pub use provider::{
    CommandRequest, CommandResult, DirEntry, EntryKind, FileChunk, NetworkPolicy, ProcessRequest,
    Provider, ProviderFeatures, ProviderInfo, SandboxSpec,
};
pub use session::Session;
pub use tools::{Annotations, Attachment, Call, NoArgs, SessionNeed, ToolSpec, Tools};
pub use wharf_sdk_macros::{tool, tools};

pub use schemars::{self, JsonSchema};
pub use serde::{self, Deserialize, Serialize};
pub use serde_json::{self, Value, json};

#[doc(hidden)]
pub mod __private {
    pub use crate::backend::BackendExport;
    pub use crate::provider::ProviderExport;
    pub use wit_bindgen;
}
