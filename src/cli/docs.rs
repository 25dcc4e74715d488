//! `toolcage completions SHELL` and `toolcage man`: generated from the
//! same clap definition the binary parses with, so they cannot drift.

use super::{Cli, status};
use clap::{Args, CommandFactory};
use clap_complete::Shell;

#[derive(Debug, Args)]
pub(crate) struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish, powershell.
    #[arg(value_name = "SHELL")]
    pub(crate) shell: Shell,
}

/// The completion script for `args.shell` on stdout.
pub(crate) fn completions(args: &CompletionsArgs) -> u8 {
    let mut out = Vec::new();
    clap_complete::generate(args.shell, &mut Cli::command(), "toolcage", &mut out);
    write(&out)
}

#[derive(Debug, Args)]
pub(crate) struct ManArgs {
    /// A command's own page (toolcage-exec(1), ...) instead of toolcage(1).
    #[arg(value_name = "COMMAND")]
    pub(crate) command: Option<String>,
}

/// The man page (roff) on stdout, starting with its `.TH` line:
/// toolcage(1), or toolcage-COMMAND(1).
pub(crate) fn man(args: &ManArgs) -> u8 {
    let mut cmd = Cli::command();
    // Built, subcommands carry their display names (`toolcage-exec`).
    cmd.build();
    let page = match &args.command {
        None => cmd,
        Some(name) => match cmd.find_subcommand(name) {
            Some(sub) => sub.clone(),
            None => {
                let known: Vec<&str> = cmd
                    .get_subcommands()
                    .map(|c| c.get_name())
                    .filter(|n| *n != "help")
                    .collect();
                super::say(&format!(
                    "no command '{name}' (one of: {})",
                    known.join(", ")
                ));
                return status::INVALID;
            }
        },
    };
    let mut out = Vec::new();
    // Every page's source is the program and its version.
    let source = format!("toolcage {}", env!("CARGO_PKG_VERSION"));
    if let Err(e) = clap_mangen::Man::new(page).source(source).render(&mut out) {
        super::say(&e);
        return status::INTERNAL;
    }
    write(&title_first(&out))
}

/// clap_mangen puts the definition of `\*(Aq` (an apostrophe) before the
/// title; a page starts with `.TH` (what `file`, `man -l` and tools that
/// sniff for a man page expect), and the definition works anywhere before
/// its first use.
fn title_first(page: &[u8]) -> Vec<u8> {
    let lines: Vec<&[u8]> = page.split_inclusive(|&b| b == b'\n').collect();
    let Some(at) = lines.iter().position(|l| l.starts_with(b".TH ")) else {
        return page.to_vec();
    };
    let mut out = lines[at].to_vec();
    for (i, l) in lines.iter().enumerate() {
        if i != at {
            out.extend_from_slice(l);
        }
    }
    out
}

fn write(bytes: &[u8]) -> u8 {
    super::out::bytes(bytes);
    status::OK
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_title_moves_to_the_top_and_nothing_is_lost() {
        let page = b".ie x\n.el y\n.TH t 1\n.SH NAME\n";
        assert_eq!(
            super::title_first(page),
            b".TH t 1\n.ie x\n.el y\n.SH NAME\n".to_vec()
        );
        assert_eq!(super::title_first(b"no title\n"), b"no title\n".to_vec());
    }
}
