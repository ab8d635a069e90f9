//! File operations in a container through its sandbox agent, in the engine's vocabulary:
//! the operations and their answers are the agent protocol's own types (a leaf crate of
//! plain data), and their output arrives as a bounded channel of byte chunks.

pub use wharf_sandbox_protocol::{
    FileEvent, FileEventKind, FileInfo, FileKind, FileOp, Listing, MAX_ANSWER_BYTES,
    MAX_EVENT_BYTES,
};

use super::error::EngineError;

/// The output of a file operation, chunk by chunk: the channel closes after the last
/// chunk when the operation succeeded, and after an `Err` when it failed. Dropping it
/// abandons the operation (the agent then kills its helper).
pub type FileOutput = tokio::sync::mpsc::Receiver<Result<bytes::Bytes, EngineError>>;

/// The input of a file operation that takes some (a write, a tar stream in): chunks,
/// ended by closing the channel.
pub type FileInput = tokio::sync::mpsc::Receiver<bytes::Bytes>;

/// A file operation's whole output, for those whose answer is one message (a stat, a
/// listing): at most `max` bytes, else an error.
pub async fn collect(mut output: FileOutput, max: usize) -> Result<Vec<u8>, EngineError> {
    let mut all = Vec::new();
    while let Some(chunk) = output.recv().await {
        let chunk = chunk?;
        if all.len() + chunk.len() > max {
            return Err(EngineError::TooLarge(format!(
                "the sandbox's answer is larger than {max} bytes"
            )));
        }
        all.extend_from_slice(&chunk);
    }
    Ok(all)
}
