//! Frames a resident shell prints into a command's output streams: `<nonce><fields>;`.
//! The nonce is fresh for every command (32 random hex digits), so a command cannot print
//! one unless it reads the shell's own input. The scanner takes frames out of the stream
//! and passes every other byte on, holding back only what may be the start of a frame.

/// Longest field text a frame may carry; a longer run after the nonce is not a frame.
const MAX_FIELDS: usize = 64;

/// Splits one output stream into command output and frames.
#[derive(Debug)]
pub(crate) struct FrameScanner {
    nonce: Vec<u8>,
    pending: Vec<u8>,
}

impl FrameScanner {
    pub(crate) fn new(nonce: &str) -> Self {
        FrameScanner {
            nonce: nonce.as_bytes().to_vec(),
            pending: Vec::new(),
        }
    }

    /// Appends a chunk of the stream.
    pub(crate) fn feed(&mut self, data: &[u8]) {
        self.pending.extend_from_slice(data);
    }

    /// Passes the output before the next complete frame to `sink` and returns the frame's
    /// fields (the text between the nonce and `;`). With no complete frame left, passes on
    /// everything that cannot be part of one and returns `None`.
    pub(crate) fn next_frame(&mut self, sink: &mut impl FnMut(&[u8])) -> Option<String> {
        let mut from = 0;
        loop {
            let Some(at) = find(&self.pending[from..], &self.nonce).map(|i| from + i) else {
                let keep = partial_suffix(&self.pending[from..], &self.nonce);
                let cut = self.pending.len() - keep;
                sink(&self.pending[..cut]);
                self.pending.drain(..cut);
                return None;
            };
            let after = at + self.nonce.len();
            let rest = &self.pending[after..];
            match rest.iter().take(MAX_FIELDS + 1).position(|b| *b == b';') {
                Some(len) => {
                    sink(&self.pending[..at]);
                    let fields = String::from_utf8_lossy(&rest[..len]).into_owned();
                    self.pending.drain(..after + len + 1);
                    return Some(fields);
                }
                // Too long to be a frame: ordinary output, look further on.
                None if rest.len() > MAX_FIELDS => from = after,
                None => {
                    sink(&self.pending[..at]);
                    self.pending.drain(..at);
                    return None;
                }
            }
        }
    }

    /// Whether bytes are held back (output after the last frame, or a partial frame).
    pub(crate) fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// The stream ended: whatever was held back is output.
    pub(crate) fn finish(&mut self, sink: &mut impl FnMut(&[u8])) {
        sink(&self.pending);
        self.pending.clear();
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || haystack.len() < needle.len() {
        return None;
    }
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The length of the longest proper prefix of `needle` that `haystack` ends with.
fn partial_suffix(haystack: &[u8], needle: &[u8]) -> usize {
    (1..needle.len())
        .rev()
        .find(|k| haystack.ends_with(&needle[..*k]))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(s: &mut FrameScanner, out: &mut Vec<u8>) -> Vec<String> {
        let mut frames = Vec::new();
        while let Some(f) = s.next_frame(&mut |b: &[u8]| out.extend_from_slice(b)) {
            frames.push(f);
        }
        frames
    }

    #[test]
    fn frames_are_taken_out_of_the_output() {
        let mut s = FrameScanner::new("NONCE");
        let mut out = Vec::new();
        s.feed(b"hello\nNONCE:pid:42;world");
        assert_eq!(drain(&mut s, &mut out), [":pid:42"]);
        s.feed(b"!NONCE:end:0:0;");
        assert_eq!(drain(&mut s, &mut out), [":end:0:0"]);
        assert_eq!(out, b"hello\nworld!");
        assert!(!s.has_pending());
    }

    #[test]
    fn frames_split_across_chunks_are_found() {
        let mut s = FrameScanner::new("NONCE");
        let mut out = Vec::new();
        for chunk in [&b"abcNO"[..], b"N", b"CE:e", b"nd"] {
            s.feed(chunk);
            assert!(drain(&mut s, &mut out).is_empty());
        }
        s.feed(b";tail");
        let frame = s.next_frame(&mut |b: &[u8]| out.extend_from_slice(b));
        assert_eq!(frame.as_deref(), Some(":end"));
        assert_eq!(out, b"abc");
        // What follows the frame stays held until asked for.
        assert!(s.has_pending());
        s.finish(&mut |b: &[u8]| out.extend_from_slice(b));
        assert_eq!(out, b"abctail");
    }

    #[test]
    fn output_that_only_looks_like_a_frame_passes() {
        let mut s = FrameScanner::new("NONCE");
        let mut out = Vec::new();
        let long = format!("NONCE{};", "x".repeat(MAX_FIELDS + 1));
        s.feed(long.as_bytes());
        assert!(drain(&mut s, &mut out).is_empty());
        s.feed(b"NON");
        assert!(drain(&mut s, &mut out).is_empty());
        s.finish(&mut |b: &[u8]| out.extend_from_slice(b));
        assert_eq!(out, format!("{long}NON").as_bytes());
    }
}
