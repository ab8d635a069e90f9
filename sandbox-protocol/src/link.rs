//! The engine link: the agent reached through the container engine instead of its socket,
//! where the host cannot reach the socket (an engine on another machine; gVisor without
//! host sockets). The host runs `wharf-sandboxd --link` as one long exec per sandbox and
//! speaks yamux over the exec's standard input and output (a well-kept multiplexer, the
//! one libp2p uses). Each yamux stream the host opens is one connection to the agent's
//! socket, after the host's [`LINK_OPENING`] byte and the link's [`LinkStatus`] byte; the bytes on it are this crate's
//! protocol, unchanged.

pub use yamux;

/// Streams open at once on one link: the agent's [`MAX_CONNECTIONS`](crate::MAX_CONNECTIONS)
/// and the host's waiting ones.
pub const MAX_LINK_STREAMS: usize = 256;
/// The receive window of a whole link, each way: what one side may have to hold of what
/// the other sent and it has not read yet (yamux's minimum for [`MAX_LINK_STREAMS`]:
/// 256 KiB a stream).
pub const LINK_WINDOW_BYTES: usize = MAX_LINK_STREAMS * 256 * 1024;

// Checked when the crate compiles: every connection the agent serves fits on a link.
const _: () = assert!(MAX_LINK_STREAMS >= crate::MAX_CONNECTIONS);

/// The yamux configuration both ends of a link use.
pub fn link_config() -> yamux::Config {
    let mut config = yamux::Config::default();
    // The number first: yamux checks the window against it on each call.
    config.set_max_num_streams(MAX_LINK_STREAMS);
    config.set_max_connection_receive_window(Some(LINK_WINDOW_BYTES));
    config
}

/// The first byte the host writes on each stream (a yamux stream reaches the other side
/// with its first bytes), before the link answers with a [`LinkStatus`].
pub const LINK_OPENING: u8 = 0x57;

/// The first byte the link writes on each stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum LinkStatus {
    /// The stream is now a connection to the agent.
    Connected = 0,
    /// Nothing listens on the agent's socket (not up yet, or gone).
    NotListening = 1,
    /// The socket is held by a process other than the container's PID 1.
    Impostor = 2,
}

impl LinkStatus {
    /// The status a byte names, if any.
    pub fn from_byte(byte: u8) -> Option<Self> {
        match byte {
            0 => Some(LinkStatus::Connected),
            1 => Some(LinkStatus::NotListening),
            2 => Some(LinkStatus::Impostor),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_round_trip_and_the_config_holds() {
        for status in [
            LinkStatus::Connected,
            LinkStatus::NotListening,
            LinkStatus::Impostor,
        ] {
            assert_eq!(LinkStatus::from_byte(status as u8), Some(status));
        }
        assert_eq!(LinkStatus::from_byte(3), None);
        // yamux asserts its own invariants when configured: this must not panic.
        let _ = link_config();
    }
}
