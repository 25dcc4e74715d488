//! The policy file format (TOML) and its parser.
//!
//! Every key is optional; a layer only changes what it names. Layers are
//! applied in order: the `default` profile, `--profile NAME`, `--policy FILE`,
//! CLI flags (later wins). Unknown keys are errors, reported as
//! `policy FILE:LINE: KEY: MESSAGE`.
//!
//! ```toml
//! [fs]
//! read = ["/usr", "/bin"]      # read + execute roots (replaces earlier layers)
//! write = ["{project}"]        # full-access roots (replaces)
//! protected = ["{project}/.git"] # read-only even inside a write root (replaces)
//! denied = []                  # no access even inside a root (replaces)
//! add_read = [] ; add_write = [] ; add_protected = [] ; add_denied = []  # append
//! private_tmp = true           # a private, empty TMPDIR per call
//!
//! [network]
//! mode = "off"                 # off | on | tcp
//! connect = [443]              # TCP ports, mode "tcp" only (1-65535)
//! bind = []                    # TCP ports, mode "tcp" only
//!
//! [env]
//! allow = ["PATH", "LC_*"]     # names or PREFIX* patterns passed through (replaces)
//! add_allow = []               # append
//! set = { FOO = "bar" }        # explicit values; merged key by key, they win
//!
//! [limits]                     # durations: "30s" "500ms" "5m" "1h" or seconds
//! timeout = "30s"              # sizes: "64KiB" "4GiB" "1MB" or bytes
//! kill_grace = "500ms"
//! address_space = "8GiB"       # rlimits accept "unlimited" (inherit)
//! cpu = "300s"
//! processes = 512
//! file_size = "4GiB"
//! open_files = 1024
//! stdout = "64KiB"             # output caps
//! stderr = "16KiB"
//!
//! [sandbox]
//! enforcement = "standard"     # standard | strict | degraded
//!
//! [requests]                   # what a tool's own files may ask for
//! network = false              # honour a tool asking for network
//! max_timeout = "300s"         # a tool may ask for a timeout up to this
//!
//! [approval]
//! mode = "never"               # never | always | once | once-per-args
//!
//! [rate_limit]
//! requests = 10                # calls per window (window defaults to 1m)
//! window = "1m"
//!
//! [tools.NAME]                 # per-tool overrides: any section above,
//! limits = { timeout = "2m" }  # e.g. [tools.NAME.limits]; no nested tools
//! ```
//!
//! Paths may use `{project}`, `{home}` and `{tmp}`; relative paths are
//! relative to the project.

use super::error::PolicyError;
use super::units::{parse_duration, parse_size};
use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// A policy file as written: every key optional.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyFile {
    // The fields of `Body`, repeated: serde's `flatten` cannot be combined
    // with `deny_unknown_fields` and loses the spans our messages need.
    #[serde(default)]
    fs: FsSection,
    #[serde(default)]
    network: NetworkSection,
    #[serde(default)]
    env: EnvSection,
    #[serde(default)]
    limits: LimitsSection,
    #[serde(default)]
    sandbox: SandboxSection,
    #[serde(default)]
    requests: RequestsSection,
    #[serde(default)]
    approval: ApprovalSection,
    #[serde(default)]
    rate_limit: RateLimitSection,
    /// Per-tool overrides, by tool name.
    #[serde(default)]
    pub tools: BTreeMap<String, Body>,
}

impl PolicyFile {
    /// Split into the top-level body and the per-tool bodies.
    pub fn into_parts(self) -> (Body, BTreeMap<String, Body>) {
        let body = Body {
            fs: self.fs,
            network: self.network,
            env: self.env,
            limits: self.limits,
            sandbox: self.sandbox,
            requests: self.requests,
            approval: self.approval,
            rate_limit: self.rate_limit,
        };
        (body, self.tools)
    }
}

/// The sections that can appear at the top level and under `[tools.NAME]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Body {
    #[serde(default)]
    pub fs: FsSection,
    #[serde(default)]
    pub network: NetworkSection,
    #[serde(default)]
    pub env: EnvSection,
    #[serde(default)]
    pub limits: LimitsSection,
    #[serde(default)]
    pub sandbox: SandboxSection,
    #[serde(default)]
    pub requests: RequestsSection,
    #[serde(default)]
    pub approval: ApprovalSection,
    #[serde(default)]
    pub rate_limit: RateLimitSection,
}

/// The names `Body` accepts, for "unknown key" messages.
pub const SECTIONS: &[&str] = &[
    "fs",
    "network",
    "env",
    "limits",
    "sandbox",
    "requests",
    "approval",
    "rate_limit",
    "tools",
];

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FsSection {
    pub read: Option<Vec<String>>,
    pub write: Option<Vec<String>>,
    pub protected: Option<Vec<String>>,
    pub denied: Option<Vec<String>>,
    pub add_read: Option<Vec<String>>,
    pub add_write: Option<Vec<String>>,
    pub add_protected: Option<Vec<String>>,
    pub add_denied: Option<Vec<String>>,
    pub private_tmp: Option<bool>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NetMode {
    Off,
    On,
    Tcp,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkSection {
    pub mode: Option<NetMode>,
    /// Kept wide so out-of-range ports get our own message with a line.
    pub connect: Option<Vec<i64>>,
    pub bind: Option<Vec<i64>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvSection {
    pub allow: Option<Vec<String>>,
    pub add_allow: Option<Vec<String>>,
    pub set: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsSection {
    pub timeout: Option<Dur>,
    pub kill_grace: Option<Dur>,
    pub address_space: Option<Limit<Bytes>>,
    pub cpu: Option<Limit<Dur>>,
    pub processes: Option<Limit<Count>>,
    pub file_size: Option<Limit<Bytes>>,
    pub open_files: Option<Limit<Count>>,
    pub stdout: Option<Bytes>,
    pub stderr: Option<Bytes>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxSection {
    pub enforcement: Option<super::Enforcement>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestsSection {
    pub network: Option<bool>,
    pub max_timeout: Option<Dur>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalSection {
    pub mode: Option<super::ApprovalMode>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimitSection {
    pub requests: Option<Count>,
    pub window: Option<Dur>,
}

/// A value written as a string with a unit or as a bare integer.
pub trait Unit: Sized {
    fn from_str(s: &str) -> Result<Self, String>;
    fn from_int(n: i64) -> Result<Self, String>;
    fn expecting() -> &'static str;
}

/// A duration (`"30s"` or seconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dur(pub Duration);
/// A size in bytes (`"64KiB"` or bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bytes(pub u64);
/// A plain count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Count(pub u64);
/// An rlimit: a value or `"unlimited"` (leave the inherited limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit<T> {
    Unlimited,
    Set(T),
}

fn non_negative(n: i64, what: &str) -> Result<u64, String> {
    u64::try_from(n).map_err(|_| format!("{what} must not be negative, got {n}"))
}

impl Unit for Dur {
    fn from_str(s: &str) -> Result<Self, String> {
        parse_duration(s).map(Dur)
    }
    fn from_int(n: i64) -> Result<Self, String> {
        non_negative(n, "a duration").map(|s| Dur(Duration::from_secs(s)))
    }
    fn expecting() -> &'static str {
        "a duration such as \"30s\""
    }
}

impl Unit for Bytes {
    fn from_str(s: &str) -> Result<Self, String> {
        parse_size(s).map(Bytes)
    }
    fn from_int(n: i64) -> Result<Self, String> {
        non_negative(n, "a size").map(Bytes)
    }
    fn expecting() -> &'static str {
        "a size such as \"64KiB\""
    }
}

impl Unit for Count {
    fn from_str(s: &str) -> Result<Self, String> {
        s.trim()
            .parse()
            .map(Count)
            .map_err(|_| format!("invalid number \"{s}\" (use a whole number such as 512)"))
    }
    fn from_int(n: i64) -> Result<Self, String> {
        non_negative(n, "a count").map(Count)
    }
    fn expecting() -> &'static str {
        "a whole number"
    }
}

impl<T: Unit> Unit for Limit<T> {
    fn from_str(s: &str) -> Result<Self, String> {
        if s.trim().eq_ignore_ascii_case("unlimited") {
            Ok(Limit::Unlimited)
        } else {
            T::from_str(s).map(Limit::Set)
        }
    }
    fn from_int(n: i64) -> Result<Self, String> {
        T::from_int(n).map(Limit::Set)
    }
    fn expecting() -> &'static str {
        T::expecting()
    }
}

struct UnitVisitor<T>(std::marker::PhantomData<T>);

impl<T: Unit> Visitor<'_> for UnitVisitor<T> {
    type Value = T;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(T::expecting())
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
        T::from_str(v).map_err(E::custom)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<T, E> {
        T::from_int(v).map_err(E::custom)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<T, E> {
        T::from_int(i64::try_from(v).unwrap_or(i64::MAX)).map_err(E::custom)
    }
}

macro_rules! unit_deserialize {
    ($($t:ty),*) => {$(
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                d.deserialize_any(UnitVisitor::<$t>(std::marker::PhantomData))
            }
        }
    )*};
}
unit_deserialize!(Dur, Bytes, Count, Limit<Bytes>, Limit<Dur>, Limit<Count>);

/// The text of a policy file, kept to turn key paths into line numbers.
#[derive(Debug)]
pub struct FileText {
    /// How the file is named in messages: its path, or `<shipped>/NAME.toml`.
    pub label: String,
    pub text: String,
}

impl FileText {
    /// The 1-based line of `key` (with an optional array index), or of the
    /// closest enclosing key that exists.
    pub fn line_of(&self, key: &[String], index: Option<usize>) -> usize {
        let Ok(root) = toml::de::DeTable::parse(&self.text) else {
            return 1;
        };
        let mut offset = root.span().start;
        let mut table = Some(root.get_ref());
        let mut value: Option<&toml::Spanned<toml::de::DeValue>> = None;
        for k in key {
            let Some(t) = table else { break };
            let Some((kk, v)) = t.iter().find(|(kk, _)| kk.get_ref().as_ref() == k.as_str()) else {
                break;
            };
            offset = kk.span().start;
            value = Some(v);
            table = match v.get_ref() {
                toml::de::DeValue::Table(t) => Some(t),
                _ => None,
            };
        }
        if let (Some(i), Some(v)) = (index, value)
            && let toml::de::DeValue::Array(a) = v.get_ref()
            && let Some(e) = a.get(i)
        {
            offset = e.span().start;
        }
        line_at(&self.text, offset)
    }

    /// The dotted key path of the innermost key whose key or value covers `pos`.
    fn key_at(&self, pos: usize) -> Vec<String> {
        let Ok(root) = toml::de::DeTable::parse(&self.text) else {
            return Vec::new();
        };
        let mut path = Vec::new();
        find_key(root.get_ref(), pos, &mut path);
        path
    }
}

/// Depth-first search for the key covering `pos`. Tables declared with a
/// `[header]` have spans that do not cover their contents, so every table is
/// searched.
fn find_key(table: &toml::de::DeTable, pos: usize, path: &mut Vec<String>) -> bool {
    let covers = |r: std::ops::Range<usize>| r.start <= pos && pos < r.end.max(r.start + 1);
    for (k, v) in table.iter() {
        path.push(k.get_ref().to_string());
        if let toml::de::DeValue::Table(inner) = v.get_ref()
            && find_key(inner, pos, path)
        {
            return true;
        }
        if covers(k.span()) || covers(v.span()) {
            return true;
        }
        path.pop();
    }
    false
}

/// 1-based line number of byte `offset` in `text`.
pub fn line_at(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// Parse a policy file, turning any error into a one-line message.
pub fn parse(file: &Arc<FileText>) -> Result<PolicyFile, PolicyError> {
    toml::from_str::<PolicyFile>(&file.text).map_err(|e| convert_error(file, &e))
}

fn convert_error(file: &FileText, e: &toml::de::Error) -> PolicyError {
    let span = e.span().unwrap_or(0..0);
    let line = line_at(&file.text, span.start);
    let raw = e.message().trim().replace('\n', " ");
    let mut key = file.key_at(span.start);
    let message = if let Some(rest) = raw.strip_prefix("unknown field `") {
        let name = rest.split('`').next().unwrap_or_default().to_string();
        // The key itself is the unknown one: name its parent.
        if key.last() == Some(&name) {
            key.pop();
        }
        let expected = expected_list(&raw);
        format!("unknown key '{name}' (expected one of {expected})")
    } else if let Some(rest) = raw.strip_prefix("unknown variant `") {
        let name = rest.split('`').next().unwrap_or_default();
        format!(
            "invalid value \"{name}\" (expected one of {})",
            expected_list(&raw)
        )
    } else {
        raw
    };
    PolicyError::File {
        file: file.label.clone(),
        line,
        key: key.join("."),
        message,
    }
}

/// "... expected one of `a`, `b`" or "expected `a` or `b`" -> "a, b".
fn expected_list(raw: &str) -> String {
    let tail = raw.split("expected").nth(1).unwrap_or_default();
    let names: Vec<&str> = tail
        .split('`')
        .enumerate()
        .filter(|(i, _)| i % 2 == 1)
        .map(|(_, s)| s)
        .collect();
    if names.is_empty() {
        SECTIONS.join(", ")
    } else {
        names.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(s: &str) -> Arc<FileText> {
        Arc::new(FileText {
            label: "/x/p.toml".into(),
            text: s.into(),
        })
    }

    fn err(s: &str) -> String {
        parse(&text(s)).unwrap_err().to_string()
    }

    #[test]
    fn parses_every_section() {
        let f = parse(&text(
            r#"
[fs]
read = ["/usr"]
add_write = ["out"]
private_tmp = false
[network]
mode = "tcp"
connect = [443]
[env]
allow = ["PATH", "LC_*"]
set = { A = "1" }
[limits]
timeout = "2m"
cpu = "unlimited"
processes = 64
stdout = 1024
[sandbox]
enforcement = "strict"
[requests]
network = true
max_timeout = 600
[approval]
mode = "once-per-args"
[rate_limit]
requests = 5
window = "10s"
[tools.grep.limits]
timeout = "5s"
"#,
        ))
        .unwrap();
        let (body, tools) = f.into_parts();
        assert_eq!(body.fs.read, Some(vec!["/usr".to_string()]));
        assert_eq!(body.network.mode, Some(NetMode::Tcp));
        assert_eq!(body.limits.timeout, Some(Dur(Duration::from_secs(120))));
        assert_eq!(body.limits.cpu, Some(Limit::Unlimited));
        assert_eq!(body.limits.processes, Some(Limit::Set(Count(64))));
        assert_eq!(body.limits.stdout, Some(Bytes(1024)));
        assert_eq!(
            body.requests.max_timeout,
            Some(Dur(Duration::from_secs(600)))
        );
        assert_eq!(
            body.approval.mode,
            Some(super::super::ApprovalMode::OncePerArgs)
        );
        assert_eq!(
            tools["grep"].limits.timeout,
            Some(Dur(Duration::from_secs(5)))
        );
    }

    #[test]
    fn bad_duration_names_file_line_and_key() {
        let e = err("[fs]\nread = []\n\n[limits]\ntimeout = \"3x\"\n");
        assert_eq!(
            e,
            "policy /x/p.toml:5: limits.timeout: invalid duration \"3x\" (use e.g. \"30s\", \"500ms\", \"5m\")"
        );
    }

    #[test]
    fn unknown_top_level_key() {
        let e = err("[fs]\nread = []\n[netwrk]\nmode = \"on\"\n");
        assert!(
            e.starts_with(
                "policy /x/p.toml:3: unknown key 'netwrk' (expected one of fs, network, env"
            ),
            "{e}"
        );
    }

    #[test]
    fn unknown_nested_key() {
        let e = err("[limits]\ntimeout = \"1s\"\ntimeot = \"2s\"\n");
        assert!(
            e.starts_with(
                "policy /x/p.toml:3: limits: unknown key 'timeot' (expected one of timeout,"
            ),
            "{e}"
        );
    }

    #[test]
    fn unknown_key_in_tool_section() {
        let e = err("[tools.grep]\ntools = {}\n");
        assert!(
            e.starts_with("policy /x/p.toml:2: tools.grep: unknown key 'tools'"),
            "{e}"
        );
    }

    #[test]
    fn bad_enum_value() {
        let e = err("[network]\nmode = \"sometimes\"\n");
        assert_eq!(
            e,
            "policy /x/p.toml:2: network.mode: invalid value \"sometimes\" (expected one of off, on, tcp)"
        );
    }

    #[test]
    fn syntax_error_has_a_line() {
        let e = err("[fs]\nread = [\"/usr\"\n\n");
        assert!(e.starts_with("policy /x/p.toml:"), "{e}");
        assert!(!e.contains('\n'), "{e}");
    }

    #[test]
    fn wrong_type_and_negative() {
        let e = err("[limits]\nprocesses = -3\n");
        assert_eq!(
            e,
            "policy /x/p.toml:2: limits.processes: a count must not be negative, got -3"
        );
        let e = err("[fs]\nprivate_tmp = \"yes\"\n");
        assert!(e.starts_with("policy /x/p.toml:2: fs.private_tmp: "), "{e}");
    }

    #[test]
    fn line_of_finds_array_elements() {
        let f = text("[fs]\nread = [\n  \"/a\",\n  \"/b\",\n]\n[tools.x.fs]\nwrite = [\"w\"]\n");
        assert_eq!(f.line_of(&["fs".into(), "read".into()], Some(1)), 4);
        assert_eq!(
            f.line_of(
                &["tools".into(), "x".into(), "fs".into(), "write".into()],
                Some(0)
            ),
            7
        );
        assert_eq!(f.line_of(&["nope".into()], None), 1);
    }
}
