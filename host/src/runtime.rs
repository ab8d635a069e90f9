//! The WebAssembly runtime: one engine, the compile cache, the bindings of every served
//! contract version, the linker, the per-store host state, a pool of warm instances per
//! loaded backend, and the [`Backend`](backend::Backend) face the rest of the host uses.

pub mod backend;
pub mod backend_description;
pub mod bindings;
pub mod compile_cache;
pub mod compile_worker;
pub mod engine;
pub mod guest_call;
pub mod guest_types;
pub mod host_state;
pub mod instance_pool;
pub mod linker;
pub mod loaded_backend;
pub mod provider_component;
pub mod provider_guest;
pub mod provider_processes;
pub mod resource_component;
pub mod resource_guest;
pub mod resource_listing;
pub mod tool_table;
pub mod world;

pub use backend::{Backend, SessionStart, ToolCall};
pub use backend_description::BackendDescription;
pub use engine::WharfEngine;
pub use loaded_backend::LoadedBackend;
