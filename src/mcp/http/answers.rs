//! The answers the endpoint gives of its own (not rmcp's): plain text, and
//! the JSON-RPC errors for an unknown session, a draining server, too many
//! sessions and a body that is not one JSON-RPC message.

use bytes::Bytes;
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::{Response, StatusCode};
use std::convert::Infallible;

/// A plain-text answer.
pub(super) fn text(status: StatusCode, body: String) -> Response<BoxBody<Bytes, Infallible>> {
    let mut out = Response::new(Full::new(Bytes::from(body)).boxed());
    *out.status_mut() = status;
    out.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    out
}

/// 404, as the MCP transport spec says for an unknown session: the client
/// starts a new one.
pub(super) fn no_such_session(id: &str) -> Response<BoxBody<Bytes, Infallible>> {
    tracing::info!(
        "a request for session {:?}, which this server does not hold: 404",
        crate::text::one_line(id)
    );
    json_error(
        StatusCode::NOT_FOUND,
        -32001,
        "session not found: this server does not hold the Mcp-Session-Id sent (it ended, the \
         server restarted, or a load balancer sent the request to another replica); start a \
         new session with initialize",
    )
}

/// 503 with `Retry-After` for a new session while draining: a balancer or
/// the client's retry reaches another replica.
pub(super) fn draining() -> Response<BoxBody<Bytes, Infallible>> {
    let mut out = json_error(
        StatusCode::SERVICE_UNAVAILABLE,
        -32000,
        "this server is draining (shutting down; it only finishes the calls already running): \
         open the session on another replica",
    );
    out.headers_mut().insert(
        hyper::header::RETRY_AFTER,
        hyper::header::HeaderValue::from_static("1"),
    );
    out
}

/// A JSON-RPC error with `id` null, as HTTP `status`.
fn json_error(
    status: StatusCode,
    code: i64,
    message: &str,
) -> Response<BoxBody<Bytes, Infallible>> {
    let body = serde_json::json!({"jsonrpc": "2.0", "id": null, "error": {
        "code": code,
        "message": message,
    }});
    let mut out = Response::new(Full::new(Bytes::from(body.to_string())).boxed());
    *out.status_mut() = status;
    out.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    out
}

/// 503 at `--max-sessions`.
pub(super) fn too_many_sessions(max: usize) -> Response<BoxBody<Bytes, Infallible>> {
    tracing::warn!("refused a new session: {max} are open (--max-sessions)");
    json_error(
        StatusCode::SERVICE_UNAVAILABLE,
        -32000,
        &format!(
            "too many open sessions ({max}); end one with DELETE /mcp, wait for an idle one \
             to expire, or raise --max-sessions"
        ),
    )
}

/// rmcp answers a JSON body it cannot decode with 415 and a text line. The
/// media type was right, the body was not: 400 with a JSON-RPC error, as
/// JSON-RPC 2.0 and the MCP transport spec expect. Not JSON (or not UTF-8):
/// -32700 Parse error, `id` null. JSON that is not a message (a batch array,
/// which 2025-11-25 no longer has, a number, a string, `null`, an object
/// without a method): -32600 Invalid Request, with the object's id when it
/// has a usable one, else `id` null.
pub(super) async fn undecodable(
    resp: Response<BoxBody<Bytes, Infallible>>,
    body: &[u8],
) -> Response<BoxBody<Bytes, Infallible>> {
    let (parts, rmcp_body) = resp.into_parts();
    let text = match rmcp_body.collect().await {
        Ok(b) => String::from_utf8_lossy(&b.to_bytes()).into_owned(),
        Err(never) => match never {},
    };
    let Some(why) = text.strip_prefix("fail to deserialize request body") else {
        return Response::from_parts(parts, Full::new(Bytes::from(text)).boxed());
    };
    let (code, id, message) = match serde_json::from_slice::<serde_json::Value>(body) {
        Err(_) => (
            -32700,
            serde_json::Value::Null,
            format!(
                "Parse error:{} (the body must be one JSON-RPC message in UTF-8 JSON)",
                why.trim_end()
            ),
        ),
        Ok(serde_json::Value::Object(m)) => (
            -32600,
            m.get("id")
                .filter(|id| id.is_string() || id.is_number())
                .cloned()
                .unwrap_or_default(),
            format!(
                "Invalid Request:{} (a request needs \"jsonrpc\": \"2.0\", a method, and an id unless it is a notification)",
                why.trim_end()
            ),
        ),
        Ok(other) => (
            -32600,
            serde_json::Value::Null,
            format!(
                "Invalid Request: the body is JSON {} but must be one JSON-RPC message, a JSON object (batches are not supported)",
                kind(&other)
            ),
        ),
    };
    let body = serde_json::json!({"jsonrpc": "2.0", "id": id, "error": {
        "code": code,
        "message": message,
    }});
    let mut out = Response::new(Full::new(Bytes::from(body.to_string())).boxed());
    *out.status_mut() = StatusCode::BAD_REQUEST;
    out.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    out
}

fn kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Null => "null",
        serde_json::Value::Object(_) => "an object",
    }
}
