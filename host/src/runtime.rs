//! The WebAssembly runtime: one engine, the compile cache, the bindings of the two worlds,
//! the per-store host state, and a pool of warm instances per loaded backend.

pub mod bindings;
pub mod compile_cache;
pub mod engine;
pub(crate) mod guest_ops;
pub mod host_state;
pub mod instance_pool;
pub mod loaded_backend;
pub mod provider_calls;
pub mod wit_version;

pub use engine::WharfEngine;
pub use loaded_backend::{BackendDescription, LoadedBackend, ToolCall, ToolResult};
