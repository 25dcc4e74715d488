//! The diagnoses a newcomer meets first, through the binary, each with
//! its control: the failure names the flag or the step that fixes it, and
//! the same command with that fix works.
//!
//! - a program on `PATH` whose `#!` interpreter the grant cannot read
//!   (an activated venv's `pytest`), for `exec` and for an upstream server;
//! - the `ci` profile passes the build variables CI systems set, never a
//!   token;
//! - a package manager refused the network under `--profile ci`: fetch
//!   outside first;
//! - git without an identity: the `--env` lines, or `--read ~/.gitconfig`;
//! - a variable the command reads that was dropped: `--env NAME`;
//! - `localhost` in domain mode is the call's own loopback;
//! - an http tool refused at run time (exit 3) is recorded as denied.

use crate::{common, gateway_support};

use common::{Project, namespace_free_run};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Output;

fn run(p: &Project, env: &[(&str, &str)], args: &[&str]) -> Output {
    common::namespace_free_if_asked();
    common::toolcage_env(p, env, args)
}

fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A shell copied outside the project (`<dir>/interp/bin/python9`), the
/// stand-in for a toolchain's interpreter under `~/.pyenv`, and a script in
/// the project's `.venv/bin/NAME` whose `#!` line names it.
fn venv_script(p: &Project, outside: &Path, name: &str) -> PathBuf {
    let bin = outside.join("interp/bin");
    std::fs::create_dir_all(&bin).unwrap();
    let interpreter = bin.join("python9");
    std::fs::copy("/bin/sh", &interpreter).unwrap();
    let script = p.write(
        &format!(".venv/bin/{name}"),
        &format!("#!{}\necho ran as {name}\n", interpreter.display()),
    );
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script
}

#[test]
fn a_program_on_path_whose_interpreter_is_unreadable_names_the_read_it_needs() {
    let p = Project::new("diag-shebang");
    let outside = tempfile::tempdir().unwrap();
    let outside = outside.path().canonicalize().unwrap();
    venv_script(&p, &outside, "mytool");
    // The venv activated: its bin first on PATH.
    let path = format!(
        "{}:{}",
        p.path(".venv/bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let o = run(&p, &[("PATH", &path)], &["exec", "--", "mytool"]);
    let e = err(&o);
    // Not there in the constructed root (127); namespace-free, Landlock
    // refuses it (126). Either way, the interpreter and its read.
    let status = if namespace_free_run() { 126 } else { 127 };
    assert_eq!(code(&o), status, "{e}");
    let read = format!("--read {}", outside.join("interp").display());
    assert!(
        e.contains("#! line's interpreter") && e.contains(&read),
        "{e}"
    );
    assert!(!e.contains("command not found"), "{e}");
    // Control: with the read it names, the same command runs.
    let o = run(
        &p,
        &[("PATH", &path)],
        &[
            "exec",
            "--read",
            &outside.join("interp").display().to_string(),
            "--",
            "mytool",
        ],
    );
    assert_eq!(code(&o), 0, "{}", err(&o));
    assert_eq!(out(&o), "ran as mytool\n");
}

#[test]
fn an_upstream_whose_interpreter_is_unreadable_names_the_upstream_line() {
    common::namespace_free_if_asked();
    // `default` runs namespace-free where namespaces are refused
    // (`untrusted`, a server's usual start, refuses to).
    let start = "[upstreams.fx]\nprofile = \"default\"\n";
    let f = gateway_support::Fixture::new("diag-up", json!({}), start);
    let outside = tempfile::tempdir().unwrap();
    let outside = outside.path().canonicalize().unwrap();
    let p = Project { dir: f.root() };
    let script = venv_script(&p, &outside, "srv");
    std::mem::forget(p); // the fixture owns the directory
    f.set_server(json!({"command": script.display().to_string(), "args": []}));
    let reason = |f: &gateway_support::Fixture| {
        let (code, o, e) = f.run(&["upstreams", "--json"]);
        assert_eq!(code, 0, "{e}");
        let v: Value = serde_json::from_str(&o).unwrap();
        v[0]["reason"].as_str().unwrap_or_default().to_string()
    };
    let why = reason(&f);
    let line = format!(
        "add_read = [\"{}\"] in [upstreams.fx.fs]",
        outside.join("interp").display()
    );
    assert!(
        why.contains("#! line's interpreter") && why.contains(&line),
        "{why}"
    );
    assert!(
        !why.contains(".venv/bin\"]"),
        "not the script's own directory: {why}"
    );
    // Control: with that line the server starts (this one is no MCP
    // server: it runs, prints and exits).
    f.write_outside(
        "policy.toml",
        &format!(
            "{start}\n[upstreams.fx.fs]\nadd_read = [\"{}\"]\n",
            outside.join("interp").display()
        ),
    );
    let why = reason(&f);
    assert!(!why.contains("cannot start"), "{why}");
}

#[test]
fn the_ci_profile_passes_build_variables_and_never_a_token() {
    let p = Project::new("diag-ci-env");
    let env = [
        ("CI", "true"),
        ("RUST_BACKTRACE", "1"),
        ("CARGO_TERM_COLOR", "never"),
        ("NO_COLOR", "1"),
        ("GITHUB_TOKEN", "ghp_secret"),
        ("CI_JOB_TOKEN", "glcbt-secret"),
    ];
    let show = "echo \"[$CI] [$RUST_BACKTRACE] [$CARGO_TERM_COLOR] [$NO_COLOR] [$GITHUB_TOKEN] [$CI_JOB_TOKEN]\"";
    let o = run(
        &p,
        &env,
        &["exec", "--profile", "ci", "--", "sh", "-c", show],
    );
    assert_eq!(code(&o), 0, "{}", err(&o));
    assert_eq!(out(&o), "[true] [1] [never] [1] [] []\n");
    // Control: the default profile passes none of them.
    let o = run(&p, &env, &["exec", "--", "sh", "-c", show]);
    assert_eq!(code(&o), 0, "{}", err(&o));
    assert_eq!(out(&o), "[] [] [] [] [] []\n");
}

/// `/usr/bin/cargo` (or `/usr/local/bin/cargo`): a package manager the
/// `ci` profile can run without `--with rust`.
fn system_cargo() -> &'static str {
    ["/usr/bin/cargo", "/usr/local/bin/cargo"]
        .into_iter()
        .find(|c| Path::new(c).exists())
        .expect("a system cargo (apt install cargo) for the package-manager diagnosis")
}

#[test]
fn a_package_manager_refused_the_network_under_ci_is_told_to_fetch_first() {
    let p = Project::new("diag-fetch");
    p.write(
        "Cargo.toml",
        "[package]\nname = \"c\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\nitoa = \"1\"\n",
    );
    p.write("src/main.rs", "fn main() {}\n");
    let o = run(
        &p,
        &[],
        &[
            "exec",
            "--explain",
            "--profile",
            "ci",
            "--",
            system_cargo(),
            "fetch",
        ],
    );
    let e = err(&o);
    assert_ne!(code(&o), 0, "{e}");
    assert!(
        e.contains("blocked: the network") && e.contains("fetch dependencies before the run"),
        "{e}"
    );
    // Control: a network refusal that is no package manager's keeps the
    // flag that grants the network.
    let o = run(
        &p,
        &[],
        &[
            "exec",
            "--explain",
            "--profile",
            "ci",
            "--",
            "curl",
            "-sS",
            "http://example.com/",
        ],
    );
    let e = err(&o);
    assert_ne!(code(&o), 0, "{e}");
    assert!(e.contains("to allow it: --allow-net"), "{e}");
    assert!(!e.contains("fetch dependencies"), "{e}");
}

#[test]
fn git_without_an_identity_names_the_env_lines_and_the_read() {
    let p = Project::new("diag-git");
    // user.useConfigOnly: git never guesses an identity from the host name.
    let commit = "git init -q r && cd r && echo a > a && git add a && \
                  git -c user.useConfigOnly=true commit -qm first && git log --format=%an";
    let o = run(&p, &[], &["exec", "--explain", "--", "sh", "-c", commit]);
    let e = err(&o);
    assert_ne!(code(&o), 0, "{e}");
    assert!(
        e.contains("blocked: git's identity")
            && e.contains("--env GIT_AUTHOR_NAME=... --env GIT_AUTHOR_EMAIL=...")
            && e.contains("GIT_COMMITTER_EMAIL")
            && e.contains("--read ~/.gitconfig"),
        "{e}"
    );
    // Control: with the variables it names, the commit is made.
    let o = run(
        &p,
        &[],
        &[
            "exec",
            "--explain",
            "--env",
            "GIT_AUTHOR_NAME=Ada",
            "--env",
            "GIT_AUTHOR_EMAIL=ada@example.com",
            "--env",
            "GIT_COMMITTER_NAME=Ada",
            "--env",
            "GIT_COMMITTER_EMAIL=ada@example.com",
            "--",
            "sh",
            "-c",
            &commit.replace("-q r ", "-q r2 ").replace("cd r ", "cd r2 "),
        ],
    );
    assert_eq!(code(&o), 0, "{}", err(&o));
    assert_eq!(out(&o), "Ada\n");
    assert!(!err(&o).contains("git's identity"), "{}", err(&o));
}

#[test]
fn a_variable_the_command_reads_and_did_not_get_is_named_with_env() {
    let p = Project::new("diag-env");
    let script = "set -u; echo \"[$TOOLCAGE_DIAG_SETTING]\"";
    let env = [("TOOLCAGE_DIAG_SETTING", "on")];
    let o = run(&p, &env, &["exec", "--explain", "--", "sh", "-c", script]);
    let e = err(&o);
    assert_ne!(code(&o), 0, "{e}");
    assert!(
        e.contains("blocked: $TOOLCAGE_DIAG_SETTING") && e.contains("--env TOOLCAGE_DIAG_SETTING"),
        "{e}"
    );
    // Control: with the flag it names, the command gets it.
    let o = run(
        &p,
        &env,
        &[
            "exec",
            "--env",
            "TOOLCAGE_DIAG_SETTING",
            "--",
            "sh",
            "-c",
            script,
        ],
    );
    assert_eq!(code(&o), 0, "{}", err(&o));
    assert_eq!(out(&o), "[on]\n");
    // Control: a variable unset outside too is no one's doing.
    let o = run(&p, &[], &["exec", "--explain", "--", "sh", "-c", script]);
    assert!(!err(&o).contains("blocked: $"), "{}", err(&o));
}

/// A one-answer HTTP server on the host's loopback.
fn loopback_server() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        for mut s in listener.incoming().flatten() {
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let _ = s.write_all(b"HTTP/1.0 200 OK\r\nContent-Length: 9\r\n\r\nfrom host");
        }
    });
    port
}

#[test]
fn localhost_in_domain_mode_is_explained() {
    let p = Project::new("diag-localhost");
    let port = loopback_server();
    let url = format!("http://localhost:{port}/");
    let o = run(
        &p,
        &[],
        &[
            "exec",
            "--explain",
            "--allow-domain",
            "localhost",
            "--",
            "curl",
            "-sS",
            &url,
        ],
    );
    let e = err(&o);
    if namespace_free_run() {
        // Domain mode refuses to run without the call's own network
        // namespace, and says so.
        assert_eq!(code(&o), 125, "{e}");
        assert!(e.contains("\"domains\""), "{e}");
        return;
    }
    assert_eq!(code(&o), 7, "curl: could not connect: {e}");
    let fix = format!("--allow-domain 127.0.0.1:{port}");
    assert!(
        e.contains(&format!("blocked: localhost:{port}")) && e.contains(&fix),
        "{e}"
    );
    // Control: what it names reaches the host's server.
    let o = run(
        &p,
        &[],
        &[
            "exec",
            "--allow-domain",
            &format!("127.0.0.1:{port}"),
            "--",
            "curl",
            "-sS",
            "--noproxy",
            "",
            &format!("http://127.0.0.1:{port}/"),
        ],
    );
    assert_eq!(code(&o), 0, "{}", err(&o));
    assert_eq!(out(&o), "from host");
}

#[test]
fn an_http_tool_refused_with_exit_3_is_recorded_as_denied() {
    let p = Project::new("diag-http-audit");
    p.write(
        "tools.toml",
        "[[tools]]\nname = \"health\"\ndescription = \"GET a status page\"\nexecutor = \"http\"\n\
         method = \"GET\"\nurl = \"https://example.com/status\"\nrequires_approval = false\n\n\
         [[tools]]\nname = \"hello\"\ndescription = \"Say hello\"\nexecutor = \"shell\"\n\
         command = \"echo hello\"\nrequires_approval = false\n",
    );
    let last = |p: &Project| -> Value {
        let o = run(p, &[], &["audit", "--json"]);
        assert_eq!(code(&o), 0, "{}", err(&o));
        serde_json::from_str(out(&o).lines().last().unwrap()).unwrap()
    };
    let o = run(&p, &[], &["call", "health"]);
    assert_eq!(code(&o), 3, "{}", err(&o));
    let r = last(&p);
    assert_eq!(r["decision"]["kind"], "denied", "{r}");
    assert_eq!(r["decision"]["reason"], "grant_denied", "{r}");
    assert!(
        r["call_id"].is_string(),
        "paired with its started record: {r}"
    );
    assert_eq!(r["denials"][0]["layer"], "policy", "{r}");
    // Control: a call that ran is recorded as allowed.
    let o = run(&p, &[], &["call", "hello"]);
    assert_eq!(code(&o), 0, "{}", err(&o));
    assert_eq!(last(&p)["decision"]["kind"], "allowed");
}
