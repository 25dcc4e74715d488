//! MCP over Streamable HTTP at `/mcp`, with sessions (rmcp's
//! `StreamableHttpService` + `LocalSessionManager`) served by hyper.
//!
//! Defaults that matter for a local tool runner: every request must carry
//! the server's bearer token, else 401 (see [`super::auth`]); bind 127.0.0.1
//! when only a port is given; `Host` must be a loopback name (DNS
//! rebinding); a present `Origin` must be a loopback origin, anything else
//! gets 403; bodies over `max_message_bytes` get 413. Every other path is
//! 404.
//!
//! Bounds: at most `max_connections` connections are open (at the limit a
//! new one takes the place of the oldest that never sent an admitted
//! request, or accepting waits: see [`super::connections`]; a failed accept,
//! such as EMFILE, backs off instead of spinning), and a client has
//! `header_timeout` to send a request's headers, or to start the next one on
//! a kept-alive connection.

use super::McpServer;
use super::auth::{self, Auth};
use super::connections::{AcceptBackoff, Connections};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::{Request, Response, StatusCode, body::Incoming};
use hyper_util::rt::{TokioIo, TokioTimer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// The MCP endpoint path.
pub const PATH: &str = "/mcp";

/// `8080` and `:8080` mean 127.0.0.1:8080; otherwise `IP:PORT` or
/// `HOST:PORT`.
pub fn parse_addr(s: &str) -> Result<SocketAddr, String> {
    let port_only = s.strip_prefix(':').unwrap_or(s);
    if let Ok(port) = port_only.parse::<u16>() {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Ok(a);
    }
    s.to_socket_addrs()
        .ok()
        .and_then(|mut it| it.next())
        .ok_or_else(|| format!("invalid --http address {s:?} (use PORT, :PORT or IP:PORT)"))
}

/// A bound listener, so the caller can learn the port before serving.
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}

fn config(
    server: &McpServer,
    local: SocketAddr,
    shutdown: &CancellationToken,
) -> StreamableHttpServerConfig {
    let mut hosts = vec!["localhost".to_string(), "127.0.0.1".into(), "::1".into()];
    let ip = local.ip();
    if !ip.is_loopback() && !ip.is_unspecified() {
        hosts.push(ip.to_string());
    }
    if ip.is_unspecified() {
        tracing::warn!("listening on {ip}: only requests with a loopback Host header are accepted");
    }
    let origins = [
        "http://localhost:*",
        "http://127.0.0.1:*",
        "http://[::1]:*",
        "https://localhost:*",
        "https://127.0.0.1:*",
        "https://[::1]:*",
    ];
    StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_allowed_origins(origins)
        .enforce_origin_validation()
        .with_max_request_body_bytes(server.shared.config.max_message_bytes)
        .with_cancellation_token(shutdown.child_token())
}

/// Serve until `shutdown` is cancelled, admitting only requests that
/// `auth` admits.
pub async fn serve_http(
    server: McpServer,
    listener: TcpListener,
    auth: Auth,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let local = listener.local_addr()?;
    let factory = server.clone();
    let sessions = Arc::new(LocalSessionManager::default());
    let max_sessions = server.shared.config.max_sessions;
    let service = Arc::new(StreamableHttpService::new(
        move || Ok(factory.session()),
        sessions.clone(),
        config(&server, local, &shutdown),
    ));
    tracing::info!("MCP over HTTP at http://{local}{PATH}");
    let connections = Connections::new(server.shared.config.max_connections);
    let header_timeout = server.shared.config.header_timeout;
    let mut accept_failures = AcceptBackoff::default();
    loop {
        let (stream, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(x) => {
                    accept_failures.succeeded();
                    x
                }
                Err(e) => {
                    // Out of descriptors: a connection that never sent an
                    // admitted request makes room, as at --max-connections.
                    if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) {
                        connections.make_room();
                    }
                    let wait = accept_failures.failed(&e);
                    tokio::time::sleep(wait).await;
                    continue;
                }
            },
            _ = shutdown.cancelled() => break,
        };
        // At --max-connections: the oldest connection that never sent an
        // admitted request makes room, or (all in use) accepting waits.
        let place = tokio::select! {
            p = connections.admit() => match p {
                Some(p) => p,
                None => break,
            },
            _ = shutdown.cancelled() => break,
        };
        let service = service.clone();
        let sessions = sessions.clone();
        let auth = auth.clone();
        let conn_shutdown = shutdown.clone();
        tokio::spawn(async move {
            let trusted = place.trusted.clone();
            let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                let (service, sessions) = (service.clone(), sessions.clone());
                let admitted = auth.admit(req.headers());
                if admitted.is_ok() {
                    trusted.store(true, Ordering::Relaxed);
                }
                async move {
                    if let Err(why) = admitted {
                        tracing::info!("refused a request from {peer}: {why:?} bearer token");
                        return Ok::<_, Infallible>(auth::unauthorized(why));
                    }
                    if opens_session(&req) && sessions.sessions.read().await.len() >= max_sessions {
                        return Ok::<_, Infallible>(too_many_sessions(max_sessions));
                    }
                    Ok::<_, Infallible>(route(&service, req).await)
                }
            });
            // A client that does not finish its headers within the timeout
            // (or idles that long between requests) is disconnected.
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(header_timeout)
                .serve_connection(TokioIo::new(stream), svc);
            tokio::pin!(conn);
            tokio::select! {
                r = conn.as_mut() => {
                    if let Err(e) = r {
                        tracing::debug!("connection from {peer}: {e}");
                    }
                }
                _ = place.evicted.cancelled() => {
                    tracing::debug!("connection from {peer}: closed to make room (--max-connections)");
                }
                _ = conn_shutdown.cancelled() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.as_mut().await;
                }
            }
            drop(place);
        });
    }
    Ok(())
}

type Service = StreamableHttpService<McpServer, LocalSessionManager>;

async fn route(service: &Service, req: Request<Incoming>) -> Response<BoxBody<Bytes, Infallible>> {
    if req.uri().path() != PATH {
        let body = Full::new(Bytes::from_static(b"not found: the MCP endpoint is /mcp\n"));
        let mut resp = Response::new(body.boxed());
        *resp.status_mut() = StatusCode::NOT_FOUND;
        return resp;
    }
    let delete = req.method() == hyper::Method::DELETE;
    let json_post = req.method() == hyper::Method::POST
        && req
            .headers()
            .get(hyper::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json"));
    // Keep a copy of the body rmcp reads (it caps it at --max-message-bytes
    // itself): when rmcp cannot decode it, the copy tells a Parse error
    // (not JSON) from an Invalid Request (JSON, but not a message).
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let req = if json_post {
        let seen = seen.clone();
        req.map(move |body| {
            body.map_frame(move |frame| {
                if let Some(data) = frame.data_ref() {
                    let mut seen = seen.lock().unwrap_or_else(|p| p.into_inner());
                    seen.extend_from_slice(data);
                }
                frame
            })
            .boxed()
        })
    } else {
        req.map(|body| body.boxed())
    };
    let mut resp = service.handle(req).await;
    if json_post && resp.status() == StatusCode::UNSUPPORTED_MEDIA_TYPE {
        let body = std::mem::take(&mut *seen.lock().unwrap_or_else(|p| p.into_inner()));
        return undecodable(resp, &body).await;
    }
    // rmcp answers a session DELETE with 202; clients (the Python SDK) expect
    // 200 for a terminated session and warn otherwise.
    if delete && resp.status() == StatusCode::ACCEPTED {
        *resp.status_mut() = StatusCode::OK;
    }
    resp
}

/// A POST to the endpoint without a session id: an `initialize` that would
/// open a session.
fn opens_session(req: &Request<Incoming>) -> bool {
    req.method() == hyper::Method::POST
        && req.uri().path() == PATH
        && !req.headers().contains_key("mcp-session-id")
}

fn too_many_sessions(max: usize) -> Response<BoxBody<Bytes, Infallible>> {
    tracing::warn!("refused a new session: {max} are open (--max-sessions)");
    let body = serde_json::json!({"jsonrpc": "2.0", "id": null, "error": {
        "code": -32000,
        "message": format!("too many open sessions ({max}); end one with DELETE /mcp, wait for an idle one to expire, or raise --max-sessions"),
    }});
    let mut out = Response::new(Full::new(Bytes::from(body.to_string())).boxed());
    *out.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    out.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    out
}

/// rmcp answers a JSON body it cannot decode with 415 and a text line. The
/// media type was right, the body was not: 400 with a JSON-RPC error, as
/// JSON-RPC 2.0 and the MCP transport spec expect. Not JSON (or not UTF-8):
/// -32700 Parse error, `id` null. JSON that is not a message (a batch array,
/// which 2025-11-25 no longer has, a number, a string, `null`, an object
/// without a method): -32600 Invalid Request, with the object's id when it
/// has a usable one, else `id` null.
async fn undecodable(
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_port_binds_loopback() {
        assert_eq!(
            parse_addr("8080").unwrap(),
            "127.0.0.1:8080".parse().unwrap()
        );
        assert_eq!(parse_addr(":9").unwrap(), "127.0.0.1:9".parse().unwrap());
        assert_eq!(
            parse_addr("0.0.0.0:1").unwrap(),
            "0.0.0.0:1".parse().unwrap()
        );
        assert!(parse_addr("nonsense").is_err());
    }
}
