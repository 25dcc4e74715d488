//! Reading the log back: every whole line that parses is a record; a line
//! that does not is reported with its number and skipped, never fatal.

use super::record::AuditRecord;
use std::path::Path;

/// A line that is not a record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadLine {
    /// 1-based.
    pub line: usize,
    /// The last line, without its newline: a write cut short (a crash).
    pub torn: bool,
    pub error: String,
}

/// The parsed log.
#[derive(Debug, Default)]
pub struct Parsed {
    /// (1-based line, record), in file order.
    pub records: Vec<(usize, AuditRecord)>,
    pub bad: Vec<BadLine>,
}

/// Parse the bytes of a log.
pub(crate) fn parse(bytes: &[u8]) -> Parsed {
    let mut out = Parsed::default();
    let ends_clean = bytes.is_empty() || bytes.ends_with(b"\n");
    let lines: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
    // `split` yields an empty last piece after a final newline.
    let count = if ends_clean {
        lines.len().saturating_sub(1)
    } else {
        lines.len()
    };
    for (i, raw) in lines.iter().take(count).enumerate() {
        let n = i + 1;
        if raw.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<AuditRecord>(raw) {
            Ok(r) => out.records.push((n, r)),
            Err(e) => out.bad.push(BadLine {
                line: n,
                torn: !ends_clean && n == count,
                error: e.to_string(),
            }),
        }
    }
    out
}

/// Read and parse the log at `path`; `Ok(None)` when there is none yet.
pub fn read(path: &Path) -> Result<Option<Parsed>, String> {
    match std::fs::read(path) {
        Ok(b) => Ok(Some(parse(&b))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("cannot read audit log {}: {e}", path.display())),
    }
}
