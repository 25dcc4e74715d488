//! `toolcage check`: every file examined in the tool dirs (loaded, or
//! skipped with the reason, file:line and the fix), name collisions, and
//! policy conflicts (the policy does not load, or a tool's grant does not
//! resolve). Exit 1 when any error was found; warnings do not fail.

use super::list::format_name;
use super::toolnotes::{self, Approval};
use super::{Global, PolicyArgs, relative, status};
use crate::call::Engine;
use crate::discover::{Catalog, Diagnostic, Severity};
use clap::Args;
use serde::Serialize;
use std::path::{Path, PathBuf};

#[derive(Debug, Args)]
pub(crate) struct CheckArgs {
    #[command(flatten)]
    pub(crate) policy: PolicyArgs,
    /// Print the report as JSON.
    #[arg(long)]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) opts: super::options::DiscoverOpts,
}

#[derive(Debug, Serialize)]
struct FileReport {
    file: String,
    loaded: Vec<String>,
    diagnostics: Vec<DiagReport>,
}

#[derive(Debug, Serialize)]
struct DiagReport {
    file: String,
    line: Option<usize>,
    severity: Severity,
    message: String,
    fix: Option<String>,
}

#[derive(Debug, Serialize)]
struct ShadowReport {
    name: String,
    winner: String,
    loser: String,
}

#[derive(Debug, Serialize)]
struct PolicyProblem {
    /// The tool whose grant does not resolve; none when the policy itself fails.
    tool: Option<String>,
    message: String,
}

/// A `[tools.NAME]` policy section that applies to no discovered tool: an
/// easy trap (clawd tools are `ct_<id>`), so the settings silently apply
/// to nothing.
#[derive(Debug, Serialize)]
struct SectionWarning {
    /// The policy file and line holding the section, where known.
    file: String,
    line: Option<usize>,
    section: String,
    /// The discovered tool whose name is nearest, if any is near.
    nearest: Option<String>,
    message: String,
    fix: String,
}

/// Whether calls can write the project's `tools/`, and why: the default
/// policy protects it only when it holds A3S tool files.
#[derive(Debug, Serialize)]
struct ToolsDir {
    protected: bool,
    /// The `tools/*.md` files discovery reads as A3S tools.
    a3s_tool_files: Vec<String>,
    message: String,
}

/// A tool whose calls wait for a person's yes, and why.
#[derive(Debug, Serialize)]
struct ApprovalReport {
    tool: String,
    file: String,
    line: Option<usize>,
    #[serde(flatten)]
    approval: Approval,
}

#[derive(Debug, Serialize)]
struct Report {
    project: String,
    /// Present when the project has a `tools/` directory.
    tools_dir: Option<ToolsDir>,
    files: Vec<FileReport>,
    shadowed: Vec<ShadowReport>,
    policy: Vec<PolicyProblem>,
    policy_warnings: Vec<SectionWarning>,
    /// Tools that ask for approval (not problems: visible, not counted).
    approvals: Vec<ApprovalReport>,
    tools: usize,
    /// Upstream MCP servers, each started to see whether it runs.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    upstreams: Vec<crate::upstream::Status>,
    errors: usize,
    warnings: usize,
    ok: bool,
}

fn diag(root: &Path, d: &Diagnostic) -> DiagReport {
    DiagReport {
        file: relative(root, &d.file),
        line: d.line,
        severity: d.severity,
        message: d.message.clone(),
        fix: d.fix.clone(),
    }
}

/// The note on `tools/`, when it exists; `protected` from the grant.
fn tools_dir(root: &Path, protected: bool) -> Option<ToolsDir> {
    if !root.join("tools").is_dir() {
        return None;
    }
    let files: Vec<String> = crate::discover::agentdir::a3s_tool_files(root)
        .iter()
        .map(|f| relative(root, f))
        .collect();
    let message = match (protected, files.is_empty()) {
        (true, false) => format!("protected: it holds A3S tool files ({})", files.join(", ")),
        (true, true) => "protected by the policy (it holds no A3S tool files)".to_string(),
        (false, false) => format!(
            "writable by calls although it holds A3S tool files ({}): the policy does not protect it",
            files.join(", ")
        ),
        (false, true) => "writable by calls: no A3S tool files (*.md starting with front matter) in it, so it is ordinary source".to_string(),
    };
    Some(ToolsDir {
        protected,
        a3s_tool_files: files,
        message,
    })
}

/// What the checks beyond discovery found.
#[derive(Default)]
struct Found {
    policy: Vec<PolicyProblem>,
    policy_warnings: Vec<SectionWarning>,
    approvals: Vec<ApprovalReport>,
    tools_dir: Option<ToolsDir>,
    /// Interpreters the calls will not find (warnings on the tool's file)
    /// and nested git repositories calls may write.
    interpreters: Vec<Diagnostic>,
}

fn build(root: &Path, catalog: &Catalog, found: Found) -> Report {
    let Found {
        policy,
        policy_warnings,
        approvals,
        tools_dir,
        interpreters,
    } = found;
    let mut catalog = catalog.clone();
    catalog.diagnostics.extend(interpreters);
    let catalog = &catalog;
    let mut files: Vec<PathBuf> = catalog.examined.clone();
    for d in &catalog.diagnostics {
        if !files.contains(&d.file) {
            files.push(d.file.clone());
        }
    }
    for t in &catalog.tools {
        if !files.contains(&t.source) {
            files.push(t.source.clone());
        }
    }
    files.sort();
    files.dedup();
    let files: Vec<FileReport> = files
        .iter()
        .map(|f| FileReport {
            file: relative(root, f),
            loaded: catalog
                .tools
                .iter()
                .filter(|t| &t.source == f)
                .map(|t| t.name.clone())
                .collect(),
            diagnostics: catalog
                .diagnostics
                .iter()
                .filter(|d| &d.file == f)
                .map(|d| diag(root, d))
                .collect(),
        })
        .collect();
    let shadowed = catalog
        .shadowed
        .iter()
        .map(|s| ShadowReport {
            name: s.name.clone(),
            winner: format!(
                "{} {}",
                format_name(s.winner_format),
                relative(root, &s.winner_source)
            ),
            loser: format!(
                "{} {}",
                format_name(s.loser_format),
                relative(root, &s.loser_source)
            ),
        })
        .collect();
    let count = |sev| {
        catalog
            .diagnostics
            .iter()
            .filter(|d| d.severity == sev)
            .count()
    };
    let errors = count(Severity::Error) + policy.len();
    let warnings = count(Severity::Warning) + policy_warnings.len();
    Report {
        project: root.display().to_string(),
        tools_dir,
        files,
        shadowed,
        tools: catalog.tools.len(),
        upstreams: Vec::new(),
        errors,
        warnings,
        ok: errors == 0,
        policy,
        policy_warnings,
        approvals,
    }
}

/// The report as text. File names, tool names and messages come from the
/// project (a message may quote a line of a tool file), so every line is
/// neutralised ([`crate::text::one_line`]) before it is printed.
/// Edit distance (Levenshtein) between two names, by characters.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let here = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb))
                .min(row[j] + 1)
                .min(here + 1);
            prev = here;
        }
    }
    row[b.len()]
}

/// The discovered tool name nearest to `section`: `ct_<section>` (the
/// clawd name of a tool directory) first, then the smallest edit distance
/// within a third of the name's length (at least 2).
fn nearest<'a>(section: &str, tools: impl Iterator<Item = &'a str> + Clone) -> Option<&'a str> {
    if let Some(t) = tools
        .clone()
        .find(|t| t.strip_prefix("ct_") == Some(section))
    {
        return Some(t);
    }
    let limit = (section.chars().count() / 3).max(2);
    tools
        .map(|t| (distance(section, t), t))
        .filter(|(d, _)| *d <= limit)
        .min()
        .map(|(_, t)| t)
}

/// Where `[tools.NAME]` (or `[tools.NAME.x]`) is written in the policy
/// file, when there is one and it holds the section; else the shipped
/// profiles.
fn section_line(policy_file: Option<&Path>, name: &str) -> (String, Option<usize>) {
    let Some(file) = policy_file else {
        return ("the shipped profile".into(), None);
    };
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let header = format!("[tools.{name}");
    let line = text.lines().position(|l| {
        let l = l.trim_start();
        l.starts_with(&header) && matches!(l[header.len()..].chars().next(), Some(']' | '.'))
    });
    (file.display().to_string(), line.map(|i| i + 1))
}

/// A warning for every policy `[tools.NAME]` that names no discovered tool.
fn unmatched_sections(
    sections: &[String],
    catalog: &Catalog,
    upstream_tools: &[String],
    policy_file: Option<&Path>,
) -> Vec<SectionWarning> {
    let names = catalog
        .tools
        .iter()
        .map(|t| t.name.as_str())
        .chain(upstream_tools.iter().map(String::as_str));
    sections
        .iter()
        .filter(|s| catalog.get(s).is_none() && !upstream_tools.contains(s))
        .map(|s| {
            let near = nearest(s, names.clone());
            let (file, line) = section_line(policy_file, s);
            let message = match near {
                Some(n) => format!(
                    "policy section [tools.{s}] matches no discovered tool; the nearest is {n}"
                ),
                None => format!("policy section [tools.{s}] matches no discovered tool"),
            };
            let fix = match near {
                Some(n) => format!("rename the section to [tools.{n}]"),
                None => "remove the section, or name a tool that `toolcage list` shows".into(),
            };
            SectionWarning {
                file,
                line,
                section: s.clone(),
                nearest: near.map(str::to_string),
                message,
                fix,
            }
        })
        .collect()
}

fn print_text(r: &Report) {
    let upstream_tools: usize = r.upstreams.iter().map(|u| u.tools).sum();
    let from_upstreams = match upstream_tools {
        0 => String::new(),
        n => format!(" (and {n} from upstream servers)"),
    };
    show(format!(
        "{}: {} files examined, {} tools loaded{from_upstreams}, {} errors, {} warnings",
        r.project,
        r.files.len(),
        r.tools,
        r.errors,
        r.warnings
    ));
    for f in &r.files {
        print_file(r, f);
    }
    if let Some(t) = &r.tools_dir {
        show(format!("note     tools/: {}", t.message));
    }
    // Each is a warning on the hidden tool's file already (counted once):
    // this is the summary.
    for s in &r.shadowed {
        show(format!(
            "note     tool {} from {} is hidden by {} (fix: rename one of them)",
            s.name, s.loser, s.winner
        ));
    }
    for w in &r.policy_warnings {
        let line = w.line.map(|l| format!(":{l}")).unwrap_or_default();
        show(format!(
            "warning  {}{line}: {} (fix: {})",
            w.file, w.message, w.fix
        ));
    }
    for p in &r.policy {
        match &p.tool {
            Some(t) => show(format!("error    policy for tool {t}: {}", p.message)),
            None => show(format!("error    {}", p.message)),
        }
    }
    for u in &r.upstreams {
        print_upstream(u);
    }
}

/// One line of `check`'s text, neutralised for the terminal.
fn show(line: String) {
    outln!("{}", crate::text::one_line(&line));
}

/// A tool file: what it loaded, its diagnostics, its tools' approvals.
fn print_file(r: &Report, f: &FileReport) {
    if !f.loaded.is_empty() {
        show(format!(
            "ok       {}: loaded {}",
            f.file,
            f.loaded.join(", ")
        ));
    } else if f.diagnostics.is_empty() {
        show(format!("ok       {}: no tools defined", f.file));
    }
    for d in &f.diagnostics {
        show(crate::discover::check_line(
            d.severity,
            &d.file,
            d.line,
            &d.message,
            d.fix.as_deref(),
        ));
    }
    for a in r.approvals.iter().filter(|a| a.file == f.file) {
        let line = a.line.map(|l| format!(":{l}")).unwrap_or_default();
        show(format!(
            "note     {}{line}: tool {} {}",
            a.file,
            a.tool,
            a.approval.text()
        ));
    }
}

/// An upstream server: its state, and its renamed, held and displaced tools.
fn print_upstream(u: &crate::upstream::Status) {
    let level = match u.state.as_str() {
        "failed" | "refused" => "error   ",
        "unsupported" => "warning ",
        _ => "ok      ",
    };
    let what = match u.state.as_str() {
        "running" => format!("started, {} tool(s)", u.tools),
        other => other.to_string(),
    };
    let mut reason = u.reason.as_deref().unwrap_or_default().lines();
    let first = reason.next().map(|l| format!(": {l}")).unwrap_or_default();
    show(format!(
        "{level} upstream {} ({}): {what}{first}",
        u.name, u.source
    ));
    for line in reason {
        show(format!("             {line}"));
    }
    for n in &u.renamed {
        show(format!(
            "warning  upstream {}: tool {} is offered as {}: {}",
            u.name, n.tool, n.name, n.why
        ));
    }
    for h in &u.held {
        show(format!(
            "warning  upstream {}: tool {h} changed its definition; held until the operator reviews it (`toolcage upstreams show {}`) and approves it",
            u.name, u.name
        ));
    }
    for n in &u.displaced {
        let level = match n.collision {
            true => "error   ",
            false => "warning ",
        };
        show(format!(
            "{level} upstream {}: tool {} ({}) is not offered: {}",
            u.name, n.tool, n.name, n.why
        ));
    }
    for n in &u.prompt_collisions {
        show(format!(
            "error    upstream {}: prompt {} ({}) is not offered: {}",
            u.name, n.tool, n.name, n.why
        ));
    }
}

pub(crate) fn run(global: &Global, args: &CheckArgs) -> u8 {
    let project = match global.project.canonicalize() {
        Ok(p) if p.is_dir() => p,
        _ => {
            eprintln!(
                "toolcage: project {} is not a directory (check -C/--project)",
                global.project.display()
            );
            return status::TOOL_ERROR;
        }
    };
    let catalog = crate::discover::discover(&project, &global.options());
    let mut found = Found::default();
    let mut tools_protected = None;
    let mut upstreams = Vec::new();
    match Engine::with_catalog(
        &global.project,
        &super::exec::sources(&args.policy),
        args.policy.overrides(),
        global.options(),
        catalog.clone(),
    ) {
        Ok(engine) => {
            tools_protected = project_notes(&engine, &project, &mut found);
            let upstream_tools;
            (upstreams, upstream_tools) = start_upstreams(&engine);
            found.policy_warnings = unmatched_sections(
                &engine.stack.tool_sections(),
                &engine.catalog,
                &upstream_tools,
                args.policy.policy.as_deref(),
            );
            tool_notes(&engine, &project, &mut found);
        }
        Err(e) => found.policy.push(PolicyProblem {
            tool: None,
            message: e.to_string(),
        }),
    }
    // Without a grant there is nothing to say about tools/ (the policy
    // problem is reported instead).
    found.tools_dir = tools_protected.and_then(|protected| tools_dir(&project, protected));
    let mut report = build(&project, &catalog, found);
    // A server that cannot start is an error; one not supported, a warning.
    for u in &upstreams {
        match u.state.as_str() {
            "failed" | "refused" => report.errors += 1,
            "unsupported" => report.warnings += 1,
            _ => {}
        }
        // A `prefix = false` name another tool has: the operator's error.
        report.errors += u.displaced.iter().filter(|n| n.collision).count();
        report.errors += u.prompt_collisions.len();
    }
    report.ok = report.errors == 0;
    report.upstreams = upstreams;
    if args.json {
        if let Some(code) = super::print_json(&report) {
            return code;
        }
    } else {
        print_text(&report);
    }
    if report.ok {
        status::OK
    } else {
        status::TOOL_ERROR
    }
}

/// What the project's own grant says: nested repositories calls may
/// write, an audit log or state directory calls would be refused for.
/// Whether `tools/` is protected, when the grant resolves.
fn project_notes(engine: &Engine, project: &Path, found: &mut Found) -> Option<bool> {
    let r = engine
        .stack
        .resolve(&engine.ctx, &engine.overrides, None)
        .ok()?;
    found
        .interpreters
        .extend(toolnotes::nested_repositories(project, &r.grant));
    // Where the audit log and state would go: inside a write root
    // every call is refused (exit 125); say so here.
    if let Ok(session) = engine.stack.session(&engine.ctx) {
        use crate::audit::location;
        let state = location::state_dir(project, &engine.ctx);
        let audit = location::audit_path(&session.audit, &state);
        found.policy.extend(
            location::misplaced(&audit, &state, &r.grant)
                .into_iter()
                .map(|message| PolicyProblem {
                    tool: None,
                    message,
                }),
        );
    }
    Some(r.grant.protected.contains(&project.join("tools")))
}

/// The upstream servers started for the check: each one's state, and the
/// names their tools are offered by.
fn start_upstreams(engine: &Engine) -> (Vec<crate::upstream::Status>, Vec<String>) {
    match crate::upstream::Session::for_command(engine) {
        Ok(upstream) => {
            let names = upstream.exposed().map(|e| e.names()).unwrap_or_default();
            (upstream.status(), names)
        }
        Err(e) => {
            super::say(&e);
            (Vec::new(), Vec::new())
        }
    }
}

/// Each tool's grant: an interpreter calls will not find, an approval it
/// needs, or why it does not resolve.
fn tool_notes(engine: &Engine, project: &Path, found: &mut Found) {
    for t in &engine.catalog.tools {
        match engine.resolve(t) {
            Ok(r) => {
                if let Some(d) = toolnotes::interpreter(t, &r, &engine.ctx) {
                    found.interpreters.push(d);
                }
                if let Some(approval) = toolnotes::approval(t, &r) {
                    found.approvals.push(ApprovalReport {
                        tool: t.name.clone(),
                        file: relative(project, &t.source),
                        line: t.line,
                        approval,
                    });
                }
            }
            Err(e) => found.policy.push(PolicyProblem {
                tool: Some(t.name.clone()),
                message: e.to_string(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_prefers_the_clawd_name_then_the_closest_spelling() {
        let tools = ["ct_deploy", "deploy_all", "lint"];
        let it = || tools.iter().copied();
        assert_eq!(nearest("deploy", it()), Some("ct_deploy"));
        assert_eq!(nearest("lnit", it()), Some("lint"));
        assert_eq!(nearest("compile", it()), None);
        assert_eq!(distance("kitten", "sitting"), 3);
        assert_eq!(distance("", "ab"), 2);
    }
}
