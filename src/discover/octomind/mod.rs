//! Octomind local tools: `.agents/tools/<name>`, an executable with a
//! leading comment header (seed: octomind-local-tools.md).
//!
//! Header rules: line 1 may be a `#!` shebang (skipped); comment prefixes
//! `#`, `//`, `--`; parsing stops at the first non-comment, non-blank line
//! or after 80 lines (the shebang counts). `@description`/`@desc` is
//! required; `@param [*]NAME TYPE DESC...` declares a parameter (`*` =
//! required); continuation lines (no leading `@`) append to the previous
//! tag, joined by single spaces. Unknown tags are ignored (and so are their
//! continuation lines).
//!
//! Decisions where the seed is silent:
//! - An empty comment line or a blank line ends a tag's continuation, so a
//!   `# Usage: ...` paragraph after the header does not leak into the
//!   description; the header itself goes on.
//! - Tag names are matched case-insensitively (`@Description` works).
//! - A second `@description` is a warning; the first one wins.
//! - `@param` without a type: type `string` with a warning. Without a name,
//!   or a duplicate name: the tool is skipped (Error).
//! - Hidden files (`.gitkeep`, editor swap files) are reported as Warnings,
//!   not Errors, so a `.gitkeep` does not make `check` fail.

use super::fsread::{self, io_message};
use super::schema::{self, Param};
use super::{Diagnostic, Found, ToolKind, ToolSpec, valid_env_name, valid_tool_name};
use crate::policy::Requests;
use crate::spec::Format;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Lines examined for the header, shebang included.
pub(crate) const MAX_HEADER_LINES: usize = 80;
/// Bytes read from each script: 80 lines of header fit easily.
const READ_CAP: usize = 64 * 1024;

/// A parsed header.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Header {
    pub description: String,
    /// 1-based line of `@description`.
    pub description_line: usize,
    pub params: Vec<HeaderParam>,
}

/// One `@param`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct HeaderParam {
    pub name: String,
    /// Normalized JSON Schema type.
    pub kind: &'static str,
    pub description: String,
    pub required: bool,
    pub line: usize,
}

/// Normalize a `@param` type: the six JSON types and the aliases `str`,
/// `int`, `bool`, `list`, `obj`, case-insensitively.
pub(crate) fn normalize_type(t: &str) -> Option<&'static str> {
    Some(match t.to_ascii_lowercase().as_str() {
        "string" | "str" => "string",
        "number" => "number",
        "integer" | "int" => "integer",
        "boolean" | "bool" => "boolean",
        "array" | "list" => "array",
        "object" | "obj" => "object",
        _ => return None,
    })
}

/// Strip a comment prefix (`#`, `//`, `--`) and the whitespace after it.
fn comment_body(line: &str) -> Option<&str> {
    let t = line.trim_start();
    let rest = t
        .strip_prefix('#')
        .or_else(|| t.strip_prefix("//"))
        .or_else(|| t.strip_prefix("--"))?;
    Some(rest.trim())
}

enum Cur {
    None,
    Desc,
    Param(usize),
    Unknown,
}

/// Where header parsing stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// At this (1-based) line, which is not a comment.
    Code(usize),
    /// After [`MAX_HEADER_LINES`] lines.
    Limit,
    /// At the end of the text.
    Eof,
}

/// Parse the header of a script's text. Returns the header when the tool
/// is usable, and every diagnostic (warnings alongside a header; at least
/// one Error without). `file` is only used to label the diagnostics.
#[cfg(test)]
pub(crate) fn parse_header(text: &str, file: &Path) -> (Option<Header>, Vec<Diagnostic>) {
    let (h, d, _) = parse_lines(text, file);
    (h, d)
}

/// [`parse_header`] on raw bytes, the first bytes of a script (`truncated`:
/// the file goes on). Invalid UTF-8 inside the header, or a header that
/// does not end within the bytes read, is an Error: a header must never
/// lose a `@param` silently.
pub(crate) fn parse_header_bytes(
    bytes: &[u8],
    truncated: bool,
    file: &Path,
) -> (Option<Header>, Vec<Diagnostic>) {
    let (text, bad_at) = match std::str::from_utf8(bytes) {
        Ok(t) => (std::borrow::Cow::Borrowed(t), None),
        // A character cut by the read cap is not an error.
        Err(e) if e.error_len().is_none() && truncated => {
            (String::from_utf8_lossy(&bytes[..e.valid_up_to()]), None)
        }
        Err(e) => (String::from_utf8_lossy(bytes), Some(e.valid_up_to())),
    };
    let (header, mut diags, stop) = parse_lines(&text, file);
    if let Some(off) = bad_at {
        let bad_line = bytes[..off].iter().filter(|&&b| b == b'\n').count() + 1;
        let in_header = match stop {
            Stop::Code(l) => bad_line < l,
            Stop::Limit => bad_line <= MAX_HEADER_LINES,
            Stop::Eof => true,
        };
        if in_header {
            // Whatever else went wrong follows from the bad bytes.
            diags.clear();
            diags.push(
                Diagnostic::error(
                    file,
                    Some(bad_line),
                    "header is not valid UTF-8; tool skipped",
                )
                .fix("save the script as UTF-8"),
            );
            return (None, diags);
        }
    }
    if truncated && stop == Stop::Eof {
        diags.push(
            Diagnostic::error(
                file,
                None,
                format!(
                    "header does not end within the first {} KiB; tool skipped",
                    READ_CAP / 1024
                ),
            )
            .fix("shorten the header comment lines"),
        );
        return (None, diags);
    }
    (header, diags)
}

fn parse_lines(text: &str, file: &Path) -> (Option<Header>, Vec<Diagnostic>, Stop) {
    let mut r = Reading {
        file,
        diags: Vec::new(),
        desc: None,
        params: Vec::new(),
        fatal: false,
        cur: Cur::None,
    };
    let mut stop = Stop::Eof;
    for (i, line) in text.lines().enumerate() {
        let lno = i + 1;
        if i == MAX_HEADER_LINES {
            stop = Stop::Limit;
            break;
        }
        if i == 0 && line.starts_with("#!") {
            continue;
        }
        if line.trim().is_empty() {
            r.cur = Cur::None;
            continue;
        }
        let Some(body) = comment_body(line) else {
            stop = Stop::Code(lno);
            break;
        };
        if body.is_empty() {
            r.cur = Cur::None;
        } else if let Some(tagged) = body.strip_prefix('@') {
            r.tag(tagged, lno);
        } else {
            r.continuation(body);
        }
    }
    let (header, diags) = r.finish(stop);
    (header, diags, stop)
}

/// The header read so far, line by line.
struct Reading<'a> {
    file: &'a Path,
    diags: Vec<Diagnostic>,
    /// The description and its line.
    desc: Option<(String, usize)>,
    params: Vec<HeaderParam>,
    /// An error skips the tool.
    fatal: bool,
    /// The tag a continuation line appends to.
    cur: Cur,
}

impl Reading<'_> {
    /// `@tag rest` at line `lno`.
    fn tag(&mut self, tagged: &str, lno: usize) {
        let (tag, rest) = match tagged.find(char::is_whitespace) {
            Some(p) => (&tagged[..p], tagged[p..].trim()),
            None => (tagged, ""),
        };
        match tag.to_ascii_lowercase().as_str() {
            "description" | "desc" => self.description(rest, lno),
            "param" => self.param(rest, lno),
            _ => self.cur = Cur::Unknown,
        }
    }

    fn description(&mut self, rest: &str, lno: usize) {
        if self.desc.is_some() {
            self.diags.push(
                Diagnostic::warning(self.file, Some(lno), "second @description ignored")
                    .fix("merge the descriptions into one tag"),
            );
            self.cur = Cur::Unknown;
        } else {
            self.desc = Some((rest.split_whitespace().collect::<Vec<_>>().join(" "), lno));
            self.cur = Cur::Desc;
        }
    }

    fn param(&mut self, rest: &str, lno: usize) {
        self.cur = Cur::Unknown;
        match parse_param(rest, lno, self.file, &mut self.diags) {
            Some(p) if self.params.iter().any(|q| q.name == p.name) => {
                self.diags.push(
                    Diagnostic::error(
                        self.file,
                        Some(lno),
                        format!("duplicate @param '{}'; tool skipped", p.name),
                    )
                    .fix("declare each parameter once"),
                );
                self.fatal = true;
            }
            Some(p) => {
                self.params.push(p);
                self.cur = Cur::Param(self.params.len() - 1);
            }
            None => self.fatal = true,
        }
    }

    /// A line without a tag: its words go on the current tag's text.
    fn continuation(&mut self, body: &str) {
        let target = match self.cur {
            Cur::Desc => self.desc.as_mut().map(|d| &mut d.0),
            Cur::Param(k) => self.params.get_mut(k).map(|p| &mut p.description),
            Cur::None | Cur::Unknown => None,
        };
        if let Some(t) = target {
            for w in body.split_whitespace() {
                if !t.is_empty() {
                    t.push(' ');
                }
                t.push_str(w);
            }
        }
    }

    /// The header, once a non-empty description is there and nothing was
    /// fatal.
    fn finish(mut self, stop: Stop) -> (Option<Header>, Vec<Diagnostic>) {
        let (description, description_line) = match self.desc {
            Some((d, l)) if !d.is_empty() => (d, l),
            Some((_, l)) => {
                self.diags.push(
                    Diagnostic::error(self.file, Some(l), "@description is empty; tool skipped")
                        .fix("write what the tool does after @description"),
                );
                return (None, self.diags);
            }
            None => {
                let fix = match stop {
                    Stop::Code(l) => format!(
                        "add a comment line `# @description What the tool does` before line {l}, where the header ends"
                    ),
                    _ => "add a comment line `# @description What the tool does` near the top"
                        .to_string(),
                };
                self.diags.push(
                    Diagnostic::error(self.file, None, "missing @description; tool skipped")
                        .fix(fix),
                );
                return (None, self.diags);
            }
        };
        if self.fatal {
            return (None, self.diags);
        }
        let header = Header {
            description,
            description_line,
            params: self.params,
        };
        (Some(header), self.diags)
    }
}

fn parse_param(
    rest: &str,
    lno: usize,
    file: &Path,
    diags: &mut Vec<Diagnostic>,
) -> Option<HeaderParam> {
    let mut words = rest.split_whitespace();
    let raw = words.next().unwrap_or("");
    let (required, name) = match raw.strip_prefix('*') {
        Some(n) => (true, n),
        None => (false, raw),
    };
    if name.is_empty() {
        diags.push(
            Diagnostic::error(file, Some(lno), "@param without a name; tool skipped")
                .fix("write `@param [*]NAME TYPE DESCRIPTION`"),
        );
        return None;
    }
    if let Some(bare) = name.strip_suffix('*').filter(|b| !b.is_empty()) {
        diags.push(
            Diagnostic::error(
                file,
                Some(lno),
                format!(
                    "@param '{name}': the * that makes a parameter required goes before its \
                     name; tool skipped"
                ),
            )
            .fix(format!("write `@param *{bare} TYPE DESCRIPTION`")),
        );
        return None;
    }
    let kind = match words.next() {
        None => {
            diags.push(
                Diagnostic::warning(
                    file,
                    Some(lno),
                    format!("@param '{name}' has no type; using string"),
                )
                .fix("write `@param [*]NAME TYPE DESCRIPTION`"),
            );
            "string"
        }
        Some(t) => normalize_type(t).unwrap_or_else(|| {
            diags.push(
                Diagnostic::warning(
                    file,
                    Some(lno),
                    format!("@param '{name}': unknown type '{t}', using string"),
                )
                .fix("use string, number, integer, boolean, array or object"),
            );
            "string"
        }),
    };
    if !valid_env_name(name) {
        diags.push(
            Diagnostic::warning(
                file,
                Some(lno),
                format!(
                    "@param '{name}' is not a valid environment variable name; passed on stdin only"
                ),
            )
            .fix("use letters, digits and underscores, not starting with a digit"),
        );
    }
    Some(HeaderParam {
        name: name.to_owned(),
        kind,
        description: words.collect::<Vec<_>>().join(" "),
        required,
        line: lno,
    })
}

/// The tool for a parsed header.
pub(crate) fn to_spec(name: &str, path: &Path, header: Header) -> ToolSpec {
    let params: Vec<Param> = header
        .params
        .iter()
        .map(|p| Param::new(&p.name, p.kind, &p.description, p.required))
        .collect();
    let mut needs_read = vec![path.to_path_buf()];
    if let Ok(real) = std::fs::canonicalize(path)
        && real != path
    {
        needs_read.push(real);
    }
    ToolSpec {
        name: name.to_owned(),
        format: Format::Octomind,
        source: path.to_path_buf(),
        line: Some(header.description_line),
        description: header.description,
        input_schema: schema::object_schema(&params),
        requests: Requests::default(),
        kind: ToolKind::Octomind {
            program: path.to_path_buf(),
        },
        needs_read,
    }
}

/// Where Octomind tools live, relative to the project.
pub(crate) const DIR: &str = ".agents/tools";

/// Scan `<project>/.agents/tools`.
pub(crate) fn scan(project: &Path) -> Found {
    let mut f = Found::default();
    let Some((dir, entries)) = super::tool_dir(project, DIR, &mut f) else {
        return f;
    };
    for e in entries {
        let path = &e.path;
        let meta = match &e.meta {
            Ok(m) => m,
            Err(err) => {
                f.examined.push(path.clone());
                f.diagnostics.push(
                    Diagnostic::error(path, None, format!("cannot stat: {}", io_message(err)))
                        .fix("remove or repair the file"),
                );
                continue;
            }
        };
        if meta.is_dir() {
            continue;
        }
        f.examined.push(path.clone());
        // A link out would let one tool (or anything in the project) be
        // rewritten by another call, and would make its target a read root.
        if fsread::refuse_outside(path, &dir, ".agents/tools", &mut f.diagnostics) {
            continue;
        }
        if e.name.starts_with('.') {
            f.diagnostics.push(
                Diagnostic::warning(path, None, "hidden file ignored")
                    .fix("drop the leading '.' to make it a tool"),
            );
            continue;
        }
        if let Some((stem, _)) = e.name.split_once('.') {
            f.diagnostics.push(
                Diagnostic::error(path, None, "file name has an extension; tool skipped").fix(
                    format!("drop the extension: rename to .agents/tools/{stem}"),
                ),
            );
            continue;
        }
        if !valid_tool_name(&e.name) {
            f.diagnostics.push(
                Diagnostic::error(
                    path,
                    None,
                    "file name must match [A-Za-z0-9_-]+; tool skipped",
                )
                .fix("rename the file using letters, digits, '_' and '-'"),
            );
            continue;
        }
        if !meta.is_file() {
            f.diagnostics.push(
                Diagnostic::error(path, None, "not a regular file; tool skipped")
                    .fix("replace it with an executable script"),
            );
            continue;
        }
        if meta.permissions().mode() & 0o111 == 0 {
            f.diagnostics.push(
                Diagnostic::error(path, None, "not executable; tool skipped")
                    .fix(format!("chmod +x .agents/tools/{}", e.name)),
            );
            continue;
        }
        let bytes = match fsread::read_capped(path, READ_CAP) {
            Ok(b) => b,
            Err(err) => {
                f.diagnostics.push(
                    Diagnostic::error(path, None, format!("cannot read: {}", io_message(&err)))
                        .fix("make the file readable"),
                );
                continue;
            }
        };
        let (header, mut diags) = parse_header_bytes(&bytes.data, bytes.truncated, path);
        f.diagnostics.append(&mut diags);
        if let Some(h) = header {
            f.tools.push(to_spec(&e.name, path, h));
        }
    }
    f
}
