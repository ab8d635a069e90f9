//! # Wharf
//!
//! A host that loads backends shipped as WebAssembly components, runs each in a wasmtime
//! sandbox with a small set of host imports, and serves their tools to agents over HTTP.
//!
//! Layout: [`runtime`] (engine, compile cache, instance pools), [`imports`] (what guests
//! may call), [`front_door`] (the one entry point of the API layer: backends, tools,
//! sessions), [`api`] (REST), [`config`], [`cli`].

pub mod api;
pub mod audit;
pub mod backend_status;
pub mod bounded;
pub mod bundled;
pub mod call_output;
pub mod capped_file;
pub mod cli;
pub mod clock;
pub mod config;
pub mod docker;
pub mod egress_proxy;
pub mod engines;
pub mod error_code;
pub mod front_door;
pub mod hot_reload;
pub mod imports;
pub mod live_calls;
pub mod metrics;
pub mod oci;
pub mod policy;
pub mod preview_signature;
pub mod principal;
pub mod private_files;
pub mod quotas;
pub mod redact;
pub mod registry;
pub mod requires;
pub mod runtime;
pub mod sandbox_toolset;
pub mod scaffold;
pub mod schema_validation;
pub mod server;
pub mod session_record;
pub mod sessions;
pub mod snapshot_record;
pub mod store;
pub mod telemetry;
pub mod tenant;
pub mod terminal_ticket;
pub mod tool;
pub mod tool_filter;
pub mod tool_names;
pub mod volume_record;

pub use error_code::{Code, WharfError};
pub use front_door::Wharf;
