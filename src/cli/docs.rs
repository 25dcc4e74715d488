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

/// The completion script for `args.shell` on stdout: clap's, plus (bash,
/// fish, zsh) the project's tool names for `call`, `schema` and `policy`,
/// asked of `toolcage list` when the shell completes.
pub(crate) fn completions(args: &CompletionsArgs) -> u8 {
    let mut out = Vec::new();
    clap_complete::generate(args.shell, &mut Cli::command(), "toolcage", &mut out);
    match args.shell {
        Shell::Bash => out.extend_from_slice(BASH_TOOL_NAMES.as_bytes()),
        Shell::Fish => out.extend_from_slice(FISH_TOOL_NAMES.as_bytes()),
        Shell::Zsh => out = zsh_with_tools(&String::from_utf8_lossy(&out)).into_bytes(),
        _ => {}
    }
    write(&out)
}

/// clap's zsh script with the tool-name positionals (`call NAME`,
/// `schema [NAME]`, `policy [NAME]`: the only ones with a description)
/// completed by `_toolcage_tools`, defined before the script's last lines
/// (which run `_toolcage` when zsh autoloads the file).
fn zsh_with_tools(script: &str) -> String {
    let mut out = String::with_capacity(script.len() + ZSH_TOOL_NAMES.len());
    for line in script.split_inclusive('\n') {
        let tool_name = (line.starts_with("':name -- ") || line.starts_with("'::name -- "))
            && line.trim_end().ends_with(":_default' \\");
        if tool_name {
            out.push_str(&line.replacen(":_default' \\", ":_toolcage_tools' \\", 1));
            continue;
        }
        if line.starts_with("if [ \"$funcstack[1]\" = \"_toolcage\" ]") {
            out.push_str(ZSH_TOOL_NAMES);
        }
        out.push_str(line);
    }
    out
}

/// The project's tools (`-C DIR` when typed, before or after the command).
const ZSH_TOOL_NAMES: &str = r#"(( $+functions[_toolcage_tools] )) ||
_toolcage_tools() {
    local -a typed project tools
    local i
    typed=(${(z)BUFFER})
    for ((i = 1; i < ${#typed}; i++)); do
        case "${typed[i]}" in
            --) break ;;
            -C|--project) project=(-C "${(Q)typed[i+1]}") ;;
            --project=*) project=(-C "${(Q)${typed[i]#--project=}}") ;;
        esac
    done
    tools=(${(f)"$(toolcage $project -q list 2>/dev/null | cut -d' ' -f1)"})
    _describe -t tools 'tool' tools
}

"#;

/// Wraps clap's `_toolcage`: the first word after `call`, `schema` or
/// `policy` is a tool of the project (`-C DIR` when given).
const BASH_TOOL_NAMES: &str = r#"
_toolcage_with_tools() {
    local i word sub="" project=() positional=0 cur="${COMP_WORDS[COMP_CWORD]}"
    for ((i = 1; i < COMP_CWORD; i++)); do
        word="${COMP_WORDS[i]}"
        case "$word" in
            -C|--project) project=(-C "${COMP_WORDS[i+1]}"); ((i++)) ;;
            --profile|--policy|--with|--tools-toml|--store|--store-prefix|--store-password-file|--store-password-env|--log|--args) ((i++)) ;;
            -*) ;;
            *) if [[ -z "$sub" ]]; then sub="$word"; else ((positional++)); fi ;;
        esac
    done
    if [[ "$sub" =~ ^(call|schema|policy)$ && $positional -eq 0 && "$cur" != -* ]]; then
        local tools
        tools=$(toolcage "${project[@]}" -q list 2>/dev/null | cut -d' ' -f1)
        COMPREPLY=($(compgen -W "$tools" -- "$cur"))
        return 0
    fi
    _toolcage "$@"
}
complete -F _toolcage_with_tools -o nosort -o bashdefault -o default toolcage
"#;

/// The same for fish: tool names after `call`, `schema` or `policy`.
const FISH_TOOL_NAMES: &str = r#"
complete -c toolcage -n "__fish_seen_subcommand_from call schema policy" -f -a "(toolcage -q list 2>/dev/null | string split -f1 ' ')"
"#;

/// Any string, with the shipped profile names offered to help and to the
/// completion scripts; the policy layer says what is wrong with another.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ProfileName;

impl clap::builder::TypedValueParser for ProfileName {
    type Value = String;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        clap::builder::StringValueParser::new().parse_ref(cmd, arg, value)
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(
            crate::policy::profile_names()
                .into_iter()
                .map(clap::builder::PossibleValue::new),
        ))
    }
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
                return status::INTERNAL;
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
    out.extend_from_slice(man_sections(args.command.as_deref()).as_bytes());
    write(&title_first(&out))
}

/// EXIT STATUS, ENVIRONMENT, FILES and EXAMPLES, which clap does not
/// know: the same on every page but the examples, which are the page's
/// command's (all of them on toolcage(1)).
fn man_sections(command: Option<&str>) -> String {
    let mut s = String::from(".SH \"EXIT STATUS\"\n");
    for (code, what) in [
        ("0", "success"),
        (
            "1",
            "the tool reported an error (call); errors found (check); lines of the log skipped (audit); default or ci does not run fully here (doctor)",
        ),
        (
            "2",
            "invalid arguments to a tool: an unknown tool, arguments that fail its schema; a stale or missing digest (upstreams approve)",
        ),
        (
            "3",
            "denied by the gate: policy, approval, rate limit, a held upstream tool",
        ),
        ("124", "the time limit expired"),
        (
            "125",
            "toolcage's own failure before or around the run: a usage error (any command), a refusal at start, a bad policy, a kernel that cannot enforce the grant",
        ),
        ("126", "the program cannot be executed"),
        ("127", "the program or its interpreter is not found"),
        (
            "128+N",
            "killed by signal N (exec); toolcage got signal N (call, serve)",
        ),
    ] {
        s.push_str(&format!(".TP\n\\fB{code}\\fR\n{}\n", roff(what)));
    }
    s.push_str("Otherwise exec exits with its command's own status.\n");
    s.push_str(".SH ENVIRONMENT\n");
    for (name, what) in [
        (
            "XDG_STATE_HOME",
            "where the state directory is: $XDG_STATE_HOME/toolcage/<project-hash>/ (default ~/.local/state/toolcage/...)",
        ),
        (
            "TOOLCAGE_LOG",
            "the log filter of serve and the other long-running parts (wins over --log)",
        ),
        (
            "PATH",
            "where programs are found; the call's PATH keeps only the directories the grant can read",
        ),
        (
            "HOME",
            "your home: never a project, and not visible to calls unless granted",
        ),
        (
            "NO_COLOR",
            "honoured by the programs calls run; toolcage's own output has no colour",
        ),
    ] {
        s.push_str(&format!(".TP\n\\fB{name}\\fR\n{}\n", roff(what)));
    }
    s.push_str(".SH FILES\n");
    for (file, what) in [
        (
            "~/.local/state/toolcage/<hash>/audit.jsonl",
            "the project's audit log (toolcage audit)",
        ),
        (
            "~/.local/state/toolcage/<hash>/pins.json",
            "pinned upstream tool definitions (toolcage upstreams)",
        ),
        (
            "~/.local/state/toolcage/<hash>/ratelimit.json",
            "rate-limit windows",
        ),
        (
            "~/.local/state/toolcage/<hash>/http-token",
            "the bearer token of serve --http",
        ),
        (
            ".mcp.json",
            "the upstream MCP servers of the project (never toolcage itself: register it in your client's user-level configuration)",
        ),
        (
            ".agents/tools/, .clawd/tools/, tools.toml, tools/*.md",
            "the tool directories discovered",
        ),
    ] {
        s.push_str(&format!(".TP\n\\fB{}\\fR\n{}\n", roff(file), roff(what)));
    }
    s.push_str(".SH EXAMPLES\n");
    let examples: Vec<(&str, &str)> = EXAMPLES
        .iter()
        .filter(|(cmd, _, _)| command.is_none_or(|c| c == *cmd))
        .map(|(_, line, what)| (*line, *what))
        .collect();
    for (line, what) in examples {
        s.push_str(&format!(".TP\n\\fB{}\\fR\n{}\n", roff(line), roff(what)));
    }
    s.push_str(".SH \"SEE ALSO\"\nThe README and docs/ of the toolcage repository; SECURITY.md for what is enforced.\n");
    s
}

/// `(command, line, what it does)`.
const EXAMPLES: &[(&str, &str, &str)] = &[
    (
        "exec",
        "toolcage exec -- make test",
        "run a build with no network, writing only inside the project",
    ),
    (
        "exec",
        "toolcage exec --profile ci --with rust -- cargo test --locked",
        "a CI job's build (fetch dependencies first, outside)",
    ),
    (
        "exec",
        "toolcage exec --allow-domain example.com -- curl -sI https://example.com",
        "one host, through toolcage's proxy",
    ),
    (
        "exec",
        "toolcage exec --explain -- ./build.sh",
        "say what the sandbox refused, and the flag that grants it",
    ),
    (
        "list",
        "toolcage -C examples/demo list",
        "every tool of a project",
    ),
    (
        "check",
        "toolcage check",
        "every tool file explained, with the fix",
    ),
    (
        "call",
        "toolcage call word_count text=\"hello big world\"",
        "call a tool as an agent would",
    ),
    (
        "schema",
        "toolcage schema word_count",
        "a tool's MCP definition",
    ),
    (
        "policy",
        "toolcage policy --with rust",
        "the grant a call gets, line by line, with where each came from",
    ),
    (
        "serve",
        "toolcage -C /path/to/project serve",
        "the MCP server over stdio (register it in your client's user-level configuration)",
    ),
    (
        "serve",
        "toolcage serve --http 8765",
        "over Streamable HTTP at http://127.0.0.1:8765/mcp, with a bearer token",
    ),
    (
        "audit",
        "toolcage audit --tail 20",
        "the last calls, allowed or denied",
    ),
    (
        "upstreams",
        "toolcage upstreams show NAME",
        "a held upstream tool's diff, and the command that approves it",
    ),
    (
        "doctor",
        "toolcage doctor",
        "what this machine can enforce, profile by profile",
    ),
    (
        "completions",
        "toolcage completions bash > ~/.local/share/bash-completion/completions/toolcage",
        "install bash completion (commands, options, profiles, presets, tool names)",
    ),
    (
        "man",
        "toolcage man exec > ~/.local/share/man/man1/toolcage-exec.1",
        "install a man page",
    ),
];

/// Text for a roff line: backslashes and hyphens escaped, and a line never
/// starts with a control character.
fn roff(text: &str) -> String {
    let escaped = text.replace('\\', "\\e").replace('-', "\\-");
    match escaped.starts_with(['.', '\'']) {
        true => format!("\\&{escaped}"),
        false => escaped,
    }
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
