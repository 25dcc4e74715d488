//! The MCP requests a client sends, answered for one [`McpServer`]: each
//! `ServerHandler` method hands its request to the file that answers it
//! (`call.rs` tools, `resources.rs` resources, prompts and completion), so
//! the server's state (`server.rs`) needs none of them.
// Logging is deprecated by SEP-2577 in rmcp (for protocol 2026-07-28); we
// target 2025-11-25, where it is current.
#![allow(deprecated)]

use super::server::{McpServer, level_rank};
use crate::call::Definition;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ListToolsResult, PaginatedRequestParams,
    ProtocolVersion, ServerConfig, SetLevelRequestParams, Tool,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use std::borrow::Cow;
use std::sync::atomic::Ordering;

/// A `tools/list` cursor: `n:<name of the last tool served>`, so pages stay
/// consistent across a reload.
fn page(
    tools: &[Definition],
    cursor: Option<&str>,
    size: usize,
) -> Result<(Vec<Tool>, Option<String>), McpError> {
    let start = match cursor {
        None => 0,
        Some(c) => {
            let last = c
                .strip_prefix("n:")
                .ok_or_else(|| McpError::invalid_params(format!("invalid cursor {c:?}"), None))?;
            tools.partition_point(|t| t.name.as_str() <= last)
        }
    };
    let size = size.max(1);
    let end = (start + size).min(tools.len());
    let slice = &tools[start..end];
    let next = (end < tools.len())
        .then(|| slice.last().map(|t| format!("n:{}", t.name)))
        .flatten();
    let tools = slice.iter().filter_map(to_tool).collect();
    Ok((tools, next))
}

fn to_tool(def: &Definition) -> Option<Tool> {
    match serde_json::from_value(def.to_json()) {
        Ok(t) => Some(t),
        Err(e) => {
            tracing::warn!("{}: cannot list the tool: {e}", def.name);
            None
        }
    }
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        self.shared.info.clone()
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::known_up_to(&ProtocolVersion::V_2025_11_25))
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        tracing::info!("client initialized");
        self.register(context.peer);
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let mut tools = self.shared.host.tools();
        let gw = self.gateway(&context.peer).await;
        let managed = self.shared.manage.get().map(|m| m.definitions());
        if gw.is_some() || managed.is_some() {
            let mut all: Vec<Definition> = tools.to_vec();
            if let Some(gw) = gw {
                all.extend(gw.listed().definitions());
            }
            if let Some(defs) = managed {
                // A management tool hides a discovered one of the same name.
                all.retain(|t| !defs.iter().any(|d| d.name == t.name));
                all.extend(defs);
            }
            all.sort_by(|a, b| a.name.cmp(&b.name));
            tools = all.into();
        }
        let cursor = request.as_ref().and_then(|r| r.cursor.as_deref());
        let (tools, next) = page(&tools, cursor, self.shared.config.page_size)?;
        let mut result = ListToolsResult::with_all_items(tools);
        result.next_cursor = next;
        Ok(result)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        super::call::call_tool(self, request, context)
            .await
            .map(CallToolResponse::from)
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourcesResult, McpError> {
        super::resources::list(self, &context).await
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourceTemplatesResult, McpError> {
        super::resources::templates(self, &context).await
    }

    async fn read_resource(
        &self,
        request: rmcp::model::ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ReadResourceResponse, McpError> {
        super::resources::read(self, request, context)
            .await
            .map(rmcp::model::ReadResourceResponse::Complete)
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListPromptsResult, McpError> {
        super::resources::list_prompts(self, &context).await
    }

    async fn get_prompt(
        &self,
        request: rmcp::model::GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetPromptResponse, McpError> {
        super::resources::get_prompt(self, request, &context)
            .await
            .map(rmcp::model::GetPromptResponse::Complete)
    }

    async fn complete(
        &self,
        request: rmcp::model::CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CompleteResult, McpError> {
        super::resources::complete(self, request, &context).await
    }

    async fn subscribe(
        &self,
        request: rmcp::model::SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        super::resources::subscribe(self, request.uri, true, &context).await
    }

    async fn unsubscribe(
        &self,
        request: rmcp::model::UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        super::resources::subscribe(self, request.uri, false, &context).await
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.session
            .log_level
            .store(level_rank(request.level), Ordering::Relaxed);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn defs(n: usize) -> Vec<Definition> {
        (0..n)
            .map(|i| Definition {
                name: format!("t{i:03}"),
                description: String::new(),
                input_schema: json!({"type": "object"}),
                annotations: json!({}),
            })
            .collect()
    }

    #[test]
    fn pages_cover_every_tool_once() {
        let all = defs(7);
        let mut cursor = None;
        let mut seen = Vec::new();
        loop {
            let (tools, next) = page(&all, cursor.as_deref(), 3).unwrap();
            seen.extend(tools.into_iter().map(|t| t.name.to_string()));
            match next {
                Some(c) => cursor = Some(c),
                None => break,
            }
        }
        let want: Vec<String> = all.iter().map(|t| t.name.clone()).collect();
        assert_eq!(seen, want);
    }

    #[test]
    fn bad_cursor_is_invalid_params() {
        let err = page(&defs(2), Some("garbage"), 3).unwrap_err();
        assert_eq!(err.code, rmcp::model::ErrorCode::INVALID_PARAMS);
    }

    #[test]
    fn exact_page_has_no_next() {
        let (tools, next) = page(&defs(3), None, 3).unwrap();
        assert_eq!(tools.len(), 3);
        assert!(next.is_none());
    }
}
