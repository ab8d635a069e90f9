//! The standard sandbox toolset the host builds over any sandbox provider:
//! `run_command`, `read_file`, `write_file`, `list_directory`, `str_replace`, `export_file`,
//! presented to the rest of the host as an ordinary backend ([`ProviderBackend`]).
//! Native provider operations are used when declared; otherwise everything is done over
//! `run-command` with quoted paths, content through stdin or ≤ 100 KiB chunks, 4 MiB slices
//! for export, a sentinel byte to detect "too large", and exit codes for missing, directory
//! and not-a-regular-file. A provider with the `processes` feature (contract 0.3.0) also
//! gets `start_process`, `process_output`, `send_input`, `kill_process`, `list_processes`,
//! and `preview_url` (a signed URL to a port the session exposes).

pub mod dispatch;
pub mod file_ops;
pub mod pause_tool;
pub mod preview_tool;
pub mod process_tools;
pub mod provider_backend;
pub mod session_spec;
pub mod shell;
pub mod snapshot_tool;
pub mod tools;
pub mod warm_pool;
pub mod warm_sweep;

pub use provider_backend::ProviderBackend;
pub use tools::tool_descriptions;
