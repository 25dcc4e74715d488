//! The keys of the two kinds: `kind: script` (a QuickJS program and its
//! limits) and `kind: mcp` (an upstream server and how to reach it).

use super::{Cx, Kind};
use crate::discover::{Diagnostic, valid_env_name};
use serde_yaml_ng::{Mapping, Value as Yaml};
use std::path::{Component, Path};

fn limit(limits: &Mapping, key: &str, max: u64, cx: &mut Cx) -> Option<u64> {
    match limits.get(key) {
        None | Some(Yaml::Null) => None,
        Some(Yaml::Number(n)) => match n.as_u64() {
            Some(v) if (1..=max).contains(&v) => Some(v),
            _ => {
                cx.err_at(
                    key,
                    format!("illegal limit {key}: {n}"),
                    &format!("use an integer from 1 to {max}"),
                );
                None
            }
        },
        Some(_) => {
            cx.err_at(
                key,
                format!("illegal limit {key}: not a number"),
                &format!("use an integer from 1 to {max}"),
            );
            None
        }
    }
}

pub(super) fn parse_script(m: &Mapping, cx: &mut Cx) -> Option<Kind> {
    let path = cx.string(m, "path");
    let allowed_tools = cx.strings(m, "allowed_tools");
    let (mut timeout_ms, mut max_tool_calls, mut max_output_bytes) = (None, None, None);
    match m.get("limits") {
        None | Some(Yaml::Null) => {}
        Some(Yaml::Mapping(l)) => {
            for k in l.keys() {
                let known = matches!(
                    k.as_str(),
                    Some("timeoutMs" | "maxToolCalls" | "maxOutputBytes")
                );
                if !known {
                    let k = k.as_str().unwrap_or("?");
                    cx.diags.push(
                        Diagnostic::warning(
                            cx.file,
                            Some(1),
                            format!("unknown limit '{k}' ignored"),
                        )
                        .fix("use timeoutMs, maxToolCalls or maxOutputBytes"),
                    );
                }
            }
            timeout_ms = limit(l, "timeoutMs", 600_000, cx);
            max_tool_calls = limit(l, "maxToolCalls", 10_000, cx);
            max_output_bytes = limit(l, "maxOutputBytes", 64 << 20, cx);
        }
        Some(_) => cx.err_at(
            "limits",
            "'limits' must be a mapping",
            "write timeoutMs/maxToolCalls/maxOutputBytes under limits",
        ),
    }
    let Some(path) = path.filter(|p| !p.is_empty()) else {
        cx.err(
            "script tool without 'path'",
            "add `path: scripts/<name>.js`",
        );
        return None;
    };
    if let Err(e) = lexically_inside(&path) {
        cx.err_at(
            "path",
            format!("path '{path}' {e}"),
            "use a path inside the AgentDir",
        );
        return None;
    }
    Some(Kind::Script {
        path,
        allowed_tools,
        timeout_ms,
        max_tool_calls,
        max_output_bytes,
    })
}

/// A relative path whose `..` never climbs above the root.
fn lexically_inside(p: &str) -> Result<(), &'static str> {
    let mut depth: usize = 0;
    for c in Path::new(p).components() {
        match c {
            Component::RootDir | Component::Prefix(_) => return Err("is absolute"),
            Component::ParentDir => depth = depth.checked_sub(1).ok_or("escapes the AgentDir")?,
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
        }
    }
    Ok(())
}

pub(super) fn parse_mcp(m: &Mapping, cx: &mut Cx) -> Option<Kind> {
    let transport = cx.string(m, "transport").unwrap_or_default();
    let command = cx.string(m, "command");
    let args = cx.strings(m, "args");
    let url = cx.string(m, "url");
    let mut env = Vec::new();
    match m.get("env") {
        None | Some(Yaml::Null) => {}
        Some(Yaml::Mapping(e)) => {
            for (k, v) in e {
                let v = match v {
                    Yaml::String(s) => Some(s.clone()),
                    Yaml::Number(n) => Some(n.to_string()),
                    Yaml::Bool(b) => Some(b.to_string()),
                    _ => None,
                };
                match (k.as_str(), v) {
                    (Some(k), Some(v)) if valid_env_name(k) => env.push((k.to_owned(), v)),
                    (k, _) => cx.err_at(
                        k.unwrap_or("env"),
                        format!("env entry {:?} must be NAME: string", k.unwrap_or("?")),
                        "write `NAME: \"${VAR}\"`",
                    ),
                }
            }
        }
        Some(_) => cx.err_at(
            "env",
            "'env' must be a mapping",
            "write `NAME: \"${VAR}\"` lines under env",
        ),
    }
    match transport.as_str() {
        "stdio" => {
            if command.as_deref().is_none_or(str::is_empty) {
                cx.err(
                    "stdio mcp tool without 'command'",
                    "add `command: npx` (and args)",
                );
            }
        }
        "http" => match url.as_deref() {
            Some(u) if u.starts_with("http://") || u.starts_with("https://") => {}
            _ => cx.err_at(
                "url",
                "http mcp tool needs an http(s):// 'url'",
                "add `url: https://...`",
            ),
        },
        "" => cx.err(
            "mcp tool without 'transport'",
            "add `transport: stdio` or `transport: http`",
        ),
        t => cx.err_at(
            "transport",
            format!("unknown transport '{t}'"),
            "use stdio or http",
        ),
    }
    Some(Kind::Mcp {
        transport,
        command,
        args,
        url,
        env,
    })
}
