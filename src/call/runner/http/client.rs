//! The answer to one HTTP/1.1 request (sent with `Connection: close`) on
//! a connection the domain policy allowed (plain TCP or TLS): the response
//! head and its body (Content-Length, chunked, or until the
//! server closes), the body capped like a tool's stdout and the rest only
//! counted. Every read waits in short slices so the deadline and a
//! cancellation are noticed.

use crate::sandbox::output::CappedBuffer;
use crate::sandbox::{CancelToken, Captured};
use std::io::{ErrorKind, Read};
use std::time::{Duration, Instant};

/// The response head may be this large.
const MAX_HEAD: usize = 64 * 1024;

#[derive(Debug)]
pub(crate) struct Response {
    pub(crate) status: u16,
    pub(crate) reason: String,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Captured,
}

impl Response {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Why an exchange did not complete.
#[derive(Debug)]
pub(crate) enum Failure {
    Timeout,
    Cancelled,
    Other(String),
}

/// Reads that give up at the deadline or on cancellation.
pub(crate) struct Limited<'a, S> {
    pub(crate) inner: S,
    pub(crate) deadline: Instant,
    pub(crate) cancel: Option<&'a CancelToken>,
}

impl<S: Read> Limited<'_, S> {
    fn read_some(&mut self, buf: &mut [u8]) -> Result<usize, Failure> {
        loop {
            if self.cancel.is_some_and(|c| c.is_cancelled()) {
                return Err(Failure::Cancelled);
            }
            if Instant::now() >= self.deadline {
                return Err(Failure::Timeout);
            }
            match self.inner.read(buf) {
                Ok(n) => return Ok(n),
                Err(e)
                    if matches!(
                        e.kind(),
                        ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                    ) => {}
                Err(e) => return Err(Failure::Other(e.to_string())),
            }
        }
    }
}

/// A buffered reader over [`Limited`] for lines and exact lengths.
struct Reader<'a, S> {
    src: Limited<'a, S>,
    buf: Vec<u8>,
    pos: usize,
}

impl<S: Read> Reader<'_, S> {
    fn fill(&mut self) -> Result<bool, Failure> {
        if self.pos < self.buf.len() {
            return Ok(true);
        }
        self.buf.resize(16 * 1024, 0);
        let n = self.src.read_some(&mut self.buf)?;
        self.buf.truncate(n);
        self.pos = 0;
        Ok(n > 0)
    }

    fn line(&mut self, max: usize) -> Result<String, Failure> {
        let mut line = Vec::new();
        loop {
            if !self.fill()? {
                return Err(Failure::Other("the server closed the connection".into()));
            }
            let avail = &self.buf[self.pos..];
            if let Some(i) = avail.iter().position(|b| *b == b'\n') {
                line.extend_from_slice(&avail[..i]);
                self.pos += i + 1;
                break;
            }
            line.extend_from_slice(avail);
            self.pos = self.buf.len();
            if line.len() > max {
                return Err(Failure::Other("response head too large".into()));
            }
        }
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        Ok(String::from_utf8_lossy(&line).into_owned())
    }

    /// Copy up to `n` bytes (all until EOF when `None`) into `sink`.
    fn copy(&mut self, n: Option<u64>, sink: &mut CappedBuffer) -> Result<(), Failure> {
        let mut left = n;
        while left != Some(0) {
            if !self.fill()? {
                return match left {
                    None => Ok(()),
                    Some(_) => Err(Failure::Other("the body ended early".into())),
                };
            }
            let avail = &self.buf[self.pos..];
            let take = left.map_or(avail.len(), |l| l.min(avail.len() as u64) as usize);
            sink.push(&avail[..take]);
            self.pos += take;
            left = left.map(|l| l - take as u64);
        }
        Ok(())
    }
}

/// Read the response to a request already sent on `stream`.
pub(crate) fn exchange<S: Read>(
    stream: Limited<'_, S>,
    head_only: bool,
    cap: usize,
) -> Result<Response, Failure> {
    let mut r = Reader {
        src: stream,
        buf: Vec::new(),
        pos: 0,
    };
    let (status, reason, headers) = loop {
        let status_line = r.line(MAX_HEAD)?;
        let mut parts = status_line.splitn(3, ' ');
        let version = parts.next().unwrap_or_default();
        let status = parts.next().and_then(|s| s.parse::<u16>().ok());
        let (true, Some(status)) = (version.starts_with("HTTP/1."), status) else {
            return Err(Failure::Other(format!(
                "not an HTTP/1 response: {:?}",
                status_line.chars().take(60).collect::<String>()
            )));
        };
        let reason = parts.next().unwrap_or_default().to_string();
        let mut headers = Vec::new();
        let mut size = 0;
        loop {
            let l = r.line(MAX_HEAD)?;
            size += l.len();
            if size > MAX_HEAD {
                return Err(Failure::Other("response head too large".into()));
            }
            if l.is_empty() {
                break;
            }
            if let Some((n, v)) = l.split_once(':') {
                headers.push((n.trim().to_string(), v.trim().to_string()));
            }
        }
        if (100..200).contains(&status) {
            continue; // 100 Continue and friends: the real answer follows
        }
        break (status, reason, headers);
    };
    let mut body = CappedBuffer::new(cap);
    let response = |body: CappedBuffer| Response {
        status,
        reason: reason.clone(),
        headers: headers.clone(),
        body: body.finish(),
    };
    let get = |n: &str| {
        headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(n))
            .map(|(_, v)| v.to_ascii_lowercase())
    };
    if head_only || status == 204 || status == 304 {
        return Ok(response(body));
    }
    if get("transfer-encoding").is_some_and(|te| te.contains("chunked")) {
        loop {
            let line = r.line(1024)?;
            let size = line.split(';').next().unwrap_or_default().trim();
            let size = u64::from_str_radix(size, 16)
                .map_err(|_| Failure::Other(format!("bad chunk size {size:?}")))?;
            if size == 0 {
                while !r.line(MAX_HEAD)?.is_empty() {} // trailers
                break;
            }
            r.copy(Some(size), &mut body)?;
            r.line(2)?;
        }
    } else if let Some(len) = get("content-length") {
        let len = len
            .parse::<u64>()
            .map_err(|_| Failure::Other(format!("bad Content-Length {len:?}")))?;
        r.copy(Some(len), &mut body)?;
    } else {
        r.copy(None, &mut body)?;
    }
    Ok(response(body))
}

/// How long each blocking read may wait before the deadline and the
/// cancel token are checked again.
pub(crate) const SLICE: Duration = Duration::from_millis(200);
