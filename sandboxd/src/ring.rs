//! A byte ring that keeps the most recent bytes of a stream: the tail of a command's
//! stdout or stderr (`Run`) and the output buffer of a background process (`Start`).
//!
//! Memory is bounded by the capacity whatever the stream's length: a child writing
//! hundreds of megabytes costs the agent its capacity, no more.

use std::collections::VecDeque;

/// The most recent `capacity` bytes of a stream, with the count of everything written.
#[derive(Debug)]
pub struct Ring {
    bytes: VecDeque<u8>,
    capacity: usize,
    total: u64,
}

/// A read from a [`Ring`].
#[derive(Debug, PartialEq, Eq)]
pub struct Slice {
    /// The stream offset of `data`'s first byte.
    pub offset: u64,
    /// The bytes.
    pub data: Vec<u8>,
    /// Bytes between the asked offset and `offset` that are no longer kept.
    pub dropped: u64,
}

impl Ring {
    /// An empty ring keeping at most `capacity` bytes; memory is taken as bytes arrive.
    pub fn new(capacity: usize) -> Self {
        Self {
            bytes: VecDeque::new(),
            capacity,
            total: 0,
        }
    }

    /// Appends `data`, forgetting the oldest bytes past the capacity.
    pub fn push(&mut self, data: &[u8]) {
        self.total = self.total.saturating_add(data.len() as u64);
        let data = &data[data.len().saturating_sub(self.capacity)..];
        let excess = (self.bytes.len() + data.len()).saturating_sub(self.capacity);
        self.bytes.drain(..excess.min(self.bytes.len()));
        let needed = self.bytes.len() + data.len();
        if needed > self.bytes.capacity() {
            // Doubling as a Vec would, but never past the ring's own capacity.
            let target = needed
                .max(self.bytes.capacity().saturating_mul(2))
                .min(self.capacity);
            self.bytes.reserve_exact(target - self.bytes.len());
        }
        self.bytes.extend(data);
    }

    /// Bytes written so far: the offset after the last one.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Bytes no longer kept: the offset of the first kept byte.
    pub fn dropped(&self) -> u64 {
        self.total - self.bytes.len() as u64
    }

    /// More was written than is kept.
    pub fn truncated(&self) -> bool {
        self.dropped() > 0
    }

    /// Up to `max` bytes from `offset`; from the first kept byte when `offset` is older,
    /// and nothing (at the end) when it is past the end.
    pub fn read(&self, offset: u64, max: usize) -> Slice {
        let first = self.dropped();
        let (start, dropped) = if offset < first {
            (first, first - offset)
        } else {
            (offset.min(self.total), 0)
        };
        // `start - first` is at most the number of kept bytes, which is a usize.
        let skip = usize::try_from(start - first).unwrap_or(self.bytes.len());
        let len = (self.bytes.len() - skip).min(max);
        Slice {
            offset: start,
            data: self.copy_range(skip, len),
            dropped,
        }
    }

    /// Every kept byte, oldest first.
    pub fn to_vec(&self) -> Vec<u8> {
        self.copy_range(0, self.bytes.len())
    }

    fn copy_range(&self, skip: usize, len: usize) -> Vec<u8> {
        let (front, back) = self.bytes.as_slices();
        let mut out = Vec::with_capacity(len);
        if skip < front.len() {
            let take = len.min(front.len() - skip);
            out.extend_from_slice(&front[skip..skip + take]);
            out.extend_from_slice(&back[..len - take]);
        } else {
            let from = skip - front.len();
            out.extend_from_slice(&back[from..from + len]);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_everything_under_capacity() {
        let mut ring = Ring::new(10);
        ring.push(b"hello");
        ring.push(b"");
        ring.push(b" you");
        assert_eq!(ring.to_vec(), b"hello you");
        assert_eq!(ring.total(), 9);
        assert_eq!(ring.dropped(), 0);
        assert!(!ring.truncated());
    }

    #[test]
    fn keeps_the_tail_past_capacity() {
        let mut ring = Ring::new(4);
        ring.push(b"abc");
        ring.push(b"def");
        assert_eq!(ring.to_vec(), b"cdef");
        assert_eq!((ring.total(), ring.dropped()), (6, 2));
        assert!(ring.truncated());
        // One push larger than the whole ring.
        ring.push(b"0123456789");
        assert_eq!(ring.to_vec(), b"6789");
        assert_eq!((ring.total(), ring.dropped()), (16, 12));
    }

    #[test]
    fn zero_capacity_counts_but_keeps_nothing() {
        let mut ring = Ring::new(0);
        ring.push(b"abc");
        assert_eq!(ring.to_vec(), b"");
        assert_eq!(ring.total(), 3);
        assert!(ring.truncated());
    }

    #[test]
    fn memory_stays_within_capacity() {
        let mut ring = Ring::new(1000);
        for _ in 0..10_000 {
            ring.push(&[7; 333]);
        }
        assert_eq!(ring.to_vec().len(), 1000);
        assert!(ring.bytes.capacity() <= 1000, "{}", ring.bytes.capacity());
        assert_eq!(ring.total(), 3_330_000);
    }

    #[test]
    fn reads_by_offset() {
        let mut ring = Ring::new(5);
        ring.push(b"0123456789"); // keeps 56789, dropped 5
        let read = |offset, max| ring.read(offset, max);
        assert_eq!(
            read(0, 100),
            Slice {
                offset: 5,
                data: b"56789".to_vec(),
                dropped: 5
            }
        );
        assert_eq!(read(6, 2).data, b"67");
        assert_eq!(read(6, 2).offset, 6);
        assert_eq!(read(10, 100).data, b"");
        assert_eq!(read(10, 100).offset, 10);
        // Past the end: at the end, nothing.
        let past = read(99, 100);
        assert_eq!((past.offset, past.data.len(), past.dropped), (10, 0, 0));
        assert_eq!(read(3, 1).data, b"5");
        assert_eq!(read(3, 1).dropped, 2);
        assert_eq!(read(7, 0).data, b"");
    }

    #[test]
    fn reads_across_the_wrap() {
        let mut ring = Ring::new(6);
        for piece in [&b"abcd"[..], b"efgh", b"ij"] {
            ring.push(piece);
        }
        // Kept: efghij (offsets 4..10), likely split in two slices inside.
        assert_eq!(ring.to_vec(), b"efghij");
        for offset in 4..=10 {
            for max in 0..8 {
                let got = ring.read(offset, max);
                let want: Vec<u8> = b"abcdefghij"[offset as usize..]
                    .iter()
                    .copied()
                    .take(max)
                    .collect();
                assert_eq!(got.data, want, "offset {offset} max {max}");
            }
        }
    }
}
