//! MCP tool annotations (docs/mcp.md#annotations) from the grant and from what
//! the tool declares, together.
//!
//! The rule: the grant bounds, a declaration can only be more precise
//! inside it, and only a declaration toolcage itself carries out counts.
//! - A read-only grant (no write roots besides `/dev/null`; the private
//!   tmp does not count): `readOnlyHint: true`, `destructiveHint: false`,
//!   whatever the tool says. The sandbox enforces it.
//! - A writable grant: `readOnlyHint: false` and `destructiveHint: true`,
//!   unless the tool declares otherwise in a way toolcage enforces. No
//!   format has a read-only, destructive or idempotent marker for a
//!   process (Octomind headers, clawd's `tool.json`, OpenCrabs shell tools,
//!   A3S front matter have none), and a comment or a description is a
//!   claim, not a declaration: such tools keep `destructiveHint: true`.
//! - An OpenCrabs `executor = "http"` tool runs no process: toolcage sends
//!   the request itself and writes no file, so its file grant does not
//!   apply. Its declared method decides, as HTTP defines methods (RFC 9110
//!   section 9.2): GET, HEAD, OPTIONS are safe (`readOnlyHint: true`);
//!   anything else may change the remote side (`destructiveHint: true`);
//!   GET, HEAD, OPTIONS, PUT, DELETE are idempotent (`idempotentHint`).
//! - `openWorldHint`: any network access in the grant.

use crate::discover::{ToolKind, ToolSpec};
use crate::policy::{Grant, Network};
use serde_json::{Value, json};

/// `{readOnlyHint, destructiveHint, openWorldHint}` (and `idempotentHint`
/// where the tool declares it) for `tool` run under `grant`.
pub(crate) fn annotations(tool: &ToolSpec, grant: &Grant) -> Value {
    let open_world = grant.network != Network::Off;
    if let ToolKind::OpencrabsHttp { method, .. } = &tool.kind {
        let method = method.to_ascii_uppercase();
        let safe = matches!(method.as_str(), "GET" | "HEAD" | "OPTIONS");
        let idempotent = safe || matches!(method.as_str(), "PUT" | "DELETE");
        return json!({
            "readOnlyHint": safe,
            "destructiveHint": !safe,
            "idempotentHint": idempotent,
            "openWorldHint": open_world,
        });
    }
    let read_only = grant.is_read_only();
    json!({
        "readOnlyHint": read_only,
        "destructiveHint": !read_only,
        "openWorldHint": open_world,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(runner: ToolKind) -> ToolSpec {
        ToolSpec {
            name: "t".into(),
            format: crate::spec::Format::Opencrabs,
            source: "/p/tools.toml".into(),
            line: None,
            description: String::new(),
            input_schema: json!({"type": "object"}),
            requests: Default::default(),
            kind: runner,
            needs_read: vec![],
        }
    }

    fn shell() -> ToolSpec {
        tool(ToolKind::OpencrabsShell {
            command: "true".into(),
            params: vec![],
        })
    }

    fn http(method: &str) -> ToolSpec {
        tool(ToolKind::OpencrabsHttp {
            method: method.into(),
            url: "https://example.com/".into(),
            headers: vec![],
            params: vec![],
        })
    }

    #[test]
    fn a_process_follows_the_grant() {
        let mut g = Grant::closed("/p".into());
        g.write = vec!["/dev/null".into()];
        assert_eq!(
            annotations(&shell(), &g),
            json!({"readOnlyHint": true, "destructiveHint": false, "openWorldHint": false})
        );
        g.write.push("/p".into());
        g.network = Network::On;
        assert_eq!(
            annotations(&shell(), &g),
            json!({"readOnlyHint": false, "destructiveHint": true, "openWorldHint": true})
        );
        g.network = Network::Tcp {
            connect: vec![443],
            bind: vec![],
        };
        assert_eq!(annotations(&shell(), &g)["openWorldHint"], true);
    }

    #[test]
    fn an_http_tool_follows_its_method_whatever_the_file_grant() {
        let mut g = Grant::closed("/p".into());
        g.write = vec!["/p".into(), "/dev/null".into()];
        let get = annotations(&http("get"), &g);
        assert_eq!(
            get,
            json!({"readOnlyHint": true, "destructiveHint": false,
                   "idempotentHint": true, "openWorldHint": false})
        );
        let post = annotations(&http("POST"), &g);
        assert_eq!(
            (
                post["readOnlyHint"].clone(),
                post["destructiveHint"].clone()
            ),
            (json!(false), json!(true))
        );
        assert_eq!(post["idempotentHint"], false);
        assert_eq!(annotations(&http("DELETE"), &g)["idempotentHint"], true);
    }
}
