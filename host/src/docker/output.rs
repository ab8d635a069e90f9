//! Bounded capture of an exec's output: the tail of each stream, and the wrapper's pid
//! line at the head of stderr.

use std::collections::VecDeque;

/// Keeps the last `max` bytes written to it, and whether anything was dropped. Memory is
/// bounded by `max` whatever the command prints.
#[derive(Debug)]
pub(crate) struct Tail {
    buf: VecDeque<u8>,
    max: usize,
    truncated: bool,
}

impl Tail {
    pub(crate) fn new(max: usize) -> Self {
        Tail {
            buf: VecDeque::with_capacity(max.min(64 * 1024)),
            max,
            truncated: false,
        }
    }

    pub(crate) fn push(&mut self, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        if data.len() >= self.max {
            self.truncated |= !self.buf.is_empty() || data.len() > self.max;
            self.buf.clear();
            self.buf.extend(&data[data.len() - self.max..]);
            return;
        }
        let overflow = (self.buf.len() + data.len()).saturating_sub(self.max);
        if overflow > 0 {
            self.truncated = true;
            self.buf.drain(..overflow);
        }
        self.buf.extend(data);
    }

    /// The kept bytes and the truncation flag.
    pub(crate) fn finish(self) -> (Vec<u8>, bool) {
        (self.buf.into(), self.truncated)
    }
}

/// Longest first line of stderr that can be the wrapper's pid line.
const PID_LINE_MAX: usize = 32;

/// Stderr capture that first takes the wrapper's `<pid>\n` line off the stream.
#[derive(Debug)]
pub(crate) struct Stderr {
    head: Option<Vec<u8>>,
    tail: Tail,
}

impl Stderr {
    pub(crate) fn new(max: usize) -> Self {
        Stderr {
            head: Some(Vec::new()),
            tail: Tail::new(max),
        }
    }

    /// Takes a stderr chunk; returns the pid when this chunk completes the pid line.
    pub(crate) fn push(&mut self, data: &[u8]) -> Option<i64> {
        let Some(head) = self.head.as_mut() else {
            self.tail.push(data);
            return None;
        };
        head.extend_from_slice(data);
        if let Some(nl) = head.iter().position(|b| *b == b'\n') {
            let rest = head.split_off(nl + 1);
            let line = std::mem::take(head);
            self.head = None;
            let pid = std::str::from_utf8(&line[..nl])
                .ok()
                .and_then(|s| s.trim().parse::<i64>().ok());
            match pid {
                Some(pid) if pid > 1 => {
                    self.tail.push(&rest);
                    Some(pid)
                }
                _ => {
                    // Not the wrapper's line (the wrapper itself failed): ordinary output.
                    self.tail.push(&line);
                    self.tail.push(&rest);
                    None
                }
            }
        } else {
            if head.len() > PID_LINE_MAX {
                let line = std::mem::take(head);
                self.head = None;
                self.tail.push(&line);
            }
            None
        }
    }

    pub(crate) fn finish(mut self) -> (Vec<u8>, bool) {
        if let Some(head) = self.head.take() {
            self.tail.push(&head);
        }
        self.tail.finish()
    }
}

/// A finished command's answer: the kept tails of its output, and no exit code when it
/// timed out (it was killed).
pub(crate) fn exec_output(
    (stdout, stdout_truncated): (Vec<u8>, bool),
    (stderr, stderr_truncated): (Vec<u8>, bool),
    exit_code: Option<i32>,
    timed_out: bool,
    begun: std::time::Instant,
) -> super::types::ExecOutput {
    super::types::ExecOutput {
        exit_code: exit_code.filter(|_| !timed_out),
        stdout,
        stderr,
        stdout_truncated,
        stderr_truncated,
        timed_out,
        duration_ms: u64::try_from(begun.elapsed().as_millis()).unwrap_or(u64::MAX),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_keeps_the_end() {
        let mut t = Tail::new(5);
        t.push(b"abc");
        t.push(b"defg");
        assert_eq!(t.finish(), (b"cdefg".to_vec(), true));
        let mut t = Tail::new(5);
        t.push(b"abcde");
        assert_eq!(t.finish(), (b"abcde".to_vec(), false));
        let mut t = Tail::new(3);
        t.push(b"0123456789");
        assert_eq!(t.finish(), (b"789".to_vec(), true));
        let mut t = Tail::new(0);
        t.push(b"x");
        assert_eq!(t.finish(), (Vec::new(), true));
    }

    #[test]
    fn stderr_strips_the_pid_line() {
        let mut s = Stderr::new(100);
        assert_eq!(s.push(b"12"), None);
        assert_eq!(s.push(b"34\noops"), Some(1234));
        s.push(b"!\n");
        assert_eq!(s.finish(), (b"oops!\n".to_vec(), false));

        let mut s = Stderr::new(100);
        assert_eq!(s.push(b"sh: setsid: not found\n"), None);
        assert_eq!(s.finish().0, b"sh: setsid: not found\n".to_vec());
    }
}
