//! `toolcage check`: every file examined in the tool dirs (loaded, or
//! skipped with the reason, file:line and the fix), name collisions, and
//! policy conflicts (the policy does not load, or a tool's grant does not
//! resolve). Exit 1 when any error was found; warnings do not fail.

use super::list::format_name;
use super::{Global, PolicyArgs, relative, status};
use crate::call::Engine;
use crate::discover::{Catalog, Diagnostic, Severity};
use clap::Args;
use serde::Serialize;
use std::path::{Path, PathBuf};

#[derive(Debug, Args)]
pub struct CheckArgs {
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
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

#[derive(Debug, Serialize)]
struct Report {
    project: String,
    files: Vec<FileReport>,
    shadowed: Vec<ShadowReport>,
    policy: Vec<PolicyProblem>,
    tools: usize,
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

fn build(root: &Path, catalog: &Catalog, policy: Vec<PolicyProblem>) -> Report {
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
    let warnings = count(Severity::Warning);
    Report {
        project: root.display().to_string(),
        files,
        shadowed,
        tools: catalog.tools.len(),
        errors,
        warnings,
        ok: errors == 0,
        policy,
    }
}

/// The report as text. File names, tool names and messages come from the
/// project (a message may quote a line of a tool file), so every line is
/// neutralised ([`crate::text::one_line`]) before it is printed.
fn print_text(r: &Report) {
    let show = |line: String| println!("{}", crate::text::one_line(&line));
    show(format!(
        "{}: {} files examined, {} tools loaded, {} errors, {} warnings",
        r.project,
        r.files.len(),
        r.tools,
        r.errors,
        r.warnings
    ));
    for f in &r.files {
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
            let sev = match d.severity {
                Severity::Error => "error  ",
                Severity::Warning => "warning",
            };
            let line = d.line.map(|l| format!(":{l}")).unwrap_or_default();
            let fix = d
                .fix
                .as_ref()
                .map(|f| format!(" (fix: {f})"))
                .unwrap_or_default();
            show(format!("{sev}  {}{line}: {}{fix}", d.file, d.message));
        }
    }
    for s in &r.shadowed {
        show(format!(
            "warning  tool {} from {} is hidden by {} (fix: rename one of them)",
            s.name, s.loser, s.winner
        ));
    }
    for p in &r.policy {
        match &p.tool {
            Some(t) => show(format!("error    policy for tool {t}: {}", p.message)),
            None => show(format!("error    {}", p.message)),
        }
    }
}

pub fn run(global: &Global, args: &CheckArgs) -> u8 {
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
    let mut problems = Vec::new();
    match Engine::with_catalog(
        &global.project,
        &super::exec::sources(&args.policy),
        args.policy.overrides(),
        global.options(),
        catalog.clone(),
    ) {
        Ok(engine) => {
            for t in &engine.catalog.tools {
                if let Err(e) = engine.resolve(t) {
                    problems.push(PolicyProblem {
                        tool: Some(t.name.clone()),
                        message: e.to_string(),
                    });
                }
            }
        }
        Err(e) => problems.push(PolicyProblem {
            tool: None,
            message: e.to_string(),
        }),
    }
    let report = build(&project, &catalog, problems);
    if args.json {
        match serde_json::to_string_pretty(&report) {
            Ok(s) => println!("{s}"),
            Err(e) => {
                super::say(&e);
                return status::INTERNAL;
            }
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
