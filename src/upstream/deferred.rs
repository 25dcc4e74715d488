//! Octo's deferred tools, exactly as Octo answers them:
//!
//! - `find_tools(query)`: the query lowercased and split on whitespace;
//!   a tool scores the number of words that are substrings of
//!   `name + " " + description` (lowercased); zero scores are dropped; a
//!   stable sort by score, highest first; the top 15 as pretty JSON
//!   `[{name, description (first 200 characters), parameters}]`. No match,
//!   or an empty query: `No tools found matching '<q>'. Available servers: a, b`.
//! - `call_mcp_tool(tool_name, arguments)`: the exact name; otherwise
//!   `[Error] Tool '<n>' not found. Similar: a, b Use find_tools() to search.`
//!   where similar = up to 5 names containing the query.
//!
//! Names are the tools' own names on their servers (what Octo's registry
//! holds); `server__tool` is accepted too, and a bare name two servers
//! share is answered with both full names.

use super::exposed::{Exposed, Offered};
use crate::policy::Expose;
use serde_json::{Value, json};

const TOP: usize = 15;
const DESCRIPTION_CHARS: usize = 200;

fn index(exposed: &Exposed) -> impl Iterator<Item = &Offered> {
    exposed
        .tools
        .iter()
        .filter(|t| t.expose == Expose::Deferred)
}

/// The name `call_mcp_tool` takes for `t`: the server's own name for it,
/// as Octo gives, unless another server offers a tool of that name too;
/// then its flat `server__tool` name.
fn callable<'a>(exposed: &'a Exposed, t: &'a Offered) -> &'a str {
    let shared = index(exposed)
        .filter(|o| o.tool.name == t.tool.name)
        .nth(1)
        .is_some();
    if shared { &t.name } else { &t.tool.name }
}

/// `find_tools(query)`'s answer.
pub(crate) fn find_tools(exposed: &Exposed, servers: &[String], query: &str) -> String {
    let words: Vec<String> = query
        .to_lowercase()
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    let mut scored: Vec<(usize, &Offered)> = index(exposed)
        .map(|t| {
            let hay = format!(
                "{} {}",
                t.tool.name,
                t.tool.description.as_deref().unwrap_or_default()
            )
            .to_lowercase();
            (words.iter().filter(|w| hay.contains(w.as_str())).count(), t)
        })
        .filter(|(score, _)| *score > 0)
        .collect();
    if scored.is_empty() {
        return format!(
            "No tools found matching '{query}'. Available servers: {}",
            servers.join(", ")
        );
    }
    scored.sort_by_key(|s| std::cmp::Reverse(s.0));
    let out: Vec<Value> = scored
        .iter()
        .take(TOP)
        .map(|(_, t)| {
            json!({
                "name": callable(exposed, t),
                "description": t.tool.description.as_deref().unwrap_or_default()
                    .chars().take(DESCRIPTION_CHARS).collect::<String>(),
                "parameters": Value::Object((*t.tool.input_schema).clone()),
            })
        })
        .collect();
    serde_json::to_string_pretty(&out).unwrap_or_default()
}

/// Which tool `call_mcp_tool(tool_name)` means: its flat name, or the
/// text to answer with.
pub(crate) fn resolve(exposed: &Exposed, tool_name: &str) -> Result<String, String> {
    if let Some(why) = &exposed.unusable {
        return Err(format!("[Error] {why}"));
    }
    let matches: Vec<&Offered> = index(exposed)
        .filter(|t| t.tool.name == tool_name || t.name == tool_name)
        .collect();
    match matches.as_slice() {
        [one] => Ok(one.name.clone()),
        [] => {
            let mut similar: Vec<&str> = index(exposed)
                .filter(|t| t.tool.name.contains(tool_name) || t.name.contains(tool_name))
                .map(|t| callable(exposed, t))
                .collect();
            similar.dedup();
            similar.truncate(5);
            Err(format!(
                "[Error] Tool '{tool_name}' not found. Similar: {} Use find_tools() to search.",
                similar.join(", ")
            ))
        }
        many => Err(format!(
            "[Error] Tool '{tool_name}' is offered by more than one server: {}. Call it by one of these names.",
            many.iter()
                .map(|t| t.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}
