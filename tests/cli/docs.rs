//! `toolcage completions SHELL` and `toolcage man [COMMAND]`, generated
//! from the CLI definition itself.
use crate::common::stdout as out;

use std::process::{Command, Output};

fn toolcage(args: &[&str]) -> Output {
    let dir = tempfile::tempdir().unwrap();
    Command::new(env!("CARGO_BIN_EXE_toolcage"))
        .args(args)
        .current_dir(dir.path())
        .output()
        .unwrap()
}

#[test]
fn completions_for_every_shell_name_the_commands_and_flags() {
    let bash = toolcage(&["completions", "bash"]);
    assert_eq!(bash.status.code(), Some(0));
    let text = out(&bash);
    assert!(text.contains("toolcage") && text.contains("exec"), "{text}");
    assert!(
        text.contains("--explain") && text.contains("--quiet"),
        "{text}"
    );
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let o = toolcage(&["completions", shell]);
        assert_eq!(o.status.code(), Some(0), "{shell}");
        let script = out(&o);
        assert!(
            script.contains("exec") && script != text,
            "{shell}: {script}"
        );
    }
    // Control: a shell it does not know is a usage error naming the ones it does.
    let o = toolcage(&["completions", "tcsh"]);
    assert_eq!(o.status.code(), Some(125));
    assert!(out(&o).is_empty());
    assert!(String::from_utf8_lossy(&o.stderr).contains("powershell"));
}

#[test]
fn man_prints_a_roff_page_for_toolcage_and_for_each_command() {
    let o = toolcage(&["man"]);
    assert_eq!(o.status.code(), Some(0));
    let page = out(&o);
    assert!(page.starts_with(".TH toolcage 1 "), "{page}");
    assert!(
        page.contains(".SH NAME") && page.contains("toolcage\\-exec"),
        "{page}"
    );
    let o = toolcage(&["man", "exec"]);
    assert_eq!(o.status.code(), Some(0));
    let page = out(&o);
    assert!(page.starts_with(".TH toolcage-exec 1 "), "{page}");
    assert!(page.contains("allow\\-net"), "{page}");
    // Control: an unknown command has no page.
    let o = toolcage(&["man", "nope"]);
    assert_eq!(o.status.code(), Some(125));
    assert!(out(&o).is_empty());
}

#[test]
fn man_pages_have_exit_status_environment_files_and_examples() {
    for page in [vec!["man"], vec!["man", "exec"], vec!["man", "audit"]] {
        let o = toolcage(&page);
        assert_eq!(o.status.code(), Some(0), "{page:?}");
        let text = out(&o);
        for section in [
            ".SH \"EXIT STATUS\"",
            ".SH ENVIRONMENT",
            ".SH FILES",
            ".SH EXAMPLES",
        ] {
            assert!(text.contains(section), "{page:?}: {section}: {text}");
        }
        assert!(
            text.contains("\\fB125\\fR") && text.contains("XDG_STATE_HOME"),
            "{page:?}"
        );
    }
    // Each command's page has its own examples; toolcage(1) has them all.
    let exec = out(&toolcage(&["man", "exec"]));
    let audit = out(&toolcage(&["man", "audit"]));
    let all = out(&toolcage(&["man"]));
    assert!(exec.contains("toolcage exec \\-\\- make test"), "{exec}");
    assert!(!audit.contains("make test"), "{audit}");
    assert!(
        all.contains("make test") && all.contains("audit \\-\\-tail"),
        "{all}"
    );
}

/// Every command's help, as `toolcage COMMAND --help` prints it.
fn help(command: &str) -> String {
    let o = toolcage(&[command, "--help"]);
    assert_eq!(o.status.code(), Some(0), "{command}");
    out(&o)
}

const COMMANDS: [&str; 12] = [
    "exec",
    "serve",
    "list",
    "schema",
    "check",
    "call",
    "policy",
    "audit",
    "doctor",
    "upstreams",
    "completions",
    "man",
];

#[test]
fn a_usage_error_is_125_on_every_command() {
    for command in COMMANDS {
        let o = toolcage(&[command, "--no-such-option"]);
        assert_eq!(o.status.code(), Some(125), "{command}: {o:?}");
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("error:"),
            "{command}"
        );
        assert!(out(&o).is_empty(), "{command}");
        // Control: the same command's help is a success.
        help(command);
    }
    // A value clap rejects is a usage error too.
    let o = toolcage(&["exec", "--with", "cobol", "--", "true"]);
    assert_eq!(o.status.code(), Some(125), "{o:?}");
}

/// The options each command's `--help` lists (besides `--help`): its
/// own, then the shared ones it reads, in the nesting of
/// `src/cli/options.rs` (project < log < tools.toml < store).
fn expected_options(command: &[&str]) -> Vec<&'static str> {
    const POLICY: [&str; 10] = [
        "--profile",
        "--policy",
        "--with",
        "--allow-net",
        "--allow-domain",
        "--read",
        "--write",
        "--env",
        "--timeout",
        "--allow-degraded",
    ];
    const PROJECT: [&str; 2] = ["--project", "--quiet"];
    const LOG: [&str; 1] = ["--log"];
    const TOOLS_TOML: [&str; 1] = ["--tools-toml"];
    const STORE: [&str; 4] = [
        "--store",
        "--store-password-file",
        "--store-password-env",
        "--store-prefix",
    ];
    const SERVE: [&str; 17] = [
        "--http",
        "--pool",
        "--max-concurrent",
        "--max-message-bytes",
        "--page-size",
        "--no-watch",
        "--approval-timeout",
        "--max-sessions",
        "--max-pending-per-session",
        "--max-pending",
        "--max-connections",
        "--header-timeout",
        "--token-file",
        "--no-auth",
        "--allow-host",
        "--metrics",
        "--drain",
    ];
    let own: &[&str] = match command {
        ["exec"] => &["--json", "--explain"],
        ["serve"] => &SERVE,
        ["list"] | ["check"] | ["policy"] | ["upstreams"] | ["upstreams", "show"] => &["--json"],
        ["schema"] => &[],
        ["call"] => &["--args", "--yes", "--json", "--explain"],
        ["audit"] => &["--profile", "--policy", "--tail", "--json", "--all"],
        ["doctor"] => &["--json"],
        ["upstreams", "approve"] => &["--digest"],
        ["completions"] | ["man"] => &[],
        other => panic!("no table for {other:?}"),
    };
    let shared: Vec<&[&str]> = match command[0] {
        "exec" => vec![&POLICY, &PROJECT],
        "audit" | "doctor" => vec![&PROJECT, &LOG],
        "check" | "policy" => vec![&POLICY, &PROJECT, &LOG, &TOOLS_TOML],
        "serve" | "list" | "schema" | "call" | "upstreams" => {
            vec![&POLICY, &PROJECT, &LOG, &TOOLS_TOML, &STORE]
        }
        _ => vec![],
    };
    let mut all: Vec<&str> = own.to_vec();
    for s in shared {
        all.extend(s);
    }
    all.sort();
    all.dedup();
    all
}

/// The long options a help text lists, each with whether it takes a value.
fn listed_options(help: &str) -> Vec<(String, bool)> {
    let mut out: Vec<(String, bool)> = help
        .lines()
        .map(str::trim_start)
        .filter(|l| l.starts_with('-'))
        .filter_map(|l| {
            let at = l.find("--")?;
            let mut words = l[at..].split_whitespace();
            let name = words.next()?.to_string();
            let takes_value = words.next().is_some_and(|w| w.starts_with('<'));
            Some((name, takes_value))
        })
        .filter(|(name, _)| name != "--help")
        .collect();
    out.sort();
    out
}

/// A value each option accepts.
fn value_for(option: &str) -> &'static str {
    match option {
        "--profile" => "default",
        "--with" => "rust",
        "--log" => "warn",
        "--store" => "redis://127.0.0.1:1",
        _ => "1",
    }
}

#[test]
fn each_command_lists_only_the_options_it_uses() {
    let mut commands: Vec<Vec<&str>> = COMMANDS.iter().map(|c| vec![*c]).collect();
    commands.push(vec!["upstreams", "show"]);
    commands.push(vec!["upstreams", "approve"]);
    for command in &commands {
        let mut args = command.clone();
        args.push("--help");
        let o = toolcage(&args);
        assert_eq!(o.status.code(), Some(0), "{command:?}");
        let text = out(&o);
        let listed = listed_options(&text);
        let names: Vec<&str> = listed.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, expected_options(command), "{command:?}: {text}");
        // Each option listed is one the command accepts (clap reads the
        // words before `--help` and stops at an unknown one).
        for (name, takes_value) in &listed {
            let mut args = command.clone();
            args.push(name);
            if *takes_value {
                args.push(value_for(name));
            }
            args.push("--help");
            let o = toolcage(&args);
            assert_eq!(o.status.code(), Some(0), "{args:?}: {o:?}");
        }
    }
    // Control: the commands that resolve a grant still take all of it,
    // and exec keeps every option it had.
    for command in ["exec", "call", "policy"] {
        let text = help(command);
        assert!(
            text.contains("--allow-net") && text.contains("--read <PATH>"),
            "{command}: {text}"
        );
    }
    let exec: Vec<String> = listed_options(&help("exec"))
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    for option in [
        "--profile",
        "--policy",
        "--with",
        "--allow-net",
        "--allow-domain",
        "--read",
        "--write",
        "--env",
        "--timeout",
        "--allow-degraded",
        "--json",
        "--explain",
        "--project",
        "--quiet",
    ] {
        assert!(exec.iter().any(|o| o == option), "{option}: {exec:?}");
    }
}

/// An option a command does not use is a usage error (125), after its
/// name as before it; the commands that use it take it in both places.
#[test]
fn an_option_a_command_does_not_use_is_a_usage_error() {
    let refused: [&[&str]; 8] = [
        &["doctor", "--store", "redis://127.0.0.1:1"],
        &["--store", "redis://127.0.0.1:1", "doctor"],
        &["--tools-toml", "t.toml", "audit"],
        &["audit", "--allow-net"],
        &["-C", ".", "man"],
        &["completions", "bash", "--log", "warn"],
        &["--log", "warn", "exec", "--", "true"],
        &["--tools-toml", "t.toml", "exec", "--", "true"],
    ];
    for args in refused {
        let o = toolcage(args);
        assert_eq!(o.status.code(), Some(125), "{args:?}: {o:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("unexpected argument"), "{args:?}: {err}");
        assert!(out(&o).is_empty(), "{args:?}");
    }
    // Control: where they are used, before or after the name.
    let demo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/demo");
    let d = demo.to_str().unwrap();
    for args in [
        vec!["-C", d, "list"],
        vec!["list", "-C", d],
        vec!["-q", "-C", d, "doctor", "--log", "error"],
        vec!["-C", d, "exec", "--", "true"],
        vec!["exec", "-C", d, "-q", "--", "true"],
        vec!["completions", "bash"],
    ] {
        let o = toolcage(&args);
        assert!(
            o.status.code() == Some(0) || (args.contains(&"doctor") && o.status.code() == Some(1)),
            "{args:?}: {o:?}"
        );
    }
}

#[test]
fn completions_offer_profiles_presets_and_the_projects_tool_names() {
    let bash = out(&toolcage(&["completions", "bash"]));
    let script = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(script.path(), &bash).unwrap();
    let demo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/demo");
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_toolcage"))
        .parent()
        .unwrap();
    // What bash offers for the words so far (the last one being typed).
    let complete = |words: &[&str]| -> String {
        let list: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
        let prog = format!(
            "source '{}'; COMP_WORDS=({}); COMP_CWORD={}; COMP_LINE=\"${{COMP_WORDS[*]}}\"; \
             COMP_POINT=${{#COMP_LINE}}; _toolcage_with_tools toolcage '{}' '{}'; \
             echo \"${{COMPREPLY[@]}}\"",
            script.path().display(),
            list.join(" "),
            words.len() - 1,
            words[words.len() - 1],
            words[words.len() - 2],
        );
        let o = std::process::Command::new("bash")
            .arg("-c")
            .arg(prog)
            .env(
                "PATH",
                format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()),
            )
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    let d = demo.to_str().unwrap();
    let tools = complete(&["toolcage", "-C", d, "call", ""]);
    assert!(
        tools.contains("word_count") && tools.contains("ct_greet"),
        "{tools}"
    );
    assert_eq!(complete(&["toolcage", "-C", d, "call", "wo"]), "word_count");
    assert_eq!(
        complete(&["toolcage", "exec", "--profile", ""]),
        "default untrusted ci network"
    );
    assert_eq!(
        complete(&["toolcage", "exec", "--with", ""]),
        "rust node python"
    );
    // Control: the second word after `call` is an argument, not a tool.
    let after = complete(&["toolcage", "-C", d, "call", "word_count", ""]);
    assert!(!after.contains("ct_greet"), "{after}");
    let fish = out(&toolcage(&["completions", "fish"]));
    assert!(
        fish.contains("__fish_seen_subcommand_from call schema policy"),
        "{fish}"
    );
}

/// What zsh makes of `typed` followed by a Tab, completed by the script in
/// `script` in an interactive zsh on a pseudo-terminal (`zpty`): the line
/// after completion.
fn zsh_completes(script: &std::path::Path, typed: &str) -> String {
    let driver = r#"
zmodload zsh/zpty
zpty z "zsh -f -i"
zpty -w z "PS1='> '; bindkey -e; autoload -U compinit; compinit -u -D; source ${(q)1}"
zpty -wn z "$2"$'\t'
zpty -wn z $'\x01echo BEGIN-LINE \x05 END-LINE\n'
while zpty -r z line; do
    if [[ $line == BEGIN-LINE*END-LINE* ]]; then print -r -- "${line%%$'\r'*}"; break; fi
done
zpty -d z
"#;
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_toolcage"))
        .parent()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    // A guard against a shell that never answers, not a measurement.
    let o = Command::new("timeout")
        .args(["60", "zsh", "-f", "-c", driver, "zsh"])
        .arg(script)
        .arg(typed)
        .current_dir(dir.path())
        .env(
            "PATH",
            format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()),
        )
        .output()
        .unwrap();
    let line = String::from_utf8_lossy(&o.stdout);
    let line = line.trim();
    assert!(line.starts_with("BEGIN-LINE"), "{typed}: {o:?}");
    line.trim_start_matches("BEGIN-LINE")
        .trim_end_matches("END-LINE")
        .trim()
        .to_string()
}

/// zsh completes the project's tool names after `call`, `schema` and
/// `policy`, with `-C DIR` before or after the command, in a real
/// interactive zsh when one is installed (else the script's text).
#[test]
fn zsh_completes_the_projects_tool_names() {
    let zsh = out(&toolcage(&["completions", "zsh"]));
    // The three tool-name positionals go to the function, defined before
    // the lines that run `_toolcage`.
    assert_eq!(zsh.matches(":_toolcage_tools' \\").count(), 3, "{zsh}");
    let defined = zsh.find("_toolcage_tools() {").expect("defined");
    let tail = zsh
        .find("if [ \"$funcstack[1]\" = \"_toolcage\" ]")
        .expect("tail");
    assert!(defined < tail);
    let installed = Command::new("zsh")
        .args(["-f", "-c", "zmodload zsh/zpty"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !installed {
        eprintln!("zsh with zpty not installed: checked the script's text only");
        return;
    }
    let script = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(script.path(), &zsh).unwrap();
    let demo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/demo");
    let d = demo.to_str().unwrap();
    for (typed, want) in [
        (
            format!("toolcage -C {d} call wo"),
            "call word_count".to_string(),
        ),
        (
            format!("toolcage call -C {d} wo"),
            format!("-C {d} word_count"),
        ),
        (
            format!("toolcage -C {d} schema ct_gr"),
            "schema ct_greet".into(),
        ),
        (
            format!("toolcage --project={d} policy wo"),
            "policy word_count".into(),
        ),
        (
            format!("toolcage -C {d} exec --profile unt"),
            "--profile untrusted".into(),
        ),
    ] {
        let line = zsh_completes(script.path(), &typed);
        assert!(line.ends_with(&want), "{typed}: {line}");
    }
    // Controls: the second word after `call` is an argument, not a tool;
    // and without -C, in a directory with no tools, there is none to offer.
    let line = zsh_completes(
        script.path(),
        &format!("toolcage -C {d} call word_count wo"),
    );
    assert!(line.ends_with("word_count wo"), "{line}");
    let line = zsh_completes(script.path(), "toolcage call wo");
    assert!(line.ends_with("call wo"), "{line}");
}
