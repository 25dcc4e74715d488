//! What the sandbox refused during a call, told to the person at the
//! terminal: every denial with what would grant it (`--explain`), or one
//! line pointing at `--explain` when a failed command saw some.

use crate::sandbox::Denial;

/// One line per denial: `toolcage: blocked: /etc/x (why); to allow it: FIX`.
pub(crate) fn lines(denials: &[Denial]) -> Vec<String> {
    denials
        .iter()
        .map(|d| match &d.fix {
            Some(fix) => format!("toolcage: {}; to allow it: {fix}", d.line()),
            None => format!("toolcage: {}", d.line()),
        })
        .map(|l| crate::text::one_line(&l))
        .collect()
}

/// After the command: with `--explain`, every denial (or that there was
/// none, and what could not be seen); without it, after a failure, one
/// hint line when there was a denial. `captured`: whether the tool's
/// output was read (file denials are inferred from it).
pub(crate) fn report(denials: &[Denial], explain: bool, failed: bool, captured: bool) {
    if explain {
        if denials.is_empty() {
            let unseen = if captured {
                ""
            } else {
                " (its output was not captured, so refused files cannot be inferred; \
                 `toolcage call` and `--json` runs of tools can)"
            };
            eprintln!("toolcage: no denials seen{unseen}");
        }
        for l in lines(denials) {
            eprintln!("{l}");
        }
    } else if failed && !denials.is_empty() && !super::quiet() {
        eprintln!(
            "toolcage: the sandbox refused {} thing(s) during this call: run it again with --explain",
            denials.len()
        );
    }
}
