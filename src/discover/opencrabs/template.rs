//! OpenCrabs command templates: `{{param}}` and `{{#param}}…{{/param}}`.
//!
//! A value is never pasted into shell source. A shell `command` renders
//! each `{{param}}` as a reference to a positional parameter (`"${1}"`,
//! `"${2}"`, …, one per distinct param) and the values travel as the
//! arguments of `sh -c SCRIPT sh VALUE…` ([`ShellCommand`]). The shell
//! expands a parameter exactly once and never parses the result as code,
//! so `$(…)`, backticks, quotes, newlines and `;` in a value are inert text,
//! and a mistake in judging the quote context can only change how a value
//! is split into words, never run it. The reference is written to suit its
//! context (see [`super::shellctx`]): `"${N}"` unquoted, `${N}` inside
//! `"…"`, `'"${N}"'` inside `'…'`; contexts where a value would be code or
//! lost (backticks, `$((…))`, `${…}`, `$'…'`, a comment, after `<<`, right
//! after `$` or `\`) are load-time errors.
//!
//! Values: strings as they are, numbers and booleans as their JSON text,
//! arrays and objects as their JSON text; a missing or null value is the
//! empty string. A value holding a NUL byte cannot be an argument: an error.
//!
//! Syntax rules:
//! - A tag is `{{NAME}}`, `{{#NAME}}` or `{{/NAME}}` with NAME matching
//!   `[A-Za-z_][A-Za-z0-9_-]*` (spaces inside the braces allowed). Anything
//!   else between `{{` and `}}` (e.g. docker's `{{.Names}}`) is literal text.
//! - A section is rendered when its param is present, not null, not `false`,
//!   and not empty (`""`, `[]`, `{}`). Treating `false` as absent is a
//!   choice (the seed only says non-null and non-empty): it makes
//!   `{{#verbose}}-v{{/verbose}}` work as a flag, as in Mustache.
//! - Unclosed or mismatched sections are errors, found by [`check`].
//!
//! The http executor's URL and headers involve no shell: [`Template::render_plain`]
//! substitutes the text itself.

use serde_json::{Map, Value};

/// Where and why a template is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("template error at byte {offset}: {message}")]
pub(crate) struct TemplateError {
    pub offset: usize,
    pub message: String,
}

/// A parsed template.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Template {
    pub(crate) nodes: Vec<Node>,
    /// Number of `{{param}}` tags (ids 0..vars).
    pub(crate) vars: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Node {
    Text(String),
    Var {
        name: String,
        offset: usize,
        /// Position among all `{{param}}` tags, in text order.
        id: usize,
    },
    Section {
        name: String,
        offset: usize,
        body: Vec<Node>,
    },
}

/// A rendered shell command: run as `sh -c script sh args…`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ShellCommand {
    pub script: String,
    /// `$1`, `$2`, …: one per distinct param referenced by the template.
    pub args: Vec<String>,
}

/// `[A-Za-z_][A-Za-z0-9_-]*`: a name a template tag can refer to.
pub(crate) fn valid_param_name(s: &str) -> bool {
    let mut b = s.bytes();
    matches!(b.next(), Some(c) if c.is_ascii_alphabetic() || c == b'_')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
}

enum Tag<'a> {
    Var(&'a str),
    Open(&'a str),
    Close(&'a str),
}

/// The tag at `s` (which starts with `{{`): the tag and its length.
fn tag_at(s: &str) -> Option<(Tag<'_>, usize)> {
    let end = s[2..].find("}}")? + 2;
    let inner = s[2..end].trim();
    let tag = if let Some(n) = inner.strip_prefix('#') {
        Tag::Open(n.trim())
    } else if let Some(n) = inner.strip_prefix('/') {
        Tag::Close(n.trim())
    } else {
        Tag::Var(inner)
    };
    let name = match tag {
        Tag::Var(n) | Tag::Open(n) | Tag::Close(n) => n,
    };
    valid_param_name(name).then_some((tag, end + 2))
}

/// How deep sections may nest (rendering recurses per level).
pub(crate) const MAX_DEPTH: usize = 32;

/// Parse a template.
pub(crate) fn parse(template: &str) -> Result<Template, TemplateError> {
    // Stack of open sections: (name, offset, nodes before it).
    let mut stack: Vec<(String, usize, Vec<Node>)> = Vec::new();
    let mut nodes: Vec<Node> = Vec::new();
    let mut text = String::new();
    let mut vars = 0;
    let mut i = 0;
    while i < template.len() {
        let rest = &template[i..];
        let Some(p) = rest.find("{{") else {
            text.push_str(rest);
            break;
        };
        text.push_str(&rest[..p]);
        i += p;
        let Some((tag, len)) = tag_at(&template[i..]) else {
            text.push_str("{{");
            i += 2;
            continue;
        };
        if !text.is_empty() {
            nodes.push(Node::Text(std::mem::take(&mut text)));
        }
        match tag {
            Tag::Var(n) => {
                nodes.push(Node::Var {
                    name: n.to_owned(),
                    offset: i,
                    id: vars,
                });
                vars += 1;
            }
            Tag::Open(n) => {
                if stack.len() >= MAX_DEPTH {
                    return Err(TemplateError {
                        offset: i,
                        message: format!("sections nested deeper than {MAX_DEPTH}"),
                    });
                }
                stack.push((n.to_owned(), i, std::mem::take(&mut nodes)))
            }
            Tag::Close(n) => match stack.pop() {
                Some((open, offset, before)) if open == n => {
                    let body = std::mem::replace(&mut nodes, before);
                    nodes.push(Node::Section {
                        name: open,
                        offset,
                        body,
                    });
                }
                Some((open, _, _)) => {
                    return Err(TemplateError {
                        offset: i,
                        message: format!("{{{{/{n}}}}} closes section '{open}'"),
                    });
                }
                None => {
                    return Err(TemplateError {
                        offset: i,
                        message: format!("{{{{/{n}}}}} without a matching {{{{#{n}}}}}"),
                    });
                }
            },
        }
        i += len;
    }
    if let Some((open, off, _)) = stack.pop() {
        return Err(TemplateError {
            offset: off,
            message: format!("section {{{{#{open}}}}} is never closed"),
        });
    }
    if !text.is_empty() {
        nodes.push(Node::Text(text));
    }
    Ok(Template { nodes, vars })
}

/// Syntax check only.
#[cfg(test)]
pub(crate) fn check(template: &str) -> Result<(), TemplateError> {
    parse(template).map(|_| ())
}

impl Template {
    /// Every param the template refers to, with the offset of its first
    /// use, in order of appearance.
    pub(crate) fn params(&self) -> Vec<(String, usize)> {
        fn walk(nodes: &[Node], out: &mut Vec<(String, usize)>) {
            for n in nodes {
                match n {
                    Node::Text(_) => {}
                    Node::Var { name, offset, .. } => out.push((name.clone(), *offset)),
                    Node::Section { name, offset, body } => {
                        out.push((name.clone(), *offset));
                        walk(body, out);
                    }
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.nodes, &mut out);
        out
    }

    /// Render with values as plain text (for URLs and headers of the http
    /// executor, where no shell is involved).
    pub(crate) fn render_plain(&self, args: &Map<String, Value>) -> String {
        let mut out = String::new();
        render_nodes(&self.nodes, args, &mut out, &mut |name, _, out| {
            out.push_str(&value_text(args.get(name)));
        });
        out
    }

    /// Render with each value's text passed through `encode` (the http
    /// executor percent-encodes values in URLs).
    pub(crate) fn render_encoded(
        &self,
        args: &Map<String, Value>,
        encode: &dyn Fn(&str) -> String,
    ) -> String {
        let mut out = String::new();
        render_nodes(&self.nodes, args, &mut out, &mut |name, _, out| {
            out.push_str(&encode(&value_text(args.get(name))));
        });
        out
    }

    pub(super) fn vars_in_order(&self) -> Vec<(&str, usize)> {
        fn walk<'a>(nodes: &'a [Node], out: &mut Vec<(&'a str, usize)>) {
            for n in nodes {
                match n {
                    Node::Text(_) => {}
                    Node::Var { name, offset, .. } => out.push((name, *offset)),
                    Node::Section { body, .. } => walk(body, out),
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.nodes, &mut out);
        out
    }
}

fn present(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) | Some(Value::Bool(false)) => false,
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Array(a)) => !a.is_empty(),
        Some(Value::Object(o)) => !o.is_empty(),
        Some(_) => true,
    }
}

/// The text of a value: strings as they are, everything else as JSON.
pub(crate) fn value_text(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// POSIX shell single-quoting (for display; templates do not paste values).
#[cfg(test)]
pub(crate) fn shell_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        if c == '\'' {
            out.push_str("'\\''");
        } else {
            out.push(c);
        }
    }
    out.push('\'');
    out
}

pub(super) fn render_nodes(
    nodes: &[Node],
    args: &Map<String, Value>,
    out: &mut String,
    var: &mut dyn FnMut(&str, usize, &mut String),
) {
    for n in nodes {
        match n {
            Node::Text(t) => out.push_str(t),
            Node::Var { name, id, .. } => var(name, *id, out),
            Node::Section { name, body, .. } => {
                if present(args.get(name)) {
                    render_nodes(body, args, out, var);
                }
            }
        }
    }
}

/// [`parse`], plus: every referenced param is in `declared`; the parsed
/// template (a shell command's is checked further by
/// [`super::shellctx::check_shell`]).
pub(crate) fn check_declared(template: &str, declared: &[&str]) -> Result<Template, TemplateError> {
    let t = parse(template)?;
    for (name, offset) in t.params() {
        if !declared.contains(&name.as_str()) {
            return Err(TemplateError {
                offset,
                message: format!("'{{{{{name}}}}}' refers to an undeclared param '{name}'"),
            });
        }
    }
    Ok(t)
}
