//! `toolcage list`: every tool discovered, one per line (or JSON).

use super::toolnotes::{self, Approval};
use super::{Global, PolicyArgs, relative, status};
use crate::text;
use crate::upstream::Session;
use clap::Args;
use serde::Serialize;

#[derive(Debug, Args)]
pub(crate) struct ListArgs {
    #[command(flatten)]
    pub(crate) policy: PolicyArgs,
    /// Print a JSON array of {name, format, source, line, description, approval}.
    #[arg(long)]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) opts: super::options::StoreCmdOpts,
}

#[derive(Debug, Serialize)]
struct Row {
    name: String,
    format: crate::spec::Format,
    /// Relative to the project when inside it.
    source: String,
    line: Option<usize>,
    description: String,
    /// Set when a person must approve its calls: the mode and why.
    approval: Option<Approval>,
}

/// The first line of a description, at most `max` characters.
pub(crate) fn one_line(text: &str, max: usize) -> String {
    let first = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    if first.chars().count() > max {
        let cut: String = first.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    } else {
        first.to_string()
    }
}

pub(crate) fn format_name(f: crate::spec::Format) -> String {
    serde_json::to_value(f)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

pub(crate) fn run(global: &Global, args: &ListArgs) -> u8 {
    let engine = match global.engine(&args.policy) {
        Ok(e) => e,
        Err(e) => {
            super::say(&e);
            return status::INTERNAL;
        }
    };
    let root = engine.project_root();
    let mut rows: Vec<Row> = engine
        .catalog
        .tools
        .iter()
        .map(|t| Row {
            name: t.name.clone(),
            format: t.format,
            source: relative(&root, &t.source),
            line: t.line,
            description: one_line(&t.description, 100),
            // A grant that does not resolve: `check` says why.
            approval: engine
                .resolve(t)
                .ok()
                .and_then(|r| toolnotes::approval(t, &r)),
        })
        .collect();
    // Upstream servers' tools, by the names calls use.
    match Session::for_command(&engine) {
        Ok(upstream) => upstream_rows(&upstream, &root, &mut rows),
        Err(e) => super::say(&e),
    }
    print_notes(&root, &engine.catalog.diagnostics);
    print_rows(&root, rows, args.json)
}

/// The upstream servers' tools as rows (after a note for each server not
/// running), sorted in with the local ones.
fn upstream_rows(upstream: &Session, root: &std::path::Path, rows: &mut Vec<Row>) {
    let Some(gw) = upstream.gateway() else {
        return;
    };
    for s in upstream.status().iter().filter(|s| s.state != "running") {
        super::notice(&format!(
            "note: upstream server '{}' is {}{} (toolcage upstreams)",
            text::one_line(&s.name),
            s.state,
            s.reason
                .as_deref()
                .and_then(|r| r.lines().next())
                .map(|r| format!(": {}", text::one_line(r)))
                .unwrap_or_default()
        ));
    }
    for t in &gw.exposed().tools {
        rows.push(Row {
            name: t.name.clone(),
            format: t.spec.format,
            source: relative(root, &t.spec.source),
            line: t.spec.line,
            description: one_line(&t.spec.description, 100),
            approval: gw
                .server(&t.server)
                .and_then(|s| s.grant.as_ref().ok())
                .and_then(|r| toolnotes::approval(&t.spec, r)),
        });
    }
    rows.sort_by(|a, b| a.name.cmp(&b.name));
}

/// What discovery left out on purpose (an `.mcp.json` entry that runs
/// toolcage itself), one `note:` line each on stderr.
fn print_notes(root: &std::path::Path, diagnostics: &[crate::discover::Diagnostic]) {
    for d in diagnostics
        .iter()
        .filter(|d| d.severity == crate::discover::Severity::Note)
    {
        let line = d.line.map(|l| format!(":{l}")).unwrap_or_default();
        let fix = d
            .fix
            .as_deref()
            .map(|f| format!(" (fix: {f})"))
            .unwrap_or_default();
        super::notice(&format!(
            "note: {}{line}: {}{fix}",
            text::one_line(&relative(root, &d.file)),
            text::one_line(&d.message)
        ));
    }
}

fn print_rows(root: &std::path::Path, rows: Vec<Row>, json: bool) -> u8 {
    if json {
        return super::print_json(&rows).unwrap_or(status::OK);
    }
    if rows.is_empty() {
        super::notice(&format!(
            "no tools found in {} (run `toolcage check` to see why)",
            root.display()
        ));
        return status::OK;
    }
    // Text for a terminal: names, paths and descriptions come from the
    // project, so each is neutralised ([`crate::text`]) before it is shown.
    let rows: Vec<Row> = rows
        .into_iter()
        .map(|r| Row {
            name: text::one_line(&r.name),
            source: text::one_line(&r.source),
            description: text::one_line(&r.description),
            ..r
        })
        .collect();
    let nw = rows.iter().map(|r| r.name.len()).max().unwrap_or(0);
    let fw = rows
        .iter()
        .map(|r| format_name(r.format).len())
        .max()
        .unwrap_or(0);
    let sw = rows.iter().map(|r| r.source.len()).max().unwrap_or(0);
    for r in &rows {
        // A tool that waits for a person says so on its own line's end.
        let approval = r
            .approval
            .as_ref()
            .map(|a| format!("  [{}]", text::one_line(&a.text())))
            .unwrap_or_default();
        let line = format!(
            "{:<nw$}  {:<fw$}  {:<sw$}  {}{approval}",
            r.name,
            format_name(r.format),
            r.source,
            r.description
        );
        outln!("{}", line.trim_end());
    }
    status::OK
}
