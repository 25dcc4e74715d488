//! Upstream servers' resources: listed for the client with the server in
//! their names (URIs unchanged), each URI routed to the server that listed
//! it (or whose template it matches, when exactly one does), and each
//! read run through the call pipeline as `SERVER/resources/read` (a name
//! no tool can have): the gate asks, limits and records it like a call.
//!
//! `[upstreams.NAME] resources`: `allow` (the default), `approve` (every
//! read asks a person) or `deny` (not listed, a read refused).

use super::Gateway;
use super::instance::Instance;
use super::toolbox::{bound, failed, not_reached};
use crate::call::runner::runner_for;
use crate::call::{CallError, CallResult, PreparedCall, definition, validate};
use crate::discover::{ToolKind, ToolSpec};
use crate::gate::{DenyReason, GateDenial};
use crate::policy::{ApprovalMode, Grant, Resources};
use crate::sandbox::Exit;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The suffix of a resource read's name in the pipeline (defined with the
/// toolbox, which routes it).
pub(crate) use super::toolbox::READ;

/// How long a request of a server whose grant does not resolve may take
/// (it is never started: a bound all the same).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Pages and items of one listing, at most (an endless `nextCursor`).
const MAX_PAGES: usize = 100;
const MAX_ITEMS: usize = 10_000;

/// Where the URIs and templates a client was shown came from.
#[derive(Debug, Default)]
pub(crate) struct Routes {
    uris: BTreeMap<String, String>,
    /// (server, uriTemplate)
    templates: Vec<(String, String)>,
    /// The URIs the client subscribed to.
    subscribed: std::collections::BTreeSet<String>,
}

pub(crate) fn read_name(server: &str) -> String {
    format!("{server}{READ}")
}

impl Gateway {
    /// The running servers whose resources the client may see: those that
    /// declared the capability and whose section does not deny them.
    async fn resource_servers(self: &Arc<Self>) -> Vec<(String, Arc<Instance>)> {
        let mut out = Vec::new();
        for s in &self.servers {
            if s.settings.resources == Resources::Deny {
                continue;
            }
            let name = s.spec.name.clone();
            if let Ok(i) = self.instance(&name).await
                && i.has_resources()
            {
                out.push((name, i));
            }
        }
        out
    }

    /// `resources/list` of every server, names as `server__name`; the
    /// routes are replaced by what this listing found.
    pub(crate) async fn list_resources(self: &Arc<Self>) -> Vec<Value> {
        let mut all = Vec::new();
        let mut uris = BTreeMap::new();
        for (server, i) in self.resource_servers().await {
            for mut r in list(
                &i,
                &server,
                "resources/list",
                "resources",
                self.request_timeout(&server),
            )
            .await
            {
                let Some(uri) = r.get("uri").and_then(Value::as_str) else {
                    continue;
                };
                // The first server to list a URI keeps it: never a guess later.
                if uris.contains_key(uri) {
                    tracing::warn!("upstream {server}: resource {uri} is listed by another server");
                    continue;
                }
                uris.insert(uri.to_string(), server.clone());
                if self.prefixes(&server) {
                    prefix_name(&mut r, &server);
                }
                all.push(r);
            }
        }
        self.routes().uris = uris;
        all
    }

    /// `resources/templates/list` of every server, names as `server__name`.
    pub(crate) async fn list_resource_templates(self: &Arc<Self>) -> Vec<Value> {
        let mut all = Vec::new();
        let mut templates = Vec::new();
        for (server, i) in self.resource_servers().await {
            for mut t in list(
                &i,
                &server,
                "resources/templates/list",
                "resourceTemplates",
                self.request_timeout(&server),
            )
            .await
            {
                let Some(tpl) = t.get("uriTemplate").and_then(Value::as_str) else {
                    continue;
                };
                templates.push((server.clone(), tpl.to_string()));
                if self.prefixes(&server) {
                    prefix_name(&mut t, &server);
                }
                all.push(t);
            }
        }
        self.routes().templates = templates;
        all
    }

    fn routes(&self) -> std::sync::MutexGuard<'_, Routes> {
        self.resource_routes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// The server `uri` belongs to: the one that listed it, else the one
    /// whose template matches it when exactly one does (listing first if
    /// nothing was listed yet). `Err`: why it is not routed.
    pub(crate) async fn resource_server(self: &Arc<Self>, uri: &str) -> Result<String, String> {
        if let Some(s) = self.route(uri)? {
            return Ok(s);
        }
        self.list_resources().await;
        self.list_resource_templates().await;
        self.route(uri)?.ok_or_else(|| {
            format!(
                "resource {uri} is not one an upstream server listed, nor matches one of their \
                 templates (resources/list shows what can be read)"
            )
        })
    }

    /// The `deny` server that lists `uri` (or whose template alone matches
    /// it), asked only for a read no other server takes: the read is routed
    /// there to be refused by the gate and recorded, never sent. What a
    /// `deny` server lists is never shown to the client.
    pub(crate) async fn denied_server(self: &Arc<Self>, uri: &str) -> Option<String> {
        let mut by_template = Vec::new();
        for s in &self.servers {
            if s.settings.resources != Resources::Deny {
                continue;
            }
            let name = s.spec.name.clone();
            let Ok(i) = self.instance(&name).await else {
                continue;
            };
            if !i.has_resources() {
                continue;
            }
            let timeout = self.request_timeout(&name);
            let listed = list(&i, &name, "resources/list", "resources", timeout).await;
            if listed.iter().any(|r| r.get("uri") == Some(&json!(uri))) {
                return Some(name);
            }
            let templates = list(
                &i,
                &name,
                "resources/templates/list",
                "resourceTemplates",
                timeout,
            )
            .await;
            if templates.iter().any(|t| {
                t.get("uriTemplate")
                    .and_then(Value::as_str)
                    .is_some_and(|t| template_matches(t, uri))
            }) {
                by_template.push(name);
            }
        }
        match by_template.as_slice() {
            [one] => Some(one.clone()),
            _ => None,
        }
    }

    fn route(&self, uri: &str) -> Result<Option<String>, String> {
        let routes = self.routes();
        if let Some(s) = routes.uris.get(uri) {
            return Ok(Some(s.clone()));
        }
        let mut servers: Vec<&String> = routes
            .templates
            .iter()
            .filter(|(_, t)| template_matches(t, uri))
            .map(|(s, _)| s)
            .collect();
        servers.sort();
        servers.dedup();
        match servers.as_slice() {
            [] => Ok(None),
            [one] => Ok(Some((*one).clone())),
            many => Err(format!(
                "resource {uri} matches the templates of several upstream servers ({}); \
                 toolcage does not guess which to ask",
                many.iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }

    /// `resources/subscribe` (`on`) or `unsubscribe` of `uri`, on the
    /// server it is routed to (a `deny` server lists nothing, so none of
    /// its URIs is routed). `Err`: why not, for the client.
    pub(crate) async fn subscribe(self: &Arc<Self>, uri: &str, on: bool) -> Result<(), String> {
        let server = self.resource_server(uri).await?;
        let instance = self.instance(&server).await?;
        let params = json!({"uri": uri});
        #[allow(deprecated)] // the 2025-11-25 protocol upstreams speak
        let r = match on {
            true => match serde_json::from_value(params) {
                Ok(p) => instance.peer().subscribe(p).await,
                Err(e) => return Err(e.to_string()),
            },
            false => match serde_json::from_value(params) {
                Ok(p) => instance.peer().unsubscribe(p).await,
                Err(e) => return Err(e.to_string()),
            },
        };
        r.map_err(|e| format!("upstream server '{server}': {e}"))?;
        let mut routes = self.routes();
        match on {
            true => routes.subscribed.insert(uri.to_string()),
            false => routes.subscribed.remove(uri),
        };
        Ok(())
    }

    /// The server that listed the template `template` (exactly), if one
    /// did (a `deny` server lists none).
    pub(crate) fn template_server(&self, template: &str) -> Option<String> {
        let routes = self.routes();
        let mut servers: Vec<&String> = routes
            .templates
            .iter()
            .filter(|(_, t)| t == template)
            .map(|(s, _)| s)
            .collect();
        servers.dedup();
        match servers.as_slice() {
            [one] => Some((*one).clone()),
            _ => None,
        }
    }

    /// Whether `server` may tell the client `uri` was updated: the client
    /// subscribed to it, and it is routed to that server.
    pub(crate) fn may_report_update(&self, server: &str, uri: &str) -> bool {
        let routes = self.routes();
        routes.subscribed.contains(uri)
            && (routes.uris.get(uri).map(String::as_str) == Some(server)
                || routes
                    .templates
                    .iter()
                    .any(|(s, t)| s == server && template_matches(t, uri)))
    }

    /// A server's resource notification, passed to the client when it may
    /// be: an update of a URI the client subscribed to on that server, a
    /// list change of a server whose resources are listed.
    pub(crate) async fn resource_news(&self, server: &str, uri: Option<String>) {
        let Some(peer) = self.downstream() else {
            return;
        };
        match uri {
            Some(uri) if self.may_report_update(server, &uri) => {
                let Ok(p) = serde_json::from_value(json!({"uri": uri})) else {
                    return;
                };
                let _ = peer.notify_resource_updated(p).await;
            }
            Some(uri) => {
                tracing::debug!("upstream {server}: update of {uri} not subscribed here; dropped");
            }
            None if self.lists_resources_of(server) => {
                let _ = peer.notify_resource_list_changed().await;
            }
            None => {}
        }
    }

    /// How long one request of `server` other than a tool call (a listing,
    /// a prompt's get) may take: its grant's `timeout`, as a call's
    /// (`[upstreams.NAME.limits] timeout`).
    pub(crate) fn request_timeout(&self, server: &str) -> Duration {
        self.server(server)
            .and_then(|s| s.grant.as_ref().ok())
            .map_or(DEFAULT_TIMEOUT, |r| r.grant.timeout)
    }

    /// Whether `server`'s names carry it (`prefix`, true unless `false`).
    pub(crate) fn prefixes(&self, server: &str) -> bool {
        self.server(server).is_none_or(|s| s.settings.prefix)
    }

    /// Whether `server`'s resources are shown to the client at all.
    pub(crate) fn lists_resources_of(&self, server: &str) -> bool {
        self.server(server)
            .is_some_and(|s| s.settings.resources != Resources::Deny)
    }

    /// A read of `server`'s resource prepared for the pipeline; `None`
    /// when `name` is not one ([`READ`]).
    pub(crate) fn prepare_read(
        &self,
        name: &str,
        args: Value,
    ) -> Option<Result<PreparedCall, CallError>> {
        let server = self.server(name.strip_suffix(READ)?)?;
        Some(self.prepared_read(server, name, args))
    }

    fn prepared_read(
        &self,
        server: &super::Server,
        name: &str,
        args: Value,
    ) -> Result<PreparedCall, CallError> {
        let server_name = &server.spec.name;
        let mut resolved = server
            .grant
            .clone()
            .map_err(|e| CallError::Unsupported(format!("upstream server '{server_name}': {e}")))?;
        match server.settings.resources {
            Resources::Deny => {
                return Err(CallError::Denied(GateDenial::new(
                    DenyReason::Grant,
                    format!(
                        "{name}: the operator's policy denies the resources of upstream server \
                         '{server_name}' (resources = \"deny\" in [upstreams.{server_name}]; set \
                         it to \"allow\" or \"approve\" to let them be read)"
                    ),
                )));
            }
            Resources::Approve => resolved.grant.approval = ApprovalMode::Always,
            Resources::Allow => {}
        }
        let schema = json!({
            "type": "object",
            "properties": {"uri": {"type": "string"}},
            "required": ["uri"],
        });
        let what = format!("Read a resource of upstream server '{server_name}'");
        self.prepared_request(server, name, "resources/read", what, schema, resolved, args)
    }

    /// A request of `server` other than a tool call (`method`), prepared
    /// for the pipeline under `name` with the server's grant `resolved`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn prepared_request(
        &self,
        server: &super::Server,
        name: &str,
        method: &str,
        description: String,
        input_schema: Value,
        resolved: crate::policy::Resolved,
        args: Value,
    ) -> Result<PreparedCall, CallError> {
        let spec = ToolSpec {
            name: name.to_string(),
            format: server.spec.format,
            source: server.spec.source.clone(),
            line: server.spec.line,
            description,
            input_schema,
            requests: server.requests().clone(),
            kind: ToolKind::Upstream {
                server: server.spec.name.clone(),
                tool: method.into(),
                runs: server.spec.transport.describe(),
            },
            needs_read: Vec::new(),
        };
        let args =
            validate::arguments(&spec, args).map_err(|message| CallError::InvalidArguments {
                tool: name.to_string(),
                message,
            })?;
        let runs = runner_for(&spec).runs();
        Ok(PreparedCall {
            definition_sha256: definition::digest(&spec, &resolved.grant),
            runs,
            tool: spec,
            args,
            resolved,
            callers: Vec::new(),
        })
    }

    /// `resources/read` of `uri` on `server`, bounded by the stdout cap;
    /// the record gets the kinds, bytes and the digest of what passed.
    pub(crate) async fn read(
        self: &Arc<Self>,
        server: &str,
        uri: &str,
        grant: &Grant,
    ) -> Result<CallResult, CallError> {
        let start = Instant::now();
        let instance = match self.instance(server).await {
            Ok(i) => i,
            Err(why) => {
                return Ok(not_reached(&why, start));
            }
        };
        let enforcement = Some(instance.enforcement.clone());
        let params = serde_json::from_value(json!({"uri": uri}))
            .map_err(|e| CallError::Internal(e.to_string()))?;
        let answer =
            tokio::time::timeout(grant.timeout, instance.peer().read_resource(params)).await;
        let r = match answer {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => {
                let text =
                    format!("toolcage: upstream server '{server}' could not read {uri}: {e}");
                return Ok(failed(text, Exit::Code(1), start, enforcement));
            }
            Err(_) => {
                let text = format!(
                    "toolcage: {server}: reading {uri} timed out after {} (the policy's timeout; \
                     raise it in [upstreams.{server}.limits])",
                    crate::policy::format_duration(grant.timeout)
                );
                return Ok(failed(text, Exit::Timeout, start, enforcement));
            }
        };
        let contents = serde_json::to_value(&r)
            .ok()
            .and_then(|v| v.get("contents").cloned())
            .and_then(|c| c.as_array().cloned())
            .unwrap_or_default();
        // Bounded as an upstream tool's embedded resources are.
        let blocks: Vec<Value> = contents
            .into_iter()
            .map(|c| json!({"type": "resource", "resource": c}))
            .collect();
        let mut as_result = json!({"content": blocks});
        let b = bound(&mut as_result, grant.output.stdout);
        let contents: Vec<Value> = match as_result["content"].take() {
            Value::Array(a) => a
                .into_iter()
                .map(|mut blk| match blk.get_mut("resource").map(Value::take) {
                    Some(r) => r,
                    // A note in place of what was over the cap.
                    None => json!({"uri": uri, "mimeType": "text/plain", "text": blk["text"]}),
                })
                .collect(),
            _ => Vec::new(),
        };
        let content = json!({"contents": contents});
        let mut kinds = b.kinds;
        kinds["sha256"] = json!(sha256_hex(
            &serde_json::to_vec(&content["contents"]).unwrap_or_default()
        ));
        let mut result = failed(b.text, Exit::Code(0), start, enforcement);
        result.outcome.stdout.bytes_kept = b.kept;
        result.outcome.stdout.bytes_omitted = b.omitted;
        result.content = Some(content);
        result.content_kinds = Some(kinds);
        Ok(result)
    }
}

/// One kind of list of `i`, page by page within [`MAX_PAGES`] and
/// [`MAX_ITEMS`], each page within `timeout` (the server's); a server that
/// fails or runs past them gives what it gave so far (logged).
async fn list(
    i: &Instance,
    server: &str,
    method: &str,
    key: &str,
    timeout: Duration,
) -> Vec<Value> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let params: Option<rmcp::model::PaginatedRequestParams> = cursor
            .as_ref()
            .and_then(|c| serde_json::from_value(json!({"cursor": c})).ok());
        let page = match method {
            "resources/list" => tokio::time::timeout(timeout, i.peer().list_resources(params))
                .await
                .map(|r| r.map(|r| serde_json::to_value(r).unwrap_or_default())),
            _ => tokio::time::timeout(timeout, i.peer().list_resource_templates(params))
                .await
                .map(|r| r.map(|r| serde_json::to_value(r).unwrap_or_default())),
        };
        let page = match page {
            Ok(Ok(p)) => p,
            Ok(Err(e)) => {
                tracing::warn!("upstream {server}: {method}: {e}");
                break;
            }
            Err(_) => {
                tracing::warn!(
                    "upstream {server}: {method} timed out after {} (the policy's timeout; \
                     raise it in [upstreams.{server}.limits])",
                    crate::policy::format_duration(timeout)
                );
                break;
            }
        };
        if let Some(items) = page.get(key).and_then(Value::as_array) {
            out.extend(items.iter().cloned());
        }
        if out.len() >= MAX_ITEMS {
            out.truncate(MAX_ITEMS);
            tracing::warn!(
                "upstream {server}: {method}: over {MAX_ITEMS} items; the rest left out"
            );
            break;
        }
        cursor = page
            .get("nextCursor")
            .and_then(Value::as_str)
            .map(str::to_string);
        if cursor.is_none() {
            break;
        }
    }
    out
}

/// `name` as `server__name`, as tools are named.
fn prefix_name(item: &mut Value, server: &str) {
    if let Some(n) = item.get("name").and_then(Value::as_str) {
        item["name"] = json!(format!("{server}__{n}"));
    }
}

/// Whether `uri` has the shape of `template` (RFC 6570: each `{...}`
/// stands for some text): its literal parts, in order, with the first at
/// the start and the last at the end.
fn template_matches(template: &str, uri: &str) -> bool {
    let mut literals = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        literals.push(&rest[..open]);
        match rest[open..].find('}') {
            Some(close) => rest = &rest[open + close + 1..],
            None => return false,
        }
    }
    let Some((first, middle)) = literals.split_first() else {
        return template == uri;
    };
    let Some(mut left) = uri.strip_prefix(first) else {
        return false;
    };
    // Each expression stands for at least one character.
    for lit in middle.iter().filter(|l| !l.is_empty()) {
        match left.get(1..).and_then(|l| l.find(lit)) {
            Some(at) => left = &left[1 + at + lit.len()..],
            None => return false,
        }
    }
    left.len() > rest.len() && left.ends_with(rest)
}

pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::template_matches;

    #[test]
    fn a_template_matches_its_shape_only() {
        assert!(template_matches(
            "file:///notes/{name}",
            "file:///notes/a.txt"
        ));
        assert!(template_matches(
            "db://{table}/rows/{id}",
            "db://users/rows/7"
        ));
        assert!(!template_matches(
            "file:///notes/{name}",
            "file:///other/a.txt"
        ));
        assert!(!template_matches("file:///notes/{name}", "file:///notes/"));
        assert!(!template_matches(
            "db://{table}/rows/{id}",
            "db://users/cols/7"
        ));
        assert!(template_matches("fixed://x", "fixed://x"));
        assert!(!template_matches("fixed://x", "fixed://y"));
    }
}
