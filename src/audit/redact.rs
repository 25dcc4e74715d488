//! `[audit] redact = true`: no value a client sent reaches the log.
//!
//! Dropping `args` is not enough: a validation message quotes the value it
//! refused (`parameter 'count': "SECRET" is not of type "integer"`), a
//! denial names a host or path taken from an argument, an error repeats a
//! file name. So every text of a redacted record is scrubbed of every
//! scalar the arguments hold, in each form it can take there: JSON-quoted
//! (how schema messages print it) and raw. A raw form shorter than
//! [`MIN_RAW`] characters is scrubbed only where it stands alone (not
//! inside a longer word or number), so `"n": 4` does not blank every 4 of a
//! message; its quoted form is always scrubbed.

use serde_json::Value;

/// What a scrubbed value becomes.
pub(crate) const MARK: &str = "<redacted>";

/// Raw forms at least this long are scrubbed wherever they occur.
const MIN_RAW: usize = 4;

/// The values to scrub, longest first (so a value that contains another is
/// replaced whole).
pub(crate) struct Needles(Vec<Needle>);

struct Needle {
    text: String,
    anywhere: bool,
}

impl Needles {
    /// Every string and number inside `args`, keys excluded (they are the
    /// tool's parameter names).
    pub(crate) fn of(args: &Value) -> Needles {
        let mut out = Vec::new();
        collect(args, &mut out);
        out.sort_by(|a, b| b.text.len().cmp(&a.text.len()).then(a.text.cmp(&b.text)));
        out.dedup_by(|a, b| a.text == b.text);
        Needles(out)
    }

    /// `text` with every needle replaced by [`MARK`].
    pub(crate) fn scrub(&self, text: &str) -> String {
        let mut s = text.to_string();
        for n in &self.0 {
            s = if n.anywhere {
                s.replace(&n.text, MARK)
            } else {
                replace_standalone(&s, &n.text)
            };
        }
        s
    }

    /// Every string inside `v` scrubbed, keys included.
    pub(crate) fn scrub_value(&self, v: &mut Value) {
        match v {
            Value::String(s) => *s = self.scrub(s),
            Value::Array(items) => items.iter_mut().for_each(|i| self.scrub_value(i)),
            Value::Object(map) => {
                let old = std::mem::take(map);
                for (k, mut item) in old {
                    self.scrub_value(&mut item);
                    map.insert(self.scrub(&k), item);
                }
            }
            _ => {}
        }
    }
}

fn collect(v: &Value, out: &mut Vec<Needle>) {
    match v {
        Value::String(s) if !s.is_empty() => {
            // The JSON-quoted form: how schema messages print a string.
            out.push(Needle {
                text: Value::String(s.clone()).to_string(),
                anywhere: true,
            });
            out.push(Needle {
                text: s.clone(),
                anywhere: s.chars().count() >= MIN_RAW,
            });
        }
        Value::Number(n) => {
            let text = n.to_string();
            out.push(Needle {
                anywhere: text.chars().count() >= MIN_RAW,
                text,
            });
        }
        Value::Array(items) => items.iter().for_each(|i| collect(i, out)),
        Value::Object(map) => map.values().for_each(|i| collect(i, out)),
        _ => {}
    }
}

/// `needle` replaced where neither neighbour is a letter, digit, `_` or `.`
/// (so `4` in `4 is greater` goes, the 4 of `64` or `v4.2` stays).
fn replace_standalone(s: &str, needle: &str) -> String {
    let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.');
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find(needle) {
        let before = rest[..at]
            .chars()
            .next_back()
            .or_else(|| out.chars().next_back());
        let after = rest[at + needle.len()..].chars().next();
        out.push_str(&rest[..at]);
        if word(before) || word(after) {
            out.push_str(needle);
        } else {
            out.push_str(MARK);
        }
        rest = &rest[at + needle.len()..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_quoted_value_in_a_schema_message_is_scrubbed() {
        let n = Needles::of(&json!({"count": "SECRET-TOKEN-1"}));
        assert_eq!(
            n.scrub(r#"parameter 'count': "SECRET-TOKEN-1" is not of type "integer""#),
            r#"parameter 'count': <redacted> is not of type "integer""#
        );
        // Control: a message without the value is left as it is.
        assert_eq!(
            n.scrub("parameter 'count' is required"),
            "parameter 'count' is required"
        );
    }

    #[test]
    fn raw_values_nested_values_and_numbers_are_scrubbed() {
        let n = Needles::of(
            &json!({"q": {"host": "db.internal.example"}, "pin": 482913, "list": ["ab"]}),
        );
        assert_eq!(
            n.scrub("blocked: db.internal.example:443 (pin 482913)"),
            "blocked: <redacted>:443 (pin <redacted>)"
        );
        // A short value only where it stands alone, and always when quoted.
        assert_eq!(
            n.scrub("ab is short; \"ab\"; tab and abc stay"),
            "<redacted> is short; <redacted>; tab and abc stay"
        );
    }

    #[test]
    fn short_numbers_do_not_blank_other_numbers() {
        let n = Needles::of(&json!({"n": 4}));
        assert_eq!(
            n.scrub("4 is greater than the maximum of 3; 64 KiB; v4.2"),
            "<redacted> is greater than the maximum of 3; 64 KiB; v4.2"
        );
    }

    #[test]
    fn a_value_inside_json_is_scrubbed_in_strings_and_keys() {
        let n = Needles::of(&json!({"path": "/home/op/secret-plan.txt"}));
        let mut d = json!([{"rule": "fs", "target": "/home/op/secret-plan.txt", "fix": {"/home/op/secret-plan.txt": 1}}]);
        n.scrub_value(&mut d);
        assert_eq!(
            d,
            json!([{"rule": "fs", "target": "<redacted>", "fix": {"<redacted>": 1}}])
        );
    }
}
