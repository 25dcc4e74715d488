//! Entry points for the fuzz targets in `fuzz/` and for the nasty-input
//! test: each feeds arbitrary bytes to one pure parser (no file system)
//! and must return without panicking, whatever the input.

use serde_json::{Map, Value};
use std::path::Path;

const FILE: &str = "fuzz";

/// The Octomind header parser.
pub fn octomind_header(data: &[u8]) {
    for truncated in [false, true] {
        let (h, d) = super::octomind::parse_header_bytes(data, truncated, Path::new(FILE));
        assert!(h.is_some() || !d.is_empty(), "no header and no reason");
    }
}

/// The clawd `tool.json` validator.
pub fn clawd_tool_json(data: &[u8]) {
    let (t, d) = super::clawd::parse_tool_json(data, Path::new(FILE));
    assert!(t.is_some() || !d.is_empty(), "no tool and no reason");
}

/// The OpenCrabs `tools.toml` parser.
pub fn opencrabs_tools_toml(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let _ = super::opencrabs::parse_tools_toml(&text, Path::new(FILE));
}

/// The A3S front matter parser.
pub fn agentdir_front_matter(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let (doc, d) = super::agentdir::parse_md(&text, Path::new(FILE));
    assert!(doc.is_some() || !d.is_empty(), "no tool and no reason");
}

/// The template engine: the first line is the template, the rest the value
/// of every param it names.
pub fn template(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let (t, value) = text.split_once('\n').unwrap_or((&text, ""));
    let Ok(parsed) = super::opencrabs::template::parse(t) else {
        return;
    };
    let mut args = Map::new();
    for (name, _) in parsed.params() {
        args.insert(name, Value::String(value.to_owned()));
    }
    let _ = parsed.render_plain(&args);
    if let Ok(c) = parsed.render_shell(&args) {
        // Values travel as arguments, never as script text.
        assert!(c.args.iter().all(|a| a == value || a.is_empty()));
    }
}
