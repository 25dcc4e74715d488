//! Whether a project's `tools/` is an A3S tool directory. `tools/` is a
//! common name for ordinary source, so the default policy protects it only
//! when it holds files that discovery reads as A3S tools (`{a3s_tools}` in
//! `policies/default.toml`).

use super::frontmatter::split_front_matter;
use crate::discover::fsread;
use std::path::{Path, PathBuf};

/// The files of `<project>/tools` that discovery reads as A3S tools, valid
/// or not: `*.md` files directly in it (not hidden, not leading out of it)
/// that start with a front matter line. A README without front matter is
/// not one. Nothing when `tools/` is missing or leads out of the project.
/// Whether `<project>/tools` holds A3S tool files (what the policy's
/// `{a3s_tools}` needs; see `policy::Context::holds_a3s_tools`).
pub fn holds_a3s_tools(project: &Path) -> bool {
    !a3s_tool_files(project).is_empty()
}

/// The files of `<project>/tools` that discovery reads as A3S tools (see above).
pub(crate) fn a3s_tool_files(project: &Path) -> Vec<PathBuf> {
    let dir = project.join("tools");
    if fsread::leads_outside(&dir, project).is_some() {
        return Vec::new();
    }
    let mut ignored = Vec::new();
    let Some(entries) = fsread::list_dir(&dir, &mut ignored) else {
        return Vec::new();
    };
    entries
        .into_iter()
        .filter(|e| e.name.ends_with(".md") && !e.name.starts_with('.'))
        .filter(|e| matches!(&e.meta, Ok(m) if m.is_file()))
        .filter(|e| fsread::leads_outside(&e.path, &dir).is_none())
        .filter(|e| {
            // The first line decides; 256 bytes hold it (after a BOM).
            fsread::read_capped(&e.path, 256)
                .is_ok_and(|b| split_front_matter(&String::from_utf8_lossy(&b.data)).is_some())
        })
        .map(|e| e.path)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_md_files_with_front_matter_make_tools_an_a3s_directory() {
        let t = tempfile::tempdir().unwrap();
        let project = t.path().canonicalize().unwrap();
        assert!(a3s_tool_files(&project).is_empty(), "no tools/ at all");
        let tools = project.join("tools");
        std::fs::create_dir(&tools).unwrap();
        std::fs::write(tools.join("build.sh"), "#!/bin/sh\n---\n").unwrap();
        std::fs::write(tools.join("README.md"), "# Tools\n\n---\n").unwrap();
        std::fs::write(tools.join(".hidden.md"), "---\nkind: script\n---\n").unwrap();
        std::fs::create_dir(tools.join("dir.md")).unwrap();
        assert!(a3s_tool_files(&project).is_empty(), "an ordinary tools/");
        // Unclosed front matter is still read as a (broken) tool.
        std::fs::write(tools.join("x.md"), "\u{feff}---\nkind: script\n").unwrap();
        assert_eq!(a3s_tool_files(&project), [tools.join("x.md")]);
    }

    #[test]
    fn links_out_of_tools_do_not_count() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().canonicalize().unwrap();
        let (project, elsewhere) = (root.join("p"), root.join("elsewhere"));
        std::fs::create_dir_all(project.join("tools")).unwrap();
        std::fs::create_dir_all(&elsewhere).unwrap();
        std::fs::write(elsewhere.join("t.md"), "---\nkind: mcp\n---\n").unwrap();
        std::os::unix::fs::symlink(elsewhere.join("t.md"), project.join("tools/t.md")).unwrap();
        assert!(a3s_tool_files(&project).is_empty());
        std::fs::remove_dir_all(project.join("tools")).unwrap();
        std::os::unix::fs::symlink(&elsewhere, project.join("tools")).unwrap();
        assert!(a3s_tool_files(&project).is_empty());
    }
}
