//! `resources/list`, `resources/templates/list` and `resources/read`: the
//! session's upstream servers' resources ([`crate::upstream::resources`]).
//! A read is routed to the server that listed the URI and runs through
//! the call pipeline (queue, gate, audit) as `SERVER/resources/read`; a
//! refusal or a failure is a JSON-RPC error whose message says why.

use super::McpServer;
use super::call::admit_and_run;
use crate::call::CallError;
use crate::upstream::resources::read_name;
use rmcp::model::{
    ListResourceTemplatesResult, ListResourcesResult, ReadResourceRequestParams, ReadResourceResult,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::{Value, json};

pub(crate) async fn list(
    server: &McpServer,
    context: &RequestContext<RoleServer>,
) -> Result<ListResourcesResult, McpError> {
    let items = match server.gateway(&context.peer).await {
        Some(gw) => gw.list_resources().await,
        None => Vec::new(),
    };
    parse(json!({"resources": items}))
}

pub(crate) async fn templates(
    server: &McpServer,
    context: &RequestContext<RoleServer>,
) -> Result<ListResourceTemplatesResult, McpError> {
    let items = match server.gateway(&context.peer).await {
        Some(gw) => gw.list_resource_templates().await,
        None => Vec::new(),
    };
    parse(json!({"resourceTemplates": items}))
}

pub(crate) async fn read(
    server: &McpServer,
    request: ReadResourceRequestParams,
    context: RequestContext<RoleServer>,
) -> Result<ReadResourceResult, McpError> {
    let uri = request.uri;
    let not_found = |why: String| McpError::resource_not_found(why, Some(json!({"uri": uri})));
    let Some(gw) = server.gateway(&context.peer).await else {
        return Err(not_found(format!(
            "resource {uri}: this project declares no upstream server"
        )));
    };
    // A URI only a `deny` server has goes to the gate, to be refused and
    // recorded; any other is not found.
    let upstream = match gw.resource_server(&uri).await {
        Ok(s) => s,
        Err(why) => gw.denied_server(&uri).await.ok_or_else(|| not_found(why))?,
    };
    let name = read_name(&upstream);
    let pipeline = server.pipeline();
    let _in_flight = server.shared.calls.token();
    let r = admit_and_run(server, &pipeline, &context, &name, json!({"uri": uri})).await;
    match r {
        Ok(r) if !r.is_error => match r.content {
            Some(content) => parse(content),
            None => Err(McpError::internal_error(r.text, None)),
        },
        Ok(r) => Err(McpError::internal_error(r.text, Some(json!({"uri": uri})))),
        Err(CallError::Denied(d)) => Err(McpError::invalid_request(
            format!("toolcage: {}", d.message),
            Some(json!({"uri": uri, "toolcage/denial": d.reason.code()})),
        )),
        Err(e) => Err(McpError::invalid_request(
            format!("toolcage: {e}"),
            Some(json!({"uri": uri})),
        )),
    }
}

/// `resources/subscribe` (`on`) or `unsubscribe`: forwarded to the server
/// the URI is routed to.
pub(crate) async fn subscribe(
    server: &McpServer,
    uri: String,
    on: bool,
    context: &RequestContext<RoleServer>,
) -> Result<(), McpError> {
    let not_found = |why: String| McpError::resource_not_found(why, Some(json!({"uri": uri})));
    let Some(gw) = server.gateway(&context.peer).await else {
        return Err(not_found(format!(
            "resource {uri}: this project declares no upstream server"
        )));
    };
    gw.subscribe(&uri, on).await.map_err(not_found)
}

/// `prompts/list`: the upstream servers' prompts not held.
pub(crate) async fn list_prompts(
    server: &McpServer,
    context: &RequestContext<RoleServer>,
) -> Result<rmcp::model::ListPromptsResult, McpError> {
    let items = match server.gateway(&context.peer).await {
        Some(gw) => gw.list_prompts().await,
        None => Vec::new(),
    };
    parse(json!({"prompts": items}))
}

/// `prompts/get`: run through the call pipeline (queue, gate, audit) as
/// `SERVER/prompts/get`, whose prepare refuses a held prompt or wrong
/// arguments before the server is asked; a prompt no server offers is
/// refused and recorded as `prompts/get`. A refusal or a failure is a
/// JSON-RPC error whose message says why.
pub(crate) async fn get_prompt(
    server: &McpServer,
    request: rmcp::model::GetPromptRequestParams,
    context: &RequestContext<RoleServer>,
) -> Result<rmcp::model::GetPromptResult, McpError> {
    use crate::upstream::prompts::get_name;
    let name = request.name;
    let data = Some(json!({"prompt": name}));
    let args = json!({"name": name, "arguments": request.arguments.unwrap_or_default()});
    let upstream = match server.gateway(&context.peer).await {
        Some(gw) => gw.prompt_server(&name).await,
        None => None,
    };
    let pipeline = server.pipeline();
    let Some(upstream) = upstream else {
        let why = format!("no prompt '{name}' (prompts/list shows the prompts offered)");
        let refused = CallError::InvalidArguments {
            tool: "prompts/get".into(),
            message: why.clone(),
        };
        return Err(
            match pipeline.refuse("prompts/get", &args, &server.session.id, refused) {
                CallError::InvalidArguments { .. } => McpError::invalid_params(why, data),
                e => McpError::internal_error(format!("toolcage: {e}"), data),
            },
        );
    };
    let _in_flight = server.shared.calls.token();
    let r = admit_and_run(server, &pipeline, context, &get_name(&upstream), args).await;
    match r {
        Ok(r) if !r.is_error => match r.content {
            Some(content) => parse(content),
            None => Err(McpError::internal_error(r.text, data)),
        },
        Ok(r) => Err(McpError::internal_error(r.text, data)),
        Err(CallError::Denied(d)) => Err(McpError::invalid_request(
            format!("toolcage: {}", d.message),
            Some(json!({"prompt": name, "toolcage/denial": d.reason.code()})),
        )),
        Err(CallError::InvalidArguments { message, .. }) => {
            Err(McpError::invalid_params(message, data))
        }
        Err(e) => Err(McpError::invalid_request(format!("toolcage: {e}"), data)),
    }
}

/// `completion/complete`: routed to the server the reference names.
pub(crate) async fn complete(
    server: &McpServer,
    request: rmcp::model::CompleteRequestParams,
    context: &RequestContext<RoleServer>,
) -> Result<rmcp::model::CompleteResult, McpError> {
    let request =
        serde_json::to_value(request).map_err(|e| McpError::internal_error(e.to_string(), None))?;
    let Some(gw) = server.gateway(&context.peer).await else {
        return Err(McpError::invalid_params(
            "nothing to complete: this project declares no upstream server",
            None,
        ));
    };
    match gw.complete(request).await {
        Ok(v) => parse(v),
        Err(why) => Err(McpError::invalid_params(why, None)),
    }
}

fn parse<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, McpError> {
    serde_json::from_value(v).map_err(|e| McpError::internal_error(e.to_string(), None))
}
