//! A tool result as the MCP server answers it: the text, whether it is an
//! error, and the `_meta` every result carries. Its own file so the call
//! path and the management tools both build results without needing each
//! other.

use crate::audit::record::not_ran;
use rmcp::model::CallToolResult;
use serde_json::{Value, json};

/// A result with `_meta`; every result carries `toolcage/enforcement` and
/// `toolcage/denials` (docs/results.md#mcp-results): where `meta` has none, nothing
/// ran in a sandbox (toolcage answered itself: `find_tools`, a management
/// tool) and nothing was refused.
pub(crate) fn build(text: String, is_error: bool, mut meta: Value) -> CallToolResult {
    if let Some(m) = meta.as_object_mut() {
        m.entry("toolcage/enforcement").or_insert_with(|| {
            not_ran("nothing ran in a sandbox: toolcage answered this call itself".into())
        });
        m.entry("toolcage/denials").or_insert_with(|| json!([]));
    }
    let v = json!({
        "content": [{"type": "text", "text": text}],
        "isError": is_error,
        "_meta": meta,
    });
    match serde_json::from_value::<CallToolResult>(v) {
        Ok(r) => r,
        Err(e) => {
            tracing::error!("building a tool result: {e}");
            CallToolResult::error(vec![rmcp::model::ContentBlock::text(text)])
        }
    }
}
