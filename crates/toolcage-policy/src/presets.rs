//! Toolchain presets (`--with rust|node|python`, `with = [...]` in a policy
//! file): what a toolchain installed under the operator's home needs inside
//! the sandbox, found in the operator's environment when the grant is
//! resolved.
//!
//! A preset adds read roots (the toolchain's home dirs that exist, and the
//! real targets of the symlinks that lead out of them), the variables the
//! toolchain needs set to the operator's values, and denied paths for the
//! secrets kept in those dirs. It adds no write roots: caches go to the
//! call's private tmp, which is `HOME` inside the sandbox (measured: `cargo
//! build --offline` with a read-only `$CARGO_HOME` skips its package-cache
//! lock; pyenv's shims write nothing; npm's cache and logs go to
//! `$HOME/.npm`).
//!
//! Pure apart from looking: existence, symlink targets, directory listings
//! and the `prefix=` line of `~/.npmrc`. The tests use a fake home.

use super::canon;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A toolchain preset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Preset {
    Rust,
    Node,
    Python,
}

/// The valid preset names, for messages.
pub const NAMES: &[&str] = &["rust", "node", "python"];

impl Preset {
    pub(crate) const ALL: [Preset; 3] = [Preset::Rust, Preset::Node, Preset::Python];

    /// A preset by name, or a message naming the valid ones.
    pub(crate) fn parse(name: &str) -> Result<Preset, String> {
        match name {
            "rust" => Ok(Preset::Rust),
            "node" => Ok(Preset::Node),
            "python" => Ok(Preset::Python),
            _ => Err(format!(
                "unknown preset \"{name}\" (valid presets: {})",
                NAMES.join(", ")
            )),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Preset::Rust => "rust",
            Preset::Node => "node",
            Preset::Python => "python",
        }
    }

    /// The flag that adds it: `--with rust`.
    pub fn flag(self) -> String {
        format!("--with {}", self.name())
    }
}

/// The operator's variables that presets, the sandbox's PATH and explicit
/// `TMPDIR`/`HOME` values are computed from. Only these names are kept,
/// so printing a context never shows a token from the environment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostEnv {
    vars: BTreeMap<String, String>,
}

impl HostEnv {
    pub const NAMES: &'static [&'static str] = &[
        "PATH",
        "HOME",
        "TMPDIR",
        "TMP",
        "TEMP",
        "XDG_DATA_HOME",
        "CARGO_HOME",
        "RUSTUP_HOME",
        "RUSTUP_TOOLCHAIN",
        "PYENV_ROOT",
        "PYENV_VERSION",
        "VIRTUAL_ENV",
        "NVM_DIR",
        "NVM_BIN",
        "NVM_INC",
        "VOLTA_HOME",
        "FNM_DIR",
        "FNM_MULTISHELL_PATH",
        "NPM_CONFIG_PREFIX",
        "npm_config_prefix",
    ];

    /// This process's values of [`HostEnv::NAMES`].
    pub fn capture() -> HostEnv {
        HostEnv::from_pairs(std::env::vars())
    }

    /// The values of [`HostEnv::NAMES`] among `pairs`.
    pub(crate) fn from_pairs(pairs: impl IntoIterator<Item = (String, String)>) -> HostEnv {
        HostEnv {
            vars: pairs
                .into_iter()
                .filter(|(k, _)| HostEnv::NAMES.contains(&k.as_str()))
                .collect(),
        }
    }

    /// A variable's value; empty counts as unset.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.vars
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }
}

/// What a preset adds to a grant.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Additions {
    /// Read roots: canonical, existing.
    pub read: Vec<PathBuf>,
    /// Secrets inside those roots: canonical, existing.
    pub denied: Vec<PathBuf>,
    /// Variables set to the operator's values (canonical paths).
    pub env: Vec<(String, String)>,
    /// The paths as found (in the operator's variables, in a toolchain's
    /// links) that `read` holds the real paths of: each is checked for a
    /// symlink a call could have planted (`with.rs`).
    pub via: Vec<PathBuf>,
}

impl Additions {
    /// Read `p` (by its real path) unless a root already added holds it.
    fn read(&mut self, p: &Path) {
        let Ok(c) = canon::canonical(p) else { return };
        self.found(p);
        if !self.read.iter().any(|r| c.starts_with(r)) {
            self.read.push(c);
        }
    }

    /// Deny `p` when it exists (as a link too: the grant keeps both names).
    fn deny(&mut self, p: &Path) {
        if p.symlink_metadata().is_ok() && !self.denied.iter().any(|d| d == p) {
            self.denied.push(p.to_path_buf());
        }
    }

    /// Remember a path as found, before its links were followed.
    fn found(&mut self, p: &Path) {
        if !self.via.iter().any(|v| v == p) {
            self.via.push(p.to_path_buf());
        }
    }

    fn set(&mut self, name: &str, value: &Path) {
        if let Some(v) = value.to_str() {
            self.env.push((name.to_string(), v.to_string()));
        }
    }

    /// A home dir of the toolchain: read it and set `var` to its real path
    /// (a symlinked home is visible inside only under its real name).
    /// Returns that path when the dir exists.
    fn home_dir(&mut self, var: Option<&str>, dir: &Path) -> Option<PathBuf> {
        let real = canon::canonical(dir).ok().filter(|c| c.is_dir())?;
        self.found(dir);
        self.read(&real);
        if let Some(var) = var {
            self.set(var, &real);
        }
        Some(real)
    }
}

/// The operator's home and variables that a preset is resolved from.
pub struct Operator<'a> {
    pub home: &'a Path,
    pub env: &'a HostEnv,
}

impl Operator<'_> {
    /// `$var` as a path when set and absolute, else `default`.
    fn dir(&self, var: &str, default: &str) -> PathBuf {
        self.env
            .get(var)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .unwrap_or_else(|| self.home.join(default))
    }

    /// Whether `p` lies inside the home.
    fn in_home(&self, p: &Path) -> bool {
        let home = canon::canonical(self.home).unwrap_or_else(|_| self.home.to_path_buf());
        p.starts_with(&home) && p != home
    }
}

/// What `preset` adds for the operator described by `op`.
pub(crate) fn additions(preset: Preset, op: &Operator) -> Additions {
    let mut a = Additions::default();
    match preset {
        Preset::Rust => rust(op, &mut a),
        Preset::Node => node(op, &mut a),
        Preset::Python => python(op, &mut a),
    }
    a
}

/// The first preset whose additions let the call read `path` (a resolved
/// program outside the grant, a PATH directory), for hints.
pub fn covering(path: &Path, op: &Operator) -> Option<Preset> {
    Covering::new(op).find(path)
}

/// Every preset's additions, computed once to test many paths.
pub(crate) struct Covering(Vec<(Preset, Additions)>);

impl Covering {
    pub(crate) fn new(op: &Operator) -> Covering {
        Covering(
            Preset::ALL
                .into_iter()
                .map(|p| (p, additions(p, op)))
                .collect(),
        )
    }

    /// The first preset that lets the call read `path`.
    pub(crate) fn find(&self, path: &Path) -> Option<Preset> {
        let real = canon::canonical(path).unwrap_or_else(|_| path.to_path_buf());
        self.0.iter().find_map(|(p, a)| {
            let read = a.read.iter().any(|r| real.starts_with(r));
            (read && !a.denied.iter().any(|d| real.starts_with(d))).then_some(*p)
        })
    }
}

fn rust(op: &Operator, a: &mut Additions) {
    let cargo = a.home_dir(Some("CARGO_HOME"), &op.dir("CARGO_HOME", ".cargo"));
    let rustup = a.home_dir(Some("RUSTUP_HOME"), &op.dir("RUSTUP_HOME", ".rustup"));
    if let Some(t) = op.env.get("RUSTUP_TOOLCHAIN") {
        a.env.push(("RUSTUP_TOOLCHAIN".into(), t.into()));
    }
    if let Some(cargo) = &cargo {
        // `cargo login` keeps registry tokens here; builds never read them.
        a.deny(&cargo.join("credentials.toml"));
        a.deny(&cargo.join("credentials"));
        for (link, target) in link_targets(&cargo.join("bin")) {
            a.found(&link);
            a.read(&prefix_of(&target, op));
        }
    }
    if let Some(rustup) = &rustup {
        // `rustup toolchain link NAME DIR`: the toolchain lives at DIR.
        for (link, target) in link_targets(&rustup.join("toolchains")) {
            a.found(&link);
            a.read(&target);
        }
    }
}

fn python(op: &Operator, a: &mut Additions) {
    if let Some(pyenv) = a.home_dir(Some("PYENV_ROOT"), &op.dir("PYENV_ROOT", ".pyenv")) {
        if let Some(v) = op.env.get("PYENV_VERSION") {
            a.env.push(("PYENV_VERSION".into(), v.into()));
        }
        // A version can be a link to an interpreter installed elsewhere.
        for (link, target) in link_targets(&pyenv.join("versions")) {
            a.found(&link);
            a.read(&target);
        }
    }
    if let Some(venv) = op.env.get("VIRTUAL_ENV").map(PathBuf::from)
        && let Some(venv) = a.home_dir(Some("VIRTUAL_ENV"), &venv)
    {
        // The venv's python is a link to the interpreter that made it,
        // whose whole prefix (the standard library) must be readable.
        for (link, target) in link_targets(&venv.join("bin")) {
            a.found(&link);
            a.read(&prefix_of(&target, op));
        }
        if let Some(home) = venv_home(&venv) {
            a.found(&home.join("python3"));
            a.read(&prefix_of(&home.join("python3"), op));
        }
    }
    let local = op.home.join(".local");
    a.read(&local.join("bin"));
    for dir in list(&local.join("lib")) {
        let user_site = dir
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("python"));
        if user_site {
            a.read(&dir);
        }
    }
}

fn node(op: &Operator, a: &mut Additions) {
    if let Some(nvm) = a.home_dir(Some("NVM_DIR"), &op.dir("NVM_DIR", ".nvm")) {
        for var in ["NVM_BIN", "NVM_INC"] {
            if let Some(v) = op.env.get(var) {
                a.env.push((var.into(), v.into()));
            }
        }
        // A global npmrc of an nvm-installed node can hold registry tokens.
        for version in list(&nvm.join("versions/node")) {
            a.deny(&version.join("etc/npmrc"));
        }
    }
    a.home_dir(Some("VOLTA_HOME"), &op.dir("VOLTA_HOME", ".volta"));
    if op.env.get("FNM_DIR").is_some() {
        a.home_dir(Some("FNM_DIR"), &op.dir("FNM_DIR", ".fnm"));
    } else {
        // Older fnm used ~/.fnm, newer $XDG_DATA_HOME/fnm.
        a.home_dir(None, &op.home.join(".fnm"));
        a.home_dir(None, &op.dir("XDG_DATA_HOME", ".local/share").join("fnm"));
    }
    // fnm puts a per-shell link (under /run or ~/.local/state) on PATH.
    if let Some(shell) = op.env.get("FNM_MULTISHELL_PATH").map(Path::new)
        && let Ok(real) = canon::canonical(shell)
    {
        a.found(shell);
        a.read(&real);
        a.set("FNM_MULTISHELL_PATH", &real);
    }
    if let Some((found, prefix)) = npm_prefix(op) {
        a.found(&found);
        a.read(&prefix.join("bin"));
        a.read(&prefix.join("lib/node_modules"));
        a.deny(&prefix.join("etc/npmrc"));
        if let Ok(real) = canon::canonical(prefix) {
            a.set("NPM_CONFIG_PREFIX", &real);
        }
    }
}

/// npm's global prefix when it lies inside the home: `$NPM_CONFIG_PREFIX`,
/// else the `prefix=` line of `~/.npmrc` (only that line is read: the file
/// may hold tokens, which stay outside the grant): as found, and real.
fn npm_prefix(op: &Operator) -> Option<(PathBuf, PathBuf)> {
    let from_env = ["NPM_CONFIG_PREFIX", "npm_config_prefix"]
        .iter()
        .find_map(|v| op.env.get(v).map(str::to_string));
    let raw = from_env.or_else(|| {
        let text = std::fs::read_to_string(op.home.join(".npmrc")).ok()?;
        text.lines().find_map(|l| {
            let (k, v) = l.split_once('=')?;
            (k.trim() == "prefix").then(|| v.trim().to_string())
        })
    })?;
    let home = op.home.to_str()?;
    let expanded = match raw.strip_prefix("~/") {
        Some(rest) => format!("{home}/{rest}"),
        None => raw.replace("${HOME}", home),
    };
    let real = canon::canonical(Path::new(&expanded)).ok()?;
    op.in_home(&real).then(|| (PathBuf::from(expanded), real))
}

/// The `home = DIR` line of a venv's `pyvenv.cfg`: the base interpreter's bin dir.
fn venv_home(venv: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(venv.join("pyvenv.cfg")).ok()?;
    text.lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        (k.trim() == "home").then(|| PathBuf::from(v.trim()))
    })
}

/// The entries of `dir`, sorted; nothing when it cannot be listed.
fn list(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    out.sort();
    out
}

/// The symlinks directly in `dir` that lead out of it, with their real
/// targets. A link to a plain name (`cargo -> rustup`, `python ->
/// python3`) names an entry of the same dir, which is judged itself: not
/// resolved.
fn link_targets(dir: &Path) -> Vec<(PathBuf, PathBuf)> {
    let Ok(real_dir) = canon::canonical(dir) else {
        return Vec::new();
    };
    list(dir)
        .into_iter()
        .filter(|p| {
            std::fs::read_link(p).is_ok_and(|t| t.is_absolute() || t.components().count() != 1)
        })
        .filter_map(|p| canon::canonical(&p).ok().map(|t| (p, t)))
        .filter(|(_, t)| !t.starts_with(&real_dir))
        .collect()
}

/// What must be readable for the program at `file` (already resolved) to
/// run: the prefix `X` of `X/bin/prog` (an interpreter needs its library
/// beside its bin dir), else the program's own directory. Never `/`, the
/// home, an ancestor of it or a directory directly in it (`~/.local`
/// holds keyrings and toolcage's state): then only the file itself.
pub fn prefix_of(file: &Path, op: &Operator) -> PathBuf {
    let real = canon::canonical(file).unwrap_or_else(|_| file.to_path_buf());
    let Some(dir) = real.parent() else {
        return real;
    };
    let prefix = if dir.file_name().is_some_and(|n| n == "bin") {
        dir.parent().unwrap_or(dir)
    } else {
        dir
    };
    let home = canon::canonical(op.home).unwrap_or_else(|_| op.home.to_path_buf());
    if prefix.parent().is_none() || home.starts_with(prefix) || prefix.parent() == Some(&home) {
        real
    } else {
        prefix.to_path_buf()
    }
}
