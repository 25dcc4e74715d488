//! Toolchains installed in the operator's home under `--profile ci`:
//! `--with rust|node|python`, the call's PATH, and the hints that name the
//! flag when a program is out of reach. Each real-toolchain test prints why
//! it skips when the toolchain is not installed; the fake-home tests always
//! run.

use crate::common;
use crate::common::{status, stderr as err, stdout_trimmed as out};

use common::{Project, toolcage_env as toolcage};
use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Like [`toolcage`], without the toolchain variables of this process
/// (rustup sets `CARGO_HOME` for `cargo test`, a shell may set
/// `PYENV_ROOT`): for the fake homes.
fn isolated(p: &Project, env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_toolcage"));
    for name in toolcage::policy::presets::HostEnv::NAMES {
        cmd.env_remove(name);
    }
    cmd.arg("-C")
        .arg(&p.dir)
        .args(args)
        .current_dir(&p.dir)
        .env("XDG_STATE_HOME", p.state_dir())
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

/// The first executable `name` on this process's PATH.
fn which(name: &str) -> Option<PathBuf> {
    std::env::var("PATH").ok()?.split(':').find_map(|d| {
        let p = Path::new(d).join(name);
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            .then_some(p)
    })
}

fn home() -> PathBuf {
    PathBuf::from(std::env::var("HOME").unwrap_or_default())
}

/// Whether `p` leads (through its links) into the home.
fn in_home(p: &Path) -> bool {
    let home = home().canonicalize().unwrap_or_default();
    home.parent().is_some() && p.canonicalize().is_ok_and(|r| r.starts_with(&home))
}

fn exe(path: &Path, body: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, body).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn cargo_builds_offline_under_ci_with_the_rust_preset() {
    let Some(cargo) = which("cargo") else {
        eprintln!("skipped: no cargo on PATH");
        return;
    };
    let p = Project::new("preset-rust");
    p.write(
        "Cargo.toml",
        "[package]\nname = \"hello\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\n",
    );
    p.write(
        "src/main.rs",
        "fn main() {\n    println!(\"hello from cargo\");\n}\n",
    );
    let build = [
        "exec",
        "--profile",
        "ci",
        "--with",
        "rust",
        "--timeout",
        "10m",
        "--",
        "cargo",
        "build",
        "--offline",
    ];
    let o = toolcage(&p, &[], &build);
    assert_eq!(status(&o), 0, "{}", err(&o));
    let o = toolcage(
        &p,
        &[],
        &["exec", "--profile", "ci", "--", "./target/debug/hello"],
    );
    assert_eq!(out(&o), "hello from cargo", "{}", err(&o));

    // Without the preset a cargo from the home cannot run: refused or
    // replaced by the system's, either way naming the flag.
    if !in_home(&cargo) {
        eprintln!(
            "negative control skipped: {} is not in the home",
            cargo.display()
        );
        return;
    }
    let o = toolcage(
        &p,
        &[],
        &["exec", "--profile", "ci", "--", "cargo", "--version"],
    );
    assert!(err(&o).contains("(fix: --with rust)"), "{}", err(&o));
    if let Some(rustup) = which("rustup").filter(|r| in_home(r)) {
        let o = toolcage(
            &p,
            &[],
            &["exec", "--profile", "ci", "--", "rustup", "--version"],
        );
        assert_eq!(status(&o), 127, "{}", err(&o));
        let e = err(&o);
        assert!(
            e.contains(&rustup.display().to_string()) && e.contains("(fix: --with rust)"),
            "{e}"
        );
        let o = toolcage(
            &p,
            &[],
            &[
                "exec",
                "--profile",
                "ci",
                "--with",
                "rust",
                "--",
                "rustup",
                "--version",
            ],
        );
        assert_eq!(status(&o), 0, "{}", err(&o));
    }
}

/// `python3 -m venv DIR` with the host's python3; `None` when it fails.
fn venv(dir: &Path) -> Option<()> {
    let o = Command::new("python3")
        .args(["-m", "venv", "--without-pip"])
        .arg(dir)
        .output()
        .ok()?;
    o.status.success().then_some(())
}

#[test]
fn an_active_venv_outside_the_project_runs_with_the_python_preset() {
    let p = Project::new("preset-venv");
    let venv_dir = p.state_dir().join("venv");
    if venv(&venv_dir).is_none() {
        eprintln!("skipped: python3 -m venv is not available");
        return;
    }
    let venv_dir = venv_dir.canonicalize().unwrap();
    let path = format!(
        "{}:{}",
        venv_dir.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let env = [
        ("VIRTUAL_ENV", venv_dir.to_str().unwrap()),
        ("PATH", path.as_str()),
    ];
    let code = "import sys; print(sys.prefix)";
    let o = toolcage(
        &p,
        &env,
        &[
            "exec",
            "--profile",
            "ci",
            "--with",
            "python",
            "--",
            "python",
            "-c",
            code,
        ],
    );
    assert_eq!(out(&o), venv_dir.display().to_string(), "{}", err(&o));
    // Negative control: the venv's bin dir is left out of the call's PATH.
    let o = toolcage(
        &p,
        &env,
        &["exec", "--profile", "ci", "--", "python", "-c", code],
    );
    assert_ne!(out(&o), venv_dir.display().to_string());
    let e = err(&o);
    assert!(
        e.contains(&venv_dir.join("bin/python").display().to_string()),
        "{e}"
    );
    assert!(e.contains("(fix: --with python)"), "{e}");
}

#[test]
fn a_project_venv_made_by_a_home_python_names_its_target_and_the_preset() {
    let p = Project::new("preset-project-venv");
    if venv(&p.path(".venv")).is_none() {
        eprintln!("skipped: python3 -m venv is not available");
        return;
    }
    let python = p.path(".venv/bin/python");
    let real = python.canonicalize().unwrap();
    let code = "import sys; print(sys.prefix)";
    let run = |with: &[&str]| {
        let mut args = vec!["exec", "--profile", "ci"];
        args.extend_from_slice(with);
        args.extend_from_slice(&["--", ".venv/bin/python", "-c", code]);
        toolcage(&p, &[], &args)
    };
    let o = run(&["--with", "python"]);
    assert_eq!(
        out(&o),
        p.path(".venv").display().to_string(),
        "{}",
        err(&o)
    );
    if !in_home(&real) {
        // A system python: nothing to grant, it runs as is.
        eprintln!(
            "negative control skipped: the venv's python is {}",
            real.display()
        );
        let o = run(&[]);
        assert_eq!(status(&o), 0, "{}", err(&o));
        return;
    }
    let o = run(&[]);
    assert_eq!(status(&o), 126, "{}", err(&o));
    let e = err(&o);
    assert!(
        e.contains(&format!("resolves to {}", real.display())),
        "the blocker is the link's target: {e}"
    );
    assert!(e.contains("(fix: --with python)"), "{e}");
    assert!(!e.contains("is the program inside a read root"), "{e}");
}

#[test]
fn pyenv_python3_is_the_pyenv_one_with_the_preset() {
    let root = std::env::var("PYENV_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|_| home().join(".pyenv"));
    let shim = root.join("shims/python3");
    if which("python3").as_deref() != Some(shim.as_path()) {
        eprintln!("skipped: python3 on PATH is not a pyenv shim");
        return;
    }
    let p = Project::new("preset-pyenv");
    let code = "import sys; print(sys.executable)";
    let o = toolcage(
        &p,
        &[],
        &[
            "exec",
            "--profile",
            "ci",
            "--with",
            "python",
            "--",
            "python3",
            "-c",
            code,
        ],
    );
    let root = root.canonicalize().unwrap();
    assert!(
        Path::new(&out(&o)).starts_with(&root),
        "{} {}",
        out(&o),
        err(&o)
    );
    // Without it, not silently: the note names the shim and the flag.
    let o = toolcage(
        &p,
        &[],
        &["exec", "--profile", "ci", "--", "python3", "-c", code],
    );
    assert!(!Path::new(&out(&o)).starts_with(&root), "{}", out(&o));
    let e = err(&o);
    assert!(
        e.contains(&shim.display().to_string()) && e.contains("(fix: --with python)"),
        "{e}"
    );
}

/// A fake home with an nvm-installed `node` (a script) that is first on
/// PATH, as `nvm use` leaves it.
struct FakeNvm {
    home: PathBuf,
    bin: PathBuf,
    path: String,
}

fn fake_nvm(p: &Project) -> FakeNvm {
    let home = p.state_dir().join("home");
    let bin = home.join(".nvm/versions/node/v22.0.0/bin");
    exe(
        &bin.join("node"),
        "#!/bin/sh\necho \"fake node $NVM_DIR\"\n",
    );
    let home = home.canonicalize().unwrap();
    let bin = bin.canonicalize().unwrap();
    let path = format!("{}:/usr/local/bin:/usr/bin:/bin", bin.display());
    FakeNvm { home, bin, path }
}

#[test]
fn node_from_a_fake_nvm_home_runs_with_the_node_preset() {
    let p = Project::new("preset-nvm");
    let nvm = fake_nvm(&p);
    let env = [
        ("HOME", nvm.home.to_str().unwrap()),
        ("NVM_BIN", nvm.bin.to_str().unwrap()),
        ("PATH", nvm.path.as_str()),
    ];
    let o = isolated(
        &p,
        &env,
        &["exec", "--profile", "ci", "--with", "node", "--", "node"],
    );
    assert_eq!(
        out(&o),
        format!("fake node {}", nvm.home.join(".nvm").display()),
        "{}",
        err(&o)
    );
    let o = isolated(&p, &env, &["exec", "--profile", "ci", "--", "node"]);
    assert!(!out(&o).starts_with("fake node"), "{}", out(&o));
    assert!(err(&o).contains("(fix: --with node)"), "{}", err(&o));
}

#[test]
fn policy_previews_what_a_preset_adds_and_the_path_it_drops() {
    let p = Project::new("preset-policy");
    let home = p.state_dir().join("home");
    std::fs::create_dir_all(home.join(".cargo/bin")).unwrap();
    std::fs::create_dir_all(home.join(".rustup")).unwrap();
    std::fs::create_dir_all(home.join(".pyenv/shims")).unwrap();
    std::fs::write(home.join(".cargo/credentials.toml"), "token = \"t\"\n").unwrap();
    let home = home.canonicalize().unwrap();
    let shims = home.join(".pyenv/shims").display().to_string();
    let path = format!("{shims}:/usr/bin");
    let env = [("HOME", home.to_str().unwrap()), ("PATH", path.as_str())];

    let o = isolated(&p, &env, &["policy", "--with", "rust"]);
    assert_eq!(status(&o), 0, "{}", err(&o));
    let text = out(&o);
    let cargo = home.join(".cargo").display().to_string();
    for (key, value) in [
        ("with", "rust".to_string()),
        ("read", cargo.clone()),
        ("read", home.join(".rustup").display().to_string()),
        ("denied", format!("{cargo}/credentials.toml")),
        ("env.set", format!("CARGO_HOME={cargo}")),
    ] {
        let found = text.lines().any(|l| {
            let mut w = l.split_whitespace();
            w.next() == Some(key) && w.next() == Some(value.as_str()) && l.contains("--with)")
        });
        assert!(found, "no '{key} {value} (... --with)' in:\n{text}");
    }
    assert!(
        text.contains(&format!("{shims}  (fix: --with python)")),
        "{text}"
    );

    let o = isolated(
        &p,
        &env,
        &["policy", "--json", "--with", "rust", "--with", "python"],
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(
        v["grant"]["read"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r == cargo.as_str())
    );
    assert_eq!(
        v["path_dropped"],
        serde_json::json!([]),
        "the python preset reads the shims"
    );
    let o = isolated(&p, &env, &["policy", "--json"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        v["path_dropped"],
        serde_json::json!([{"dir": shims, "fix": "--with python"}])
    );

    // exec --json carries the same list.
    let o = isolated(&p, &env, &["exec", "--json", "--", "true"]);
    let last = err(&o).lines().last().unwrap_or_default().to_string();
    let v: Value = serde_json::from_str(&last).unwrap_or_else(|e| panic!("{e}: {last}"));
    assert_eq!(v["path_dropped"][0]["dir"], shims.as_str());
}

#[test]
fn an_unknown_preset_is_a_one_line_error_naming_the_valid_ones() {
    let p = Project::new("preset-unknown");
    let file = p.write("build.toml", "# build\nwith = [\"nodejs\"]\n");
    let o = toolcage(&p, &[], &["exec", "--policy", "build.toml", "--", "true"]);
    assert_eq!(status(&o), 125);
    assert_eq!(
        err(&o).trim(),
        format!(
            "toolcage: policy {}:2: with: unknown preset \"nodejs\" (valid presets: rust, node, python)",
            file.display()
        )
    );
    for cmd in ["exec", "policy"] {
        let mut args = vec![cmd, "--with", "go"];
        if cmd == "exec" {
            args.extend_from_slice(&["--", "true"]);
        }
        let o = toolcage(&p, &[], &args);
        // A usage error is 125 on every command (docs/cli.md).
        assert_eq!(status(&o), 125, "{}", err(&o));
        assert!(err(&o).contains("rust, node, python"), "{}", err(&o));
    }
}

#[test]
fn call_json_lists_the_dropped_path_dirs_too() {
    let p = Project::new("preset-call");
    exe(
        &p.path(".agents/tools/hello"),
        "#!/bin/sh\n# @description Say hello.\necho hello\n",
    );
    let hidden = p.state_dir().join("bin");
    std::fs::create_dir_all(&hidden).unwrap();
    let hidden = hidden.canonicalize().unwrap().display().to_string();
    let path = format!("{hidden}:/usr/bin:/bin");
    let o = toolcage(&p, &[("PATH", path.as_str())], &["call", "hello", "--json"]);
    assert_eq!(status(&o), 0, "{}", err(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["text"], "hello\n");
    assert_eq!(
        v["path_dropped"],
        serde_json::json!([{"dir": hidden, "fix": format!("--read {hidden}")}])
    );
}
