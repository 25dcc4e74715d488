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

#[test]
fn each_command_lists_only_the_options_it_uses() {
    let audit = help("audit");
    for grant_flag in [
        "--allow-net",
        "--read",
        "--write",
        "--allow-domain",
        "--env",
        "--timeout",
    ] {
        assert!(
            !audit.contains(&format!("{grant_flag} ")),
            "{grant_flag}: {audit}"
        );
    }
    assert!(
        audit.contains("--profile") && audit.contains("--policy"),
        "{audit}"
    );
    // Control: the commands that resolve a grant take them.
    for command in ["exec", "call", "policy"] {
        let text = help(command);
        assert!(
            text.contains("--allow-net") && text.contains("--read <PATH>"),
            "{command}: {text}"
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
