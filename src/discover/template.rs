//! OpenCrabs command templates: `{{param}}` and `{{#param}}…{{/param}}`.
//!
//! Every substituted value is **shell-quoted** (`'…'`, with `'` written as
//! `'\''`): strings as they are, numbers and booleans as their JSON text,
//! arrays and objects as their JSON text; a missing or null value renders
//! as `''`. A value can therefore never be parsed as shell syntax.
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
//! - [`check_shell`] also rejects a `{{param}}` written inside shell quotes
//!   (`"q={{q}}"`): inside double quotes the single quotes we add are
//!   literal, so `$(…)` in the value would run. Write `q={{q}}` instead.

use serde_json::{Map, Value};

/// Where and why a template is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("template error at byte {offset}: {message}")]
pub struct TemplateError {
    pub offset: usize,
    pub message: String,
}

/// A parsed template.
#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    nodes: Vec<Node>,
}

#[derive(Debug, Clone, PartialEq)]
enum Node {
    Text(String),
    Var {
        name: String,
        offset: usize,
    },
    Section {
        name: String,
        offset: usize,
        body: Vec<Node>,
    },
}

/// `[A-Za-z_][A-Za-z0-9_-]*`: a name a template tag can refer to.
pub fn valid_param_name(s: &str) -> bool {
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

/// Parse a template.
pub fn parse(template: &str) -> Result<Template, TemplateError> {
    // Stack of open sections: (name, offset, nodes before it).
    let mut stack: Vec<(String, usize, Vec<Node>)> = Vec::new();
    let mut nodes: Vec<Node> = Vec::new();
    let mut text = String::new();
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
            Tag::Var(n) => nodes.push(Node::Var {
                name: n.to_owned(),
                offset: i,
            }),
            Tag::Open(n) => stack.push((n.to_owned(), i, std::mem::take(&mut nodes))),
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
    Ok(Template { nodes })
}

/// Syntax check only.
pub fn check(template: &str) -> Result<(), TemplateError> {
    parse(template).map(|_| ())
}

impl Template {
    /// Every param the template refers to, with the offset of its first
    /// use, in order of appearance.
    pub fn params(&self) -> Vec<(String, usize)> {
        fn walk(nodes: &[Node], out: &mut Vec<(String, usize)>) {
            for n in nodes {
                match n {
                    Node::Text(_) => {}
                    Node::Var { name, offset } => out.push((name.clone(), *offset)),
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

    /// Render with every value shell-quoted.
    pub fn render(&self, args: &Map<String, Value>) -> String {
        let mut out = String::new();
        render_nodes(&self.nodes, args, &mut out, true);
        out
    }

    /// Render with values as plain text (for URLs and headers of the http
    /// executor, where no shell is involved).
    pub fn render_plain(&self, args: &Map<String, Value>) -> String {
        let mut out = String::new();
        render_nodes(&self.nodes, args, &mut out, false);
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
pub fn value_text(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// POSIX shell single-quoting.
pub fn shell_quote(s: &str) -> String {
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

fn render_nodes(nodes: &[Node], args: &Map<String, Value>, out: &mut String, quote: bool) {
    for n in nodes {
        match n {
            Node::Text(t) => out.push_str(t),
            Node::Var { name, .. } => {
                let t = value_text(args.get(name));
                if quote {
                    out.push_str(&shell_quote(&t));
                } else {
                    out.push_str(&t);
                }
            }
            Node::Section { name, body, .. } => {
                if present(args.get(name)) {
                    render_nodes(body, args, out, quote);
                }
            }
        }
    }
}

/// Parse and render with shell quoting (the call-time entry point).
pub fn render(template: &str, args: &Map<String, Value>) -> Result<String, TemplateError> {
    Ok(parse(template)?.render(args))
}

/// [`check`], plus: every referenced param is in `declared`, and (for shell
/// commands) no `{{param}}` sits inside shell quotes.
pub fn check_declared(template: &str, declared: &[&str], shell: bool) -> Result<(), TemplateError> {
    let t = parse(template)?;
    for (name, offset) in t.params() {
        if !declared.contains(&name.as_str()) {
            return Err(TemplateError {
                offset,
                message: format!("'{{{{{name}}}}}' refers to an undeclared param '{name}'"),
            });
        }
    }
    if shell {
        check_shell(&t)?;
    }
    Ok(())
}

/// Reject `{{param}}` inside single or double shell quotes (see the module
/// doc). A small lexer over the literal text: `\` escapes outside single
/// quotes, `'…'` and `"…"` quote.
pub fn check_shell(t: &Template) -> Result<(), TemplateError> {
    #[derive(Clone, Copy, PartialEq)]
    enum Q {
        None,
        Single,
        Double,
    }
    fn walk(nodes: &[Node], q: &mut Q, esc: &mut bool) -> Result<(), TemplateError> {
        for n in nodes {
            match n {
                Node::Text(s) => {
                    for c in s.chars() {
                        if *esc {
                            *esc = false;
                            continue;
                        }
                        match (*q, c) {
                            (Q::None, '\\') | (Q::Double, '\\') => *esc = true,
                            (Q::None, '\'') => *q = Q::Single,
                            (Q::None, '"') => *q = Q::Double,
                            (Q::Single, '\'') | (Q::Double, '"') => *q = Q::None,
                            _ => {}
                        }
                    }
                }
                Node::Var { name, offset } => {
                    *esc = false;
                    if *q != Q::None {
                        return Err(TemplateError {
                            offset: *offset,
                            message: format!(
                                "'{{{{{name}}}}}' is inside shell quotes, where its quoting does not protect it; remove the quotes around it (values are shell-quoted automatically)"
                            ),
                        });
                    }
                }
                Node::Section { name, offset, body } => {
                    let before = *q;
                    walk(body, q, esc)?;
                    if *q != before {
                        return Err(TemplateError {
                            offset: *offset,
                            message: format!(
                                "section '{name}' opens or closes a shell quote; balance the quotes inside the section"
                            ),
                        });
                    }
                }
            }
        }
        Ok(())
    }
    walk(&t.nodes, &mut Q::None, &mut false)
}

#[cfg(test)]
#[path = "tests/template.rs"]
mod tests;
