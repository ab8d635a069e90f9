//! The Docker module's types: the engine-neutral ones of
//! [`engines::container_types`](crate::engines::container_types), re-exported under their
//! old path, and the exec streams bollard hands over.

pub use crate::engines::container_types::{
    Command, ContainerInfo, ContainerSpec, ContainerState, ExecOutput, ExecRequest, Mount, Network,
    Owner,
};

/// An attached exec's multiplexed output.
pub(crate) type OutputStream = std::pin::Pin<
    Box<
        dyn futures::Stream<Item = Result<bollard::container::LogOutput, bollard::errors::Error>>
            + Send,
    >,
>;
/// An attached exec's stdin.
pub(crate) type InputSink = std::pin::Pin<Box<dyn tokio::io::AsyncWrite + Send>>;
