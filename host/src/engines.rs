//! The seams between the host imports and the engines that do the work (ARCHITECTURE.md,
//! layers): what the imports ask of a container engine ([`ContainerEngine`]) and of a
//! key-value store ([`KvStore`]) and of the store nodes share when they create
//! containers ([`CreateLedger`]), in the engines' own vocabulary. The implementations live
//! with their engines (`docker::Docker`, `store::StateStore`); each seam also has a disabled
//! implementation that answers 5012 to everything, so a host without the engine still has
//! one and never checks for its absence. A leaf: it sees `error_code` and nothing else.

pub mod container;
pub mod container_types;
pub mod create_ledger;
pub mod error;
pub mod kv;
pub mod sandbox_files;

pub use container::{ContainerEngine, DisabledEngine};
pub use container_types::{
    Command, ContainerInfo, ContainerSpec, ContainerState, ExecOutput, ExecRequest, Mount, Network,
    Owner, VolumeMount,
};
pub use create_ledger::CreateLedger;
pub use error::EngineError;
pub use kv::{DisabledKvStore, KvScope, KvStore};
