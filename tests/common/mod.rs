//! Shared helpers for the sandbox tests: a scratch project and a grant
//! shaped like the `default` profile.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;
use toolcage::policy::{Grant, Network};
use toolcage::sandbox::{self, Command, Outcome};

pub struct Project {
    pub dir: PathBuf,
}

impl Project {
    pub fn new(tag: &str) -> Project {
        let base = std::env::temp_dir().join(format!(
            "tc-test-{tag}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(&base).unwrap();
        Project {
            dir: base.canonicalize().unwrap(),
        }
    }
    /// A state directory beside the project (outside its write roots),
    /// removed with it.
    pub fn state_dir(&self) -> PathBuf {
        self.dir.with_extension("state")
    }
    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.join(rel)
    }
    pub fn write(&self, rel: &str, content: &str) -> PathBuf {
        let p = self.path(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, content).unwrap();
        p
    }
}

impl Drop for Project {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
        let _ = std::fs::remove_dir_all(self.state_dir());
    }
}

/// The `default` profile's grant, built by hand so sandbox tests don't
/// depend on policy parsing.
pub fn default_grant(project: &Path) -> Grant {
    let mut g = Grant::closed(project.to_path_buf());
    g.read = [
        "/usr",
        "/bin",
        "/lib",
        "/lib64",
        "/etc",
        "/proc",
        "/dev/urandom",
        "/dev/zero",
    ]
    .iter()
    .map(PathBuf::from)
    .filter(|p| p.exists())
    .collect();
    g.write = vec![project.to_path_buf(), PathBuf::from("/dev/null")];
    g.protected = [
        ".agents",
        ".clawd",
        "tools",
        "tools.toml",
        ".mcp.json",
        ".git",
    ]
    .iter()
    .map(|p| project.join(p))
    .collect();
    g.env_allow = vec!["PATH".into(), "LANG".into(), "LC_*".into(), "TERM".into()];
    g.network = Network::Off;
    g.timeout = Duration::from_secs(20);
    g
}

pub fn sh(grant: &Grant, script: &str) -> Outcome {
    let cmd = Command {
        argv: vec!["/bin/sh".into(), "-c".into(), script.into()],
        ..Default::default()
    };
    sandbox::run(grant, &cmd, None).expect("sandbox run")
}
