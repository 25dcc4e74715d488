//! Name collisions (docs/formats.md#name-collisions): config-defined over dynamic over
//! local, as Octomind documents.
//!
//! | tier | formats |
//! |---|---|
//! | 3 config-defined | A3S `tools/*.md`, `.mcp.json` |
//! | 2 dynamic | OpenCrabs `tools.toml` |
//! | 1 local | clawd (`ct_<id>`) |
//! | 0 local | Octomind `.agents/tools` |
//!
//! Within one format the first definition by (source path, line) wins and
//! every later one is an Error on the later file. Across formats the loser
//! gets a Warning naming the winner. Every loser is in `Catalog.shadowed`:
//! never silent.

use super::{Diagnostic, Shadowed, ToolSpec, UpstreamSpec};
use crate::spec::Format;

/// Higher wins.
pub(crate) fn tier(format: Format) -> u8 {
    match format {
        Format::Agentdir | Format::McpJson => 3,
        Format::Opencrabs => 2,
        Format::Clawd => 1,
        Format::Octomind => 0,
    }
}

fn label(t: &ToolSpec) -> String {
    match t.line {
        Some(l) => format!("{}:{l}", t.source.display()),
        None => t.source.display().to_string(),
    }
}

/// Keep one tool per name; the winners sorted by name.
pub(crate) fn resolve(mut tools: Vec<ToolSpec>) -> (Vec<ToolSpec>, Vec<Shadowed>, Vec<Diagnostic>) {
    tools.sort_by(|a, b| {
        a.name
            .cmp(&b.name)
            .then(tier(b.format).cmp(&tier(a.format)))
            .then(a.format.cmp(&b.format))
            .then(a.source.cmp(&b.source))
            .then(a.line.cmp(&b.line))
    });
    let mut winners: Vec<ToolSpec> = Vec::with_capacity(tools.len());
    let mut shadowed = Vec::new();
    let mut diags = Vec::new();
    for t in tools {
        let Some(w) = winners.last().filter(|w| w.name == t.name) else {
            winners.push(t);
            continue;
        };
        let d = if w.format == t.format {
            Diagnostic::error(
                &t.source,
                t.line,
                format!(
                    "duplicate tool name '{}' (first defined at {}); skipped",
                    t.name,
                    label(w)
                ),
            )
            .fix("rename one of the tools")
        } else {
            Diagnostic::warning(
                &t.source,
                t.line,
                format!(
                    "tool '{}' is shadowed by the {:?} tool at {}",
                    t.name,
                    w.format,
                    label(w)
                ),
            )
            .fix("rename one of the tools if both should be visible")
        };
        diags.push(d);
        shadowed.push(Shadowed {
            name: t.name.clone(),
            winner_format: w.format,
            winner_source: w.source.clone(),
            loser_format: t.format,
            loser_source: t.source.clone(),
        });
    }
    (winners, shadowed, diags)
}

/// Keep one upstream server per name: `.mcp.json` (the configuration)
/// over A3S `kind: mcp`; the one left out is an error naming the winner.
/// Sorted by name.
pub(crate) fn upstreams(
    mut servers: Vec<UpstreamSpec>,
    diags: &mut Vec<Diagnostic>,
) -> Vec<UpstreamSpec> {
    servers.sort_by(|a, b| {
        a.name
            .cmp(&b.name)
            .then((a.format != Format::McpJson).cmp(&(b.format != Format::McpJson)))
            .then(a.source.cmp(&b.source))
            .then(a.line.cmp(&b.line))
    });
    let mut kept: Vec<UpstreamSpec> = Vec::with_capacity(servers.len());
    for s in servers {
        if let Some(w) = kept.last().filter(|w| w.name == s.name) {
            diags.push(
                Diagnostic::error(
                    &s.source,
                    s.line,
                    format!(
                        "upstream server '{}' is also declared in {}; this one is ignored",
                        s.name,
                        w.source.display()
                    ),
                )
                .fix("rename one of the servers"),
            );
            continue;
        }
        kept.push(s);
    }
    kept
}
