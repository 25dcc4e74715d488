//! Unit tests for discovery, one file per format (every rule of the seed
//! documents in `../shared/seeds/`), plus the template engine, property
//! tests for its quoting, and a corpus of nasty inputs for every parser.

mod agentdir;
mod clawd;
mod collide;
mod nasty;
mod octomind;
mod opencrabs;
mod symlinks;
mod template;
mod template_prop;

use super::{Catalog, Diagnostic, Options, Severity, discover, project_root};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// A scratch project in a temp dir (canonical path, so sources compare).
pub(super) struct Proj {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl Proj {
    pub fn new() -> Proj {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().canonicalize().expect("canonical");
        Proj { _dir: dir, root }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// Write `rel` (creating parents) with mode 0644.
    pub fn write(&self, rel: &str, text: impl AsRef<[u8]>) -> PathBuf {
        let p = self.path(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(&p, text).expect("write");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        p
    }

    /// Write `rel` with mode 0755.
    pub fn exec(&self, rel: &str, text: impl AsRef<[u8]>) -> PathBuf {
        let p = self.write(rel, text);
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        p
    }

    pub fn discover(&self) -> Catalog {
        discover(&self.root, &Options::default())
    }

    pub fn discover_with(&self, options: &Options) -> Catalog {
        discover(&self.root, options)
    }
}

/// The names of the loaded tools.
pub(super) fn names(c: &Catalog) -> Vec<&str> {
    c.tools.iter().map(|t| t.name.as_str()).collect()
}

/// Every diagnostic rendered as `check` prints it, with paths relative to
/// `root`.
pub(super) fn rendered(c: &Catalog, root: &Path) -> Vec<String> {
    c.diagnostics
        .iter()
        .map(|d| {
            let rel = d.file.strip_prefix(root).unwrap_or(&d.file);
            let d = Diagnostic {
                file: rel.to_path_buf(),
                ..d.clone()
            };
            let sev = match d.severity {
                Severity::Error => "error",
                Severity::Warning => "warning",
                Severity::Note => "note",
            };
            format!("{sev} {d}")
        })
        .collect()
}

/// Assert the diagnostics are each one line that names the file and a fix.
pub(super) fn assert_one_line_with_fix(c: &Catalog) {
    for d in &c.diagnostics {
        let s = d.to_string();
        assert!(!s.contains('\n'), "multi-line diagnostic: {s:?}");
        assert!(
            s.starts_with(&d.file.display().to_string()),
            "does not start with the file: {s}"
        );
        if d.severity == Severity::Error {
            assert!(d.fix.is_some(), "error without a fix: {s}");
        }
    }
}

#[test]
fn toolcage_quarantine_directories_are_never_read() {
    // Where toolcage moves a protected path a call created: a hidden
    // directory beside it, which may lie in a tool directory when the
    // protected path does.
    let p = Proj::new();
    let q = ".toolcage-quarantine-abc123def456";
    let header = "#!/bin/sh\n# @description Planted\ntrue\n";
    p.exec(&format!(".agents/tools/{q}/planted"), header);
    p.write(
        &format!(".clawd/tools/{q}/tool.json"),
        r#"{"name": "planted", "description": "d", "entrypoint": "x.sh"}"#,
    );
    p.write(
        &format!("tools/{q}/planted.md"),
        "---\nkind: script\nname: planted\n---\nd\n",
    );
    p.write(
        &format!("{q}/.mcp.json"),
        r#"{"mcpServers": {"x": {"command": "x"}}}"#,
    );
    // Control: a real tool beside them loads.
    p.exec(
        ".agents/tools/good",
        "#!/bin/sh\n# @description Good\ntrue\n",
    );
    let c = p.discover();
    assert_eq!(names(&c), vec!["good"]);
    assert!(c.upstreams.is_empty());
    let mentioned = c
        .examined
        .iter()
        .chain(c.diagnostics.iter().map(|d| &d.file))
        .any(|f| f.to_string_lossy().contains(q));
    assert!(!mentioned, "{:?} {:?}", c.examined, c.diagnostics);
}

#[test]
fn the_project_is_the_nearest_ancestor_with_tools_or_git() {
    let t = tempfile::tempdir().unwrap();
    let top = t.path().canonicalize().unwrap();
    let deep = top.join("repo/src/module");
    std::fs::create_dir_all(&deep).unwrap();
    // Nothing marks a project: the directory itself.
    assert_eq!(project_root(&deep, None), deep);
    std::fs::create_dir(top.join("repo/.git")).unwrap();
    assert_eq!(project_root(&deep, None), top.join("repo"));
    // A tool directory nearer than .git wins (a tools project inside a repo).
    std::fs::write(top.join("repo/src/tools.toml"), "").unwrap();
    assert_eq!(project_root(&deep, None), top.join("repo/src"));
    // An ordinary tools/ (no A3S files) marks nothing.
    std::fs::create_dir_all(deep.join("tools")).unwrap();
    std::fs::write(deep.join("tools/build.sh"), "").unwrap();
    assert_eq!(project_root(&deep, None), top.join("repo/src"));
    // Home with a .git (dotfiles) is never the project found from below.
    let home = top.join("home");
    std::fs::create_dir_all(home.join(".git")).unwrap();
    std::fs::create_dir_all(home.join("notes")).unwrap();
    assert_eq!(
        project_root(&home.join("notes"), Some(&home)),
        home.join("notes")
    );
    // Control: from home itself, or without the stop, it is found.
    assert_eq!(project_root(&home.join("notes"), None), home);
}
