//! The WebAssembly runtime: one engine, the compile cache, the bindings of the two worlds,
//! the per-store host state, and a pool of warm instances per loaded backend.

pub mod backend_description;
pub mod bindings;
pub mod compile_cache;
pub mod engine;
pub(crate) mod guest_ops;
pub mod host_state;
pub mod instance_pool;
pub mod loaded_backend;
pub mod provider_calls;
pub mod wit_version;

pub use backend_description::BackendDescription;
pub use engine::WharfEngine;
pub use loaded_backend::{LoadedBackend, ToolCall, ToolResult};
