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
    assert_eq!(o.status.code(), Some(2));
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
    assert_eq!(o.status.code(), Some(2));
    assert!(out(&o).is_empty());
}
