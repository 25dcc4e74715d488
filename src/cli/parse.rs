//! Reading the command line: `exec` parsed alone when it comes first (the
//! fast path: the rest of [`Cli`] is not built), and the tip for an `exec`
//! whose command is missing its `--`.

use super::{ABOUT, Cli, CliCommand, EXEC_ABOUT, Given, GlobalOptions, exec};
use clap::{CommandFactory, Parser, Subcommand};

/// [`Cli`] with `exec` alone: clap builds every subcommand's arguments
/// before it parses, ~0.15 ms of each `toolcage exec`. The help, the
/// errors and the result are those of [`Cli`] (a test compares them).
#[derive(Debug, Parser)]
#[command(name = "toolcage", version, about = ABOUT)]
struct ExecCli {
    #[command(flatten)]
    options: GlobalOptions,

    #[command(subcommand)]
    command: ExecOnly,
}

#[derive(Debug, Subcommand)]
enum ExecOnly {
    #[command(about = EXEC_ABOUT)]
    Exec(exec::ExecArgs),
}

/// Whether `args` (the program name first) are `-C`/`-q` options with their
/// values and then `exec`: anything else (`--help`, a flag clap might read
/// as a value) goes to [`Cli`] itself.
fn exec_first(args: &[std::ffi::OsString]) -> bool {
    let mut words = args.iter().skip(1).map(|a| a.to_str());
    while let Some(Some(w)) = words.next() {
        match w {
            "exec" => return true,
            "-q" | "--quiet" => {}
            // exec takes no other option before its name (the whole
            // parser says so).
            "-C" | "--project" => match words.next() {
                Some(Some(v)) if !v.starts_with('-') => {}
                _ => return false,
            },
            _ if w.starts_with("--project=") => {}
            _ if w.starts_with("-C") && w.len() > 2 && !w.starts_with("-C-") => {}
            _ => return false,
        }
    }
    false
}

/// Parse `args` (the program name first) as [`Cli`] does.
pub(super) fn parse_from(args: Vec<std::ffi::OsString>) -> Result<Cli, clap::Error> {
    if exec_first(&args) {
        let ExecCli {
            options,
            command: ExecOnly::Exec(args),
        } = ExecCli::try_parse_from(args)?;
        return Ok(Cli {
            options,
            command: CliCommand::Exec(args),
        });
    }
    whole(args)
}

/// [`Cli`], refused when an option typed before the command's name is one
/// the command does not use (`toolcage --store URL doctor`): as clap
/// refuses it after the name.
fn whole(args: Vec<std::ffi::OsString>) -> Result<Cli, clap::Error> {
    let name = subcommand_name(
        args.iter()
            .skip(1)
            .map(|a| a.to_string_lossy().into_owned()),
    );
    let cli = Cli::try_parse_from(args)?;
    let Some(flag) = Given::from(&cli.options).beyond(cli.command.level()) else {
        return Ok(cli);
    };
    let name = name.unwrap_or_default();
    let mut cmd = Cli::command();
    // Built, a subcommand's usage line is `toolcage NAME ...`.
    cmd.build();
    let mut sub = cmd.find_subcommand(&name).cloned().unwrap_or(cmd);
    Err(clap::Error::raw(
        clap::error::ErrorKind::UnknownArgument,
        format!("unexpected argument '{flag}': `toolcage {name}` does not use it"),
    )
    .format(&mut sub))
}

/// `toolcage exec true`: clap sees `true` as an unexpected argument. The
/// command goes after `--`; say so, with the line to type.
pub(super) fn exec_without_separator(e: &clap::Error, args: Vec<String>) -> Option<String> {
    use clap::error::ErrorKind;
    let is_exec = subcommand_name(args.iter().cloned()).as_deref() == Some("exec");
    if !is_exec
        || args.iter().any(|a| a == "--")
        || !matches!(
            e.kind(),
            ErrorKind::UnknownArgument | ErrorKind::MissingRequiredArgument
        )
    {
        return None;
    }
    let at = args.iter().position(|a| a == "exec")?;
    // The first word after exec's own options is where the command starts.
    let mut rest = args[at + 1..].iter().peekable();
    let mut options = Vec::new();
    while let Some(a) = rest.next_if(|a| a.starts_with('-')) {
        options.push(a.clone());
        let takes_value = !matches!(
            a.as_str(),
            "--allow-net" | "--allow-degraded" | "--json" | "--explain" | "--quiet" | "-q"
        ) && !a.contains('=');
        if takes_value && let Some(v) = rest.next() {
            options.push(v.clone());
        }
    }
    let command: Vec<&String> = rest.collect();
    if command.is_empty() {
        return None;
    }
    let mut line = vec!["toolcage".to_string()];
    line.extend(args[..=at].iter().cloned());
    line.extend(options);
    line.push("--".into());
    line.extend(command.into_iter().cloned());
    let line: Vec<String> = line.iter().map(|a| shell_word(a)).collect();
    Some(format!(
        "tip: the command goes after `--`: {}",
        crate::text::one_line(&line.join(" "))
    ))
}

/// `a` as a shell would need it typed: bare when plain, else single-quoted.
fn shell_word(a: &str) -> String {
    let plain = !a.is_empty()
        && a.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_./:=@%+-,".contains(&b));
    if plain {
        a.to_string()
    } else {
        format!("'{}'", a.replace('\'', "'\\''"))
    }
}

/// The first word that is neither a shared option nor its value.
pub(super) fn subcommand_name(mut args: impl Iterator<Item = String>) -> Option<String> {
    while let Some(a) = args.next() {
        match a.as_str() {
            "-C"
            | "--project"
            | "--log"
            | "--tools-toml"
            | "--store"
            | "--store-password-file"
            | "--store-password-env"
            | "--store-prefix" => {
                args.next();
            }
            _ if a.starts_with('-') => {}
            _ => return Some(a),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exec_parses_as_the_whole_cli_does() {
        let cases: &[&[&str]] = &[
            &["exec", "--", "true"],
            &["exec", "--", "sh", "-c", "echo hi"],
            &[
                "-C",
                "/tmp",
                "exec",
                "--allow-net",
                "--read",
                "/x",
                "--",
                "ls",
            ],
            &[
                "--project=/p",
                "--log=debug",
                "exec",
                "--env",
                "A=b",
                "--",
                "x",
            ],
            &["-C/p", "--tools-toml", "t.toml", "exec", "--", "x"],
            &["-q", "exec", "--", "x"],
            &["--quiet", "-C", "/p", "exec", "-q", "--", "x"],
            &["-q", "exec", "true"],
            &[
                "exec",
                "--profile",
                "ci",
                "--with",
                "rust",
                "--",
                "cargo",
                "build",
            ],
            &["exec", "--timeout", "5s", "--json", "--explain", "--", "x"],
            &["exec", "--help"],
            &["exec", "-h"],
            &["exec", "--version"],
            &["exec"],
            &["exec", "true"],
            &["exec", "--polcy", "x", "--", "true"],
            &["exec", "--allow-net", "--allow-net", "--", "x"],
            &["exec", "--", "-C", "exec"],
            &["-C", "exec", "exec", "--", "x"],
            &["-C", "-h", "exec", "--", "x"],
            &["--help", "exec"],
            &["-h", "exec"],
            &["--version", "exec"],
            &["-V"],
            &["--log", "exec"],
            &["exec", "-C", "/q", "--", "x"],
            &["list"],
            &["-C", "/p", "list", "-C", "/q"],
            &["--store", "redis://x", "list"],
            &["--store", "redis://x", "doctor"],
            &["-q", "completions", "bash"],
            &["-C", "/p", "-q", "exec", "-C", "/q", "--", "x"],
            &["exe", "--", "x"],
            &[],
        ];
        for case in cases {
            let mut args: Vec<std::ffi::OsString> = vec!["toolcage".into()];
            args.extend(case.iter().map(|a| a.into()));
            let fast = parse_from(args.clone());
            let whole = whole(args);
            match (fast, whole) {
                (Ok(a), Ok(b)) => assert_eq!(format!("{a:?}"), format!("{b:?}"), "{case:?}"),
                (Err(a), Err(b)) => {
                    assert_eq!(a.kind(), b.kind(), "{case:?}");
                    assert_eq!(a.render().to_string(), b.render().to_string(), "{case:?}");
                }
                (a, b) => panic!("{case:?}: {a:?} vs {b:?}"),
            }
        }
    }
}
