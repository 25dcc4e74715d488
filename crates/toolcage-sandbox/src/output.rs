//! Capped capture of a child's output stream: keep the first `cap` bytes,
//! count the rest, never grow past the cap.

/// One captured stream.
#[derive(Debug)]
pub struct CappedBuffer {
    kept: Vec<u8>,
    cap: usize,
    total: u64,
}

impl CappedBuffer {
    pub fn new(cap: usize) -> Self {
        CappedBuffer {
            kept: Vec::with_capacity(cap.min(8192)),
            cap,
            total: 0,
        }
    }

    /// Account for `chunk`; keep what still fits under the cap.
    pub fn push(&mut self, chunk: &[u8]) {
        self.total += chunk.len() as u64;
        let room = self.cap.saturating_sub(self.kept.len());
        self.kept.extend_from_slice(&chunk[..chunk.len().min(room)]);
    }

    /// Finish the stream: text cut on a UTF-8 boundary, and the number of
    /// bytes omitted (everything after the cut).
    pub fn finish(self) -> Captured {
        let truncated = self.total > self.kept.len() as u64;
        let mut kept = self.kept;
        if truncated {
            // Do not split a multi-byte character at the cap: drop a trailing
            // partial sequence so the omitted count includes it.
            let cut = utf8_boundary(&kept);
            kept.truncate(cut);
        }
        let omitted = self.total - kept.len() as u64;
        Captured {
            text: String::from_utf8_lossy(&kept).into_owned(),
            bytes_kept: kept.len() as u64,
            bytes_omitted: omitted,
        }
    }
}

/// The longest prefix of `bytes` that does not end inside a UTF-8 sequence.
fn utf8_boundary(bytes: &[u8]) -> usize {
    let len = bytes.len();
    // A UTF-8 sequence is at most 4 bytes: look back at most 3 bytes for its lead byte.
    for back in 1..=len.min(4) {
        let b = bytes[len - back];
        if b & 0b1100_0000 == 0b1000_0000 {
            continue; // continuation byte
        }
        let need = if b < 0x80 {
            1
        } else if b >> 5 == 0b110 {
            2
        } else if b >> 4 == 0b1110 {
            3
        } else if b >> 3 == 0b11110 {
            4
        } else {
            return len; // invalid lead byte: not ours to fix
        };
        return if need > back { len - back } else { len };
    }
    len
}

/// A finished stream as reported in an [`super::Outcome`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Captured {
    pub text: String,
    pub bytes_kept: u64,
    pub bytes_omitted: u64,
}

impl Captured {
    /// The text with the truncation marker appended when bytes were omitted.
    pub fn with_marker(&self) -> String {
        if self.bytes_omitted == 0 {
            return self.text.clone();
        }
        let sep = if self.text.ends_with('\n') || self.text.is_empty() {
            ""
        } else {
            "\n"
        };
        format!(
            "{}{sep}{}\n",
            self.text,
            truncation_marker(self.bytes_omitted)
        )
    }
}

/// Copy `from` to toolcage's stderr as it comes, until EOF; the last
/// `keep` bytes, as text.
pub(crate) fn tee_to_stderr(
    from: std::os::fd::OwnedFd,
    keep: usize,
) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        let mut file = std::fs::File::from(from);
        let mut tail: Vec<u8> = Vec::new();
        let mut buf = [0u8; 8192];
        let mut err = std::io::stderr();
        loop {
            match file.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    let _ = err.write_all(&buf[..n]);
                    tail.extend_from_slice(&buf[..n]);
                    if tail.len() > keep {
                        tail.drain(..tail.len() - keep);
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
        }
        String::from_utf8_lossy(&tail).into_owned()
    })
}

pub fn truncation_marker(omitted: u64) -> String {
    format!("[OUTPUT TRUNCATED: {omitted} bytes omitted]")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_everything_under_the_cap() {
        let mut b = CappedBuffer::new(10);
        b.push(b"hello");
        let c = b.finish();
        assert_eq!(c.text, "hello");
        assert_eq!(c.bytes_omitted, 0);
        assert_eq!(c.with_marker(), "hello");
    }

    #[test]
    fn counts_what_it_drops() {
        let mut b = CappedBuffer::new(4);
        b.push(b"abcdef");
        b.push(b"ghij");
        let c = b.finish();
        assert_eq!(c.text, "abcd");
        assert_eq!(c.bytes_omitted, 6);
        assert_eq!(
            c.with_marker(),
            "abcd\n[OUTPUT TRUNCATED: 6 bytes omitted]\n"
        );
    }

    #[test]
    fn exact_cap_is_not_truncated() {
        let mut b = CappedBuffer::new(3);
        b.push(b"abc");
        assert_eq!(b.finish().bytes_omitted, 0);
    }

    #[test]
    fn cuts_on_a_utf8_boundary() {
        // "é" is two bytes; a cap of 2 after "a" would split it.
        let mut b = CappedBuffer::new(2);
        b.push("aé!".as_bytes());
        let c = b.finish();
        assert_eq!(c.text, "a");
        assert_eq!(c.bytes_omitted, 3);
        // Four-byte emoji split at every position.
        for cap in 1..4 {
            let mut b = CappedBuffer::new(cap);
            b.push("🦀x".as_bytes());
            let c = b.finish();
            assert_eq!(c.text, "");
            assert_eq!(c.bytes_omitted, 5);
        }
        let mut b = CappedBuffer::new(4);
        b.push("🦀x".as_bytes());
        assert_eq!(b.finish().text, "🦀");
    }
}
