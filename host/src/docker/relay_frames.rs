//! The frames of a relay request (`Connect`, `EgressWait`, `EgressHandOver`) and of the
//! agent's `Connected` answer, read frame-exact so that no relayed byte is taken with
//! them: shared by the relayed and the handed-over egress paths.

use wharf_sandbox_protocol::{MAX_FRAME_BYTES, Reply, Request, decode, encode};

use super::agent_stream::AgentFailure;

/// `request` as one frame: its length, then its payload.
pub(super) fn request_frame(request: &Request) -> Result<Vec<u8>, AgentFailure> {
    let request = encode(request);
    let len = u32::try_from(request.len())
        .map_err(|_| AgentFailure::Broken("request too large".into()))?;
    let mut frame = len.to_be_bytes().to_vec();
    frame.extend_from_slice(&request);
    Ok(frame)
}

/// The length a reply frame's prefix announces, within the protocol's frame limit.
pub(super) fn reply_length(prefix: [u8; 4]) -> Result<usize, AgentFailure> {
    let len = usize::try_from(u32::from_be_bytes(prefix)).unwrap_or(usize::MAX);
    if len > MAX_FRAME_BYTES {
        return Err(AgentFailure::Broken(format!("a frame of {len} bytes")));
    }
    Ok(len)
}

/// The agent's answer to a relay request: `Connected`, or why not.
pub(super) fn connected(payload: &[u8]) -> Result<(), AgentFailure> {
    match decode::<Reply>(payload).map_err(|e| AgentFailure::Broken(e.to_string()))? {
        Reply::Connected => Ok(()),
        Reply::Error(e) => Err(AgentFailure::Refused(e)),
        _ => Err(AgentFailure::Broken(
            "the agent answered a relay out of turn".into(),
        )),
    }
}
