//! The shell context of each `{{param}}` in an OpenCrabs `command`: a small
//! lexer over the template's literal text that knows POSIX quoting, `$(…)`,
//! `${…}`, `$((…))`, `$'…'`, backticks, comments and here-documents.
//!
//! Values are passed as positional parameters (see [`super::template`]), so
//! this lexer decides only how a reference is written and which places are
//! refused; a misjudgement changes word splitting, it cannot run a value.
//! What it refuses, with the reason in the error:
//! - inside backticks (use `$(…)`), `$((…))`, `${…}`, `$'…'`, or a comment;
//! - anywhere after `<<` (a here-document body is not shell syntax we can
//!   place a reference in safely; read `$OPENCRABS_PARAMS` instead);
//! - right after `$` or `\`, which would glue onto the reference;
//! - after the word `case` inside `$(…)` (its `)` patterns defeat the
//!   parenthesis count);
//! - a section whose body opens or closes a quote or substitution (the
//!   context after it would depend on whether it is rendered), or a
//!   section tag right after `$` or `\`.

use super::template::{
    Node, ShellCommand, Template, TemplateError, check_declared, parse, render_nodes, value_text,
};
use serde_json::{Map, Value};

/// Where a `{{param}}` sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ctx {
    /// Outside quotes (top level or inside `$(…)`).
    Unquoted,
    /// Inside `"…"`.
    Double,
    /// Inside `'…'`.
    Single,
}

impl Ctx {
    /// The text referring to positional parameter `n` in this context.
    pub(crate) fn reference(self, n: usize) -> String {
        match self {
            Ctx::Unquoted => format!("\"${{{n}}}\""),
            Ctx::Double => format!("${{{n}}}"),
            Ctx::Single => format!("'\"${{{n}}}\"'"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Frame {
    Double,
    Single,
    AnsiC,
    /// `$(…)` with its open-parenthesis depth.
    Subst(u32),
    /// `$((…))` with its open-parenthesis depth.
    Arith(u32),
    Brace,
    Backtick,
    Comment,
}

#[derive(Default)]
struct Lexer {
    stack: Vec<Frame>,
    /// The previous character was an unquoted or double-quoted `\`.
    esc: bool,
    /// The previous character was a special `$`.
    dollar: bool,
    /// The previous character was `$(` (to spot `$((`).
    just_subst: bool,
    /// The next character starts a word (for `#` comments).
    word_start: bool,
    /// The previous character was an unquoted `<`.
    lt: bool,
    /// The current unquoted word (capped), to spot `case`.
    word: String,
    /// Set for good once a `<<` or a `case` inside `$(…)` was seen.
    poisoned: Option<&'static str>,
}

const OPERATORS: &[char] = &[';', '&', '|', '(', ')', '<', '>'];

impl Lexer {
    fn new() -> Lexer {
        Lexer {
            word_start: true,
            ..Lexer::default()
        }
    }

    fn top(&self) -> Option<Frame> {
        self.stack.last().copied()
    }

    fn end_word(&mut self) {
        if self.word == "case" && self.stack.iter().any(|f| matches!(f, Frame::Subst(_))) {
            self.poisoned.get_or_insert(
                "after `case` inside `$(…)`; move the case statement out of the substitution",
            );
        }
        self.word.clear();
    }

    fn ch(&mut self, c: char) {
        let just_subst = std::mem::take(&mut self.just_subst);
        if self.esc {
            self.esc = false;
            self.word_start = false;
            self.lt = false;
            return;
        }
        match self.top() {
            Some(Frame::Comment) => {
                if c == '\n' {
                    self.stack.pop();
                    self.word_start = true;
                }
            }
            Some(Frame::Single) => {
                if c == '\'' {
                    self.stack.pop();
                }
            }
            Some(Frame::AnsiC) => match c {
                '\\' => self.esc = true,
                '\'' => {
                    self.stack.pop();
                }
                _ => {}
            },
            Some(Frame::Backtick) => match c {
                '\\' => self.esc = true,
                '`' => {
                    self.stack.pop();
                }
                _ => {}
            },
            Some(Frame::Double) => {
                if std::mem::take(&mut self.dollar) {
                    match c {
                        '(' => {
                            self.stack.push(Frame::Subst(1));
                            self.just_subst = true;
                            self.word_start = true;
                            return;
                        }
                        '{' => {
                            self.stack.push(Frame::Brace);
                            return;
                        }
                        _ => {}
                    }
                }
                match c {
                    '\\' => self.esc = true,
                    '"' => {
                        self.stack.pop();
                    }
                    '$' => self.dollar = true,
                    '`' => self.stack.push(Frame::Backtick),
                    _ => {}
                }
                self.word_start = false;
            }
            None | Some(Frame::Subst(_) | Frame::Arith(_) | Frame::Brace) => {
                self.unquoted(c, just_subst)
            }
        }
    }

    fn unquoted(&mut self, c: char, just_subst: bool) {
        if std::mem::take(&mut self.dollar) {
            match c {
                '(' => {
                    self.end_word();
                    self.stack.push(Frame::Subst(1));
                    self.just_subst = true;
                    self.word_start = true;
                    self.lt = false;
                    return;
                }
                '{' => {
                    self.stack.push(Frame::Brace);
                    return;
                }
                '\'' => {
                    self.stack.push(Frame::AnsiC);
                    return;
                }
                _ => {}
            }
        }
        let lt = std::mem::take(&mut self.lt);
        let top = self.top();
        match c {
            '\\' => self.esc = true,
            '\'' => self.stack.push(Frame::Single),
            '"' => self.stack.push(Frame::Double),
            '`' => self.stack.push(Frame::Backtick),
            '$' => self.dollar = true,
            '#' if self.word_start => {
                self.stack.push(Frame::Comment);
                return;
            }
            '(' => match top {
                Some(Frame::Subst(1)) if just_subst => {
                    *self.stack.last_mut().expect("top") = Frame::Arith(2);
                }
                Some(Frame::Subst(n)) => *self.stack.last_mut().expect("top") = Frame::Subst(n + 1),
                Some(Frame::Arith(n)) => *self.stack.last_mut().expect("top") = Frame::Arith(n + 1),
                _ => {}
            },
            ')' => match top {
                Some(Frame::Subst(n) | Frame::Arith(n)) if n <= 1 => {
                    self.end_word();
                    self.stack.pop();
                    self.word_start = false;
                    return;
                }
                Some(Frame::Subst(n)) => *self.stack.last_mut().expect("top") = Frame::Subst(n - 1),
                Some(Frame::Arith(n)) => *self.stack.last_mut().expect("top") = Frame::Arith(n - 1),
                _ => {}
            },
            '}' if top == Some(Frame::Brace) => {
                self.stack.pop();
                self.word_start = false;
                return;
            }
            '<' => {
                if lt {
                    self.poisoned.get_or_insert(
                        "after a here-document `<<`; read the value from $OPENCRABS_PARAMS instead",
                    );
                }
                self.lt = true;
            }
            _ => {}
        }
        if c.is_whitespace() || OPERATORS.contains(&c) {
            self.end_word();
            self.word_start = true;
        } else {
            if self.word.len() < 8 {
                self.word.push(c);
            }
            self.word_start = false;
        }
    }

    /// The context for a `{{param}}` here, or why none is safe.
    fn var(&mut self) -> Result<Ctx, &'static str> {
        if let Some(p) = self.poisoned {
            return Err(p);
        }
        if self.esc {
            return Err("right after a backslash; remove the backslash");
        }
        if self.dollar {
            return Err("right after `$`; remove the `$`");
        }
        for f in &self.stack {
            let why = match f {
                Frame::Comment => "inside a shell comment; move it out of the comment",
                Frame::Backtick => "inside backticks; use $(…) instead",
                Frame::Arith(_) => {
                    "inside arithmetic $((…)); pass it through a variable checked by the script"
                }
                Frame::Brace => "inside ${…}; move it out of the parameter expansion",
                Frame::AnsiC => "inside $'…'; move it out of the quotes",
                Frame::Double | Frame::Single | Frame::Subst(_) => continue,
            };
            return Err(why);
        }
        // A value is a part of the current word.
        self.word_start = false;
        self.lt = false;
        self.word.push('\u{1}');
        Ok(match self.top() {
            Some(Frame::Double) => Ctx::Double,
            Some(Frame::Single) => Ctx::Single,
            _ => Ctx::Unquoted,
        })
    }
}

fn walk(nodes: &[Node], lx: &mut Lexer, out: &mut [Ctx]) -> Result<(), TemplateError> {
    for n in nodes {
        match n {
            Node::Text(s) => s.chars().for_each(|c| lx.ch(c)),
            Node::Var { name, offset, id } => {
                let ctx = lx.var().map_err(|why| TemplateError {
                    offset: *offset,
                    message: format!("'{{{{{name}}}}}' cannot be used {why}"),
                })?;
                if let Some(slot) = out.get_mut(*id) {
                    *slot = ctx;
                }
            }
            Node::Section { name, offset, body } => {
                let err = |what: &str| TemplateError {
                    offset: *offset,
                    message: format!("section '{name}' {what}"),
                };
                if lx.esc || lx.dollar {
                    return Err(err("starts right after `$` or `\\`; remove it"));
                }
                let (stack, word_start, lt) = (lx.stack.clone(), lx.word_start, lx.lt);
                walk(body, lx, out)?;
                if lx.esc || lx.dollar {
                    return Err(err("ends with `$` or `\\`; remove it"));
                }
                if lx.stack != stack {
                    return Err(err(
                        "opens or closes a quote, substitution or comment; balance it inside the section",
                    ));
                }
                // The text after a section must be judged both with and
                // without the section rendered.
                lx.word_start |= word_start;
                lx.lt |= lt;
                lx.end_word();
            }
        }
    }
    Ok(())
}

/// The context of every `{{param}}` (indexed by its id), or the first one
/// that cannot be passed safely.
pub(crate) fn contexts(t: &Template) -> Result<Vec<Ctx>, TemplateError> {
    let mut out = vec![Ctx::Unquoted; t.vars];
    walk(&t.nodes, &mut Lexer::new(), &mut out)?;
    Ok(out)
}

/// [`check_declared`], plus: every `{{param}}` of a shell command sits
/// where a value can be passed safely.
pub(crate) fn check_shell(template: &str, declared: &[&str]) -> Result<(), TemplateError> {
    contexts(&check_declared(template, declared)?).map(drop)
}

/// Parse and render for `sh -c` (the call-time entry point).
pub(crate) fn render(
    template: &str,
    args: &Map<String, Value>,
) -> Result<ShellCommand, TemplateError> {
    parse(template)?.render_shell(args)
}

impl Template {
    /// Render for `sh -c` (see the template module's doc).
    pub(crate) fn render_shell(
        &self,
        args: &Map<String, Value>,
    ) -> Result<ShellCommand, TemplateError> {
        let ctx = contexts(self)?;
        // Positional index per distinct var name, in order of first use.
        let mut names: Vec<&str> = Vec::new();
        let mut values = Vec::new();
        for (name, offset) in self.vars_in_order() {
            if names.contains(&name) {
                continue;
            }
            let v = value_text(args.get(name));
            if v.contains('\0') {
                return Err(TemplateError {
                    offset,
                    message: format!("the value of '{name}' contains a NUL byte"),
                });
            }
            names.push(name);
            values.push(v);
        }
        let mut script = String::new();
        render_nodes(&self.nodes, args, &mut script, &mut |name, id, out| {
            let n = names.iter().position(|x| *x == name).unwrap_or(0) + 1;
            out.push_str(&ctx[id].reference(n));
        });
        Ok(ShellCommand {
            script,
            args: values,
        })
    }
}
