//! Toolchain presets resolved against a fake home: the dirs that exist,
//! the real targets of their symlinks, the variables, the secrets denied.

use crate::presets::{self, Additions, HostEnv, Operator, Preset};
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

/// A scratch root holding a fake home (`home/`) and places outside it.
struct Fake {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl Fake {
    fn new() -> Fake {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir(root.join("home")).unwrap();
        Fake { _dir: dir, root }
    }
    fn p(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }
    fn dir(&self, rel: &str) -> PathBuf {
        let p = self.p(rel);
        std::fs::create_dir_all(&p).unwrap();
        p
    }
    fn file(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.p(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        p
    }
    fn link(&self, target: &Path, rel: &str) -> PathBuf {
        let p = self.p(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        symlink(target, &p).unwrap();
        p
    }
    fn add(&self, preset: Preset, vars: &[(&str, &str)]) -> Additions {
        let env = HostEnv::from_pairs(vars.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let home = self.p("home");
        presets::additions(
            preset,
            &Operator {
                home: &home,
                env: &env,
            },
        )
    }
}

fn env_of<'a>(a: &'a Additions, name: &str) -> Option<&'a str> {
    a.env
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

#[test]
fn names_parse_and_unknown_ones_list_the_valid_presets() {
    assert_eq!(Preset::parse("python"), Ok(Preset::Python));
    assert_eq!(Preset::Rust.flag(), "--with rust");
    assert_eq!(
        Preset::parse("nodejs").unwrap_err(),
        "unknown preset \"nodejs\" (valid presets: rust, node, python)"
    );
}

#[test]
fn nothing_installed_adds_nothing() {
    let f = Fake::new();
    for p in Preset::ALL {
        assert_eq!(f.add(p, &[]), Additions::default(), "{p:?}");
    }
}

#[test]
fn rust_reads_cargo_and_rustup_homes_and_denies_registry_tokens() {
    let f = Fake::new();
    let cargo = f.dir("home/.cargo/bin");
    f.file("home/.cargo/bin/rustup", "");
    f.link(Path::new("rustup"), "home/.cargo/bin/cargo");
    let creds = f.file("home/.cargo/credentials.toml", "token = \"x\"");
    f.dir("home/.rustup/toolchains/stable/bin");
    // `rustup toolchain link dev /elsewhere/dev`
    let dev = f.dir("elsewhere/dev");
    f.link(&dev, "home/.rustup/toolchains/dev");
    // A cargo-installed tool linked to a program outside the home.
    let tool = f.file("opt/tool/bin/tool", "");
    f.link(&tool, "home/.cargo/bin/tool");

    let a = f.add(Preset::Rust, &[("RUSTUP_TOOLCHAIN", "nightly")]);
    assert_eq!(
        a.read,
        [
            cargo.parent().unwrap().to_path_buf(),
            f.p("home/.rustup"),
            f.p("opt/tool"),
            dev
        ]
    );
    assert_eq!(a.denied, [creds]);
    assert_eq!(
        env_of(&a, "CARGO_HOME"),
        f.p("home/.cargo").to_str(),
        "the operator's default, named for inside (where HOME differs)"
    );
    assert_eq!(env_of(&a, "RUSTUP_HOME"), f.p("home/.rustup").to_str());
    assert_eq!(env_of(&a, "RUSTUP_TOOLCHAIN"), Some("nightly"));

    // $CARGO_HOME and $RUSTUP_HOME win over the defaults; a symlinked home
    // is read and named by its real path.
    let real = f.dir("data/cargo");
    let linked = f.link(&real, "home/cargo-link");
    let a = f.add(
        Preset::Rust,
        &[
            ("CARGO_HOME", linked.to_str().unwrap()),
            ("RUSTUP_HOME", f.p("nowhere").to_str().unwrap()),
        ],
    );
    assert_eq!(a.read, std::slice::from_ref(&real));
    assert_eq!(env_of(&a, "CARGO_HOME"), real.to_str());
    assert_eq!(env_of(&a, "RUSTUP_HOME"), None, "a missing home is not set");
}

#[test]
fn python_reads_pyenv_an_active_venv_with_its_interpreter_and_the_user_site() {
    let f = Fake::new();
    let version = f.dir("home/.pyenv/versions/3.11.7/bin");
    let interp = f.file("home/.pyenv/versions/3.11.7/bin/python3.11", "");
    f.dir("home/.pyenv/shims");
    // A pyenv version that is a link to an interpreter elsewhere.
    let system = f.dir("usr-like/python3.9");
    f.link(&system, "home/.pyenv/versions/system-3.9");
    // An active venv outside the project, made by pyenv's python.
    let venv = f.dir("work/venv/bin");
    f.link(&interp, "work/venv/bin/python3");
    f.link(Path::new("python3"), "work/venv/bin/python");
    f.file(
        "work/venv/pyvenv.cfg",
        &format!("home = {}\nversion = 3.11.7\n", version.display()),
    );
    let local_bin = f.dir("home/.local/bin");
    let site = f.dir("home/.local/lib/python3.11");
    f.dir("home/.local/lib/other");
    f.dir("home/.local/share/keyrings");

    let venv = venv.parent().unwrap().to_path_buf();
    let a = f.add(
        Preset::Python,
        &[
            ("VIRTUAL_ENV", venv.to_str().unwrap()),
            ("PYENV_VERSION", "3.11.7"),
        ],
    );
    assert_eq!(
        a.read,
        [f.p("home/.pyenv"), system, venv.clone(), local_bin, site]
    );
    assert!(a.denied.is_empty());
    assert_eq!(env_of(&a, "PYENV_ROOT"), f.p("home/.pyenv").to_str());
    assert_eq!(env_of(&a, "PYENV_VERSION"), Some("3.11.7"));
    assert_eq!(env_of(&a, "VIRTUAL_ENV"), venv.to_str());

    // Without pyenv the venv's links bring its interpreter's prefix.
    let g = Fake::new();
    let interp = g.file("opt/py/bin/python3.12", "");
    let venv = g.dir("venv/bin");
    g.link(&interp, "venv/bin/python");
    let venv = venv.parent().unwrap().to_path_buf();
    let a = g.add(Preset::Python, &[("VIRTUAL_ENV", venv.to_str().unwrap())]);
    assert_eq!(a.read, [venv, g.p("opt/py")]);
}

#[test]
fn node_reads_nvm_volta_fnm_and_a_home_npm_prefix_never_npmrc() {
    let f = Fake::new();
    let v20 = f.dir("home/.nvm/versions/node/v20.1.0/bin");
    let npmrc = f.file(
        "home/.nvm/versions/node/v20.1.0/etc/npmrc",
        "//r/:_authToken=x",
    );
    f.dir("home/.volta/bin");
    f.dir("home/.local/share/fnm/node-versions");
    // fnm's per-shell link on PATH, outside the home.
    let shell = f.link(
        &f.p("home/.local/share/fnm/node-versions"),
        "run/fnm_multishells/1_2",
    );
    // npm's global prefix from ~/.npmrc (which also holds a token).
    f.file(
        "home/.npmrc",
        "//registry.npmjs.org/:_authToken=secret\nprefix=~/.npm-global\n",
    );
    let global_bin = f.dir("home/.npm-global/bin");
    let global_lib = f.dir("home/.npm-global/lib/node_modules");
    f.dir("home/.npm-global/etc");
    let global_rc = f.file("home/.npm-global/etc/npmrc", "x");

    let a = f.add(
        Preset::Node,
        &[
            ("NVM_BIN", v20.to_str().unwrap()),
            ("FNM_MULTISHELL_PATH", shell.to_str().unwrap()),
        ],
    );
    assert_eq!(
        a.read,
        [
            f.p("home/.nvm"),
            f.p("home/.volta"),
            f.p("home/.local/share/fnm"),
            global_bin,
            global_lib
        ]
    );
    assert!(!a.read.iter().any(|r| r == &f.p("home")));
    assert_eq!(a.denied, [npmrc, global_rc]);
    assert_eq!(env_of(&a, "NVM_DIR"), f.p("home/.nvm").to_str());
    assert_eq!(env_of(&a, "NVM_BIN"), v20.to_str());
    assert_eq!(env_of(&a, "VOLTA_HOME"), f.p("home/.volta").to_str());
    assert_eq!(
        env_of(&a, "FNM_MULTISHELL_PATH"),
        f.p("home/.local/share/fnm/node-versions").to_str()
    );
    assert_eq!(
        env_of(&a, "NPM_CONFIG_PREFIX"),
        f.p("home/.npm-global").to_str()
    );

    // A prefix outside the home (/usr) is the system's: nothing to add.
    let a = f.add(Preset::Node, &[("NPM_CONFIG_PREFIX", "/usr")]);
    assert_eq!(env_of(&a, "NPM_CONFIG_PREFIX"), None);
}

#[test]
fn a_program_prefix_is_never_the_home_or_a_dir_directly_in_it() {
    let f = Fake::new();
    let env = HostEnv::default();
    let home = f.p("home");
    let host = Operator {
        home: &home,
        env: &env,
    };
    let py = f.file("opt/py/bin/python3", "");
    assert_eq!(presets::prefix_of(&py, &host), f.p("opt/py"));
    let tool = f.file("opt/tools/tool", "");
    assert_eq!(presets::prefix_of(&tool, &host), f.p("opt/tools"));
    for rel in ["home/bin/python3", "home/.local/bin/python3", "home/tool"] {
        let p = f.file(rel, "");
        assert_eq!(presets::prefix_of(&p, &host), p, "{rel}");
    }
    let deep = f.file("home/.pyenv/versions/3.12/bin/python3", "");
    assert_eq!(
        presets::prefix_of(&deep, &host),
        f.p("home/.pyenv/versions/3.12")
    );
}

#[test]
fn covering_names_the_preset_that_grants_a_path_but_not_its_secrets() {
    let f = Fake::new();
    f.dir("home/.cargo/bin");
    let creds = f.file("home/.cargo/credentials.toml", "");
    let shim = f.file("home/.pyenv/shims/python3", "");
    let env = HostEnv::default();
    let home = f.p("home");
    let host = Operator {
        home: &home,
        env: &env,
    };
    assert_eq!(presets::covering(&shim, &host), Some(Preset::Python));
    assert_eq!(
        presets::covering(&f.p("home/.cargo/bin"), &host),
        Some(Preset::Rust)
    );
    assert_eq!(presets::covering(&creds, &host), None);
    assert_eq!(presets::covering(&f.p("home/.ssh"), &host), None);
}
