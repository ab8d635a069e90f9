//! Docker for backends (ARCHITECTURE.md, layers): an async client on bollard that scopes every
//! container to the backend that created it.
//!
//! - Every container carries the host's labels (`wharf.backend`, `wharf.session`,
//!   `wharf.node`); a guest may not set `wharf.*` labels, and a backend sees and touches
//!   only containers labelled with its own name. Containers are named by full 64-hex id:
//!   names, prefixes and other backends' ids all answer "not found".
//! - Networks default to `none`; `host` and `container:*` are always refused.
//! - `exec` runs the command as the leader of its own process group, keeps only the tail
//!   of its output, and kills the whole group on timeout or when its future is dropped.
//!   Commands without stdin or a user run through a resident shell in the container
//!   (no exec create/start per command); the rest get a one-off exec. No command line goes
//!   to a resident shell while a finished command's leftover may live in the container.
//! - An unreachable engine answers [`DockerError::Unavailable`] within seconds.
//!
//! Docker is the host's [`ContainerEngine`](crate::engines::ContainerEngine) (`engine`); its
//! plain types and error are the engine-neutral ones of [`engines`](crate::engines).
//!
//! Files: [`client`] (connection, ownership check), [`containers`] (lifecycle), `container_body`
//! (the create request and its hardening), `runtimes` (isolation levels), [`exec`], `command_starts` (commands taking turns to start),
//! [`archive`] (copy in/out), `resident_shell` (the fast exec path), `frames` and `leftovers`, [`labels`], [`types`], [`error`].

mod agent_calls;
mod agent_client;
mod agent_files;
mod agent_link;
mod agent_processes;
mod agent_stream;
pub mod archive;
pub mod client;
mod command_starts;
mod container_body;
pub mod containers;
mod egress_links;
mod egress_registry;
mod engine;
pub mod error;
pub mod exec;
mod frames;
mod freezer;
mod hand_over;
mod info;
mod kill;
mod known_agents;
pub mod labels;
mod leftovers;
mod link_exec;
mod output;
mod relay_frames;
mod resident_shell;
mod runtimes;
pub mod sandbox_agent;
mod shell_line;
mod shell_pool;
mod snapshots;
pub mod types;
mod volumes;

pub use client::{DEFAULT_DOCKER_HOST, Docker};
pub use error::DockerError;
pub use labels::{
    LABEL_BACKEND, LABEL_NODE, LABEL_POOL, LABEL_SESSION, POOL_SESSION_PREFIX, is_full_id,
};
pub use types::{
    Command, ContainerInfo, ContainerSpec, ContainerState, ExecOutput, ExecRequest, Mount, Network,
    Owner,
};
