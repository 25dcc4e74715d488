//! MCP over Streamable HTTP at `/mcp`, with sessions (rmcp's
//! `StreamableHttpService` + `LocalSessionManager`) served by hyper.
//!
//! Defaults that matter for a local tool runner: every request must carry
//! the server's bearer token, else 401 (see [`super::auth`]); bind 127.0.0.1
//! when only a port is given; `Host` must be a loopback name (DNS
//! rebinding) or one named by `--allow-host`; a present `Origin` must be a
//! loopback origin or one of those names, anything else gets 403; bodies
//! over `max_message_bytes` get 413. A request naming an `Mcp-Session-Id`
//! this server does not hold gets 404 (the MCP spec: the client starts a
//! new session; behind a load balancer, on another replica).
//!
//! Without a token: `GET /healthz` (200 `ok`: the process answers) and
//! `GET /readyz` (200 when calls can be enforced here, 503 with the reason
//! otherwise, and while draining). They say nothing else. Every other path
//! is 404.
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
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// The MCP endpoint path.
pub const PATH: &str = "/mcp";
/// Liveness: 200 while the process answers.
pub const HEALTHZ: &str = "/healthz";
/// Readiness: 200 when calls can be enforced here and the server is not
/// draining.
pub const READYZ: &str = "/readyz";
/// How long a readiness answer is reused before it is decided again.
const READY_TTL: Duration = Duration::from_secs(5);

/// Whether calls can be enforced here (the caller's decision: `doctor`'s,
/// for the served policy); `Err` says why not.
pub type ReadyCheck = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

/// What `serve --http` adds to the endpoint beyond the server itself.
pub struct HttpOptions {
    pub auth: Auth,
    /// `--allow-host`: names (`NAME` or `NAME:PORT`) accepted in `Host` and
    /// `Origin` besides the loopback ones.
    pub allow_hosts: Vec<String>,
    /// Readiness beyond "not draining"; `None`: always ready.
    pub ready: Option<ReadyCheck>,
    /// `--metrics`: its own listener serving `/metrics`.
    pub metrics: Option<TcpListener>,
    /// Responses to POSTs still being written (a call's result travels in
    /// one): a drain waits for them after the calls are done.
    pub in_flight: InFlight,
}

impl HttpOptions {
    pub fn new(auth: Auth) -> HttpOptions {
        HttpOptions {
            auth,
            allow_hosts: Vec::new(),
            ready: None,
            metrics: None,
            in_flight: InFlight::default(),
        }
    }
}

/// Counts POST responses not yet fully written.
#[derive(Clone, Default)]
pub struct InFlight(Arc<AtomicUsize>);

struct InFlightGuard(Arc<AtomicUsize>);

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl InFlight {
    fn enter(&self) -> InFlightGuard {
        self.0.fetch_add(1, Ordering::SeqCst);
        InFlightGuard(self.0.clone())
    }

    /// Wait until no POST response is being written, up to `limit`. True
    /// when none is.
    pub async fn settled(&self, limit: Duration) -> bool {
        let until = Instant::now() + limit;
        while self.0.load(Ordering::SeqCst) > 0 {
            if Instant::now() >= until {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        true
    }
}

/// `--allow-host NAME[:PORT]`: a DNS name or an IP, with an optional port;
/// no scheme, path, wildcard or user part.
pub fn parse_allowed_host(s: &str) -> Result<String, String> {
    let fail = |why: &str| {
        format!(
            "--allow-host {s:?}: {why} (give the name clients and the load balancer use in \
             the Host header: NAME or NAME:PORT, e.g. mcp.example.com or mcp.internal:8080)"
        )
    };
    let authority = s
        .parse::<http::uri::Authority>()
        .map_err(|_| fail("not a host name"))?;
    let host = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']');
    if authority.as_str().contains('@') || host.is_empty() {
        return Err(fail("not a host name"));
    }
    let port = authority.as_str()[authority.host().len()..].strip_prefix(':');
    if port.is_some_and(|p| p.parse::<u16>().is_err()) {
        return Err(fail("the port is not a number from 0 to 65535"));
    }
    let name_ok = host
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.');
    if !name_ok && host.parse::<IpAddr>().is_err() {
        return Err(fail(
            "has characters a host name cannot have (wildcards are not accepted)",
        ));
    }
    Ok(authority.as_str().to_ascii_lowercase())
}

/// The readiness answer, decided at most every [`READY_TTL`].
struct Readiness {
    check: Option<ReadyCheck>,
    last: Mutex<Option<(Instant, Result<(), String>)>>,
}

impl Readiness {
    async fn decide(&self) -> Result<(), String> {
        let Some(check) = &self.check else {
            return Ok(());
        };
        if let Some((at, r)) = &*self.last.lock().unwrap_or_else(|p| p.into_inner())
            && at.elapsed() < READY_TTL
        {
            return r.clone();
        }
        let check = check.clone();
        let r = tokio::task::spawn_blocking(move || check())
            .await
            .unwrap_or_else(|e| Err(format!("the readiness check failed: {e}")));
        *self.last.lock().unwrap_or_else(|p| p.into_inner()) = Some((Instant::now(), r.clone()));
        r
    }
}

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
    allow_hosts: &[String],
    shutdown: &CancellationToken,
) -> StreamableHttpServerConfig {
    let mut hosts = vec!["localhost".to_string(), "127.0.0.1".into(), "::1".into()];
    let ip = local.ip();
    if !ip.is_loopback() && !ip.is_unspecified() {
        hosts.push(ip.to_string());
    }
    if ip.is_unspecified() && allow_hosts.is_empty() {
        tracing::warn!(
            "listening on {ip}: only requests with a loopback Host header are accepted \
             (--allow-host NAME adds the name a proxy or client uses)"
        );
    }
    let mut origins: Vec<String> = [
        "http://localhost:*",
        "http://127.0.0.1:*",
        "http://[::1]:*",
        "https://localhost:*",
        "https://127.0.0.1:*",
        "https://[::1]:*",
    ]
    .map(String::from)
    .to_vec();
    // An allowed name is allowed as an origin too: with its port when one
    // was given, else on any port.
    for h in allow_hosts {
        hosts.push(h.clone());
        let any_port = match h.parse::<http::uri::Authority>() {
            Ok(a) if a.port_u16().is_some() => h.clone(),
            _ => format!("{h}:*"),
        };
        origins.push(format!("http://{any_port}"));
        origins.push(format!("https://{any_port}"));
    }
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
    serve_with(server, listener, HttpOptions::new(auth), shutdown).await
}

/// [`serve_http`] with the options of a served replica.
pub async fn serve_with(
    server: McpServer,
    listener: TcpListener,
    options: HttpOptions,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let local = listener.local_addr()?;
    let factory = server.clone();
    let sessions = Arc::new(LocalSessionManager::default());
    let max_sessions = server.shared.config.max_sessions;
    let service = Arc::new(StreamableHttpService::new(
        move || Ok(factory.session()),
        sessions.clone(),
        config(&server, local, &options.allow_hosts, &shutdown),
    ));
    tracing::info!("MCP over HTTP at http://{local}{PATH}");
    if let Some(m) = options.metrics {
        tokio::spawn(serve_metrics(
            m,
            server.clone(),
            sessions.clone(),
            shutdown.clone(),
        ));
    }
    let ready = Arc::new(Readiness {
        check: options.ready,
        last: Mutex::new(None),
    });
    let (auth, in_flight) = (options.auth, options.in_flight);
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
        let (ready, in_flight, server) = (ready.clone(), in_flight.clone(), server.clone());
        tokio::spawn(async move {
            let trusted = place.trusted.clone();
            let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                let (service, sessions) = (service.clone(), sessions.clone());
                let (ready, in_flight, server) = (ready.clone(), in_flight.clone(), server.clone());
                let probe = matches!(req.uri().path(), HEALTHZ | READYZ);
                let admitted = auth.admit(req.headers());
                if admitted.is_ok() && !probe {
                    trusted.store(true, Ordering::Relaxed);
                }
                async move {
                    // The probes answer without a token: they say only
                    // "alive" and "ready or why not".
                    if probe {
                        return Ok::<_, Infallible>(probe_answer(&req, &server, &ready).await);
                    }
                    if let Err(why) = admitted {
                        tracing::info!("refused a request from {peer}: {why:?} bearer token");
                        return Ok::<_, Infallible>(auth::unauthorized(why));
                    }
                    if opens_session(&req) && server.shared.draining.is_cancelled() {
                        return Ok::<_, Infallible>(draining());
                    }
                    if opens_session(&req) && sessions.sessions.read().await.len() >= max_sessions {
                        return Ok::<_, Infallible>(too_many_sessions(max_sessions));
                    }
                    if let Some(id) = unknown_session(&req, &sessions).await {
                        return Ok::<_, Infallible>(no_such_session(&id));
                    }
                    let post = req.method() == hyper::Method::POST;
                    let resp = route(&service, req).await;
                    if !post {
                        return Ok::<_, Infallible>(resp);
                    }
                    // Counted until the body (a call's result) is written.
                    let guard = in_flight.enter();
                    Ok::<_, Infallible>(resp.map(move |b| {
                        b.map_frame(move |f| {
                            let _ = &guard;
                            f
                        })
                        .boxed()
                    }))
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

/// `/healthz` and `/readyz`.
async fn probe_answer(
    req: &Request<Incoming>,
    server: &McpServer,
    ready: &Readiness,
) -> Response<BoxBody<Bytes, Infallible>> {
    if !matches!(*req.method(), hyper::Method::GET | hyper::Method::HEAD) {
        return text(StatusCode::METHOD_NOT_ALLOWED, "use GET\n".into());
    }
    if req.uri().path() == HEALTHZ {
        return text(StatusCode::OK, "ok\n".into());
    }
    if server.shared.draining.is_cancelled() {
        return text(
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: draining (shutting down; running calls finish)\n".into(),
        );
    }
    match ready.decide().await {
        Ok(()) => text(StatusCode::OK, "ready\n".into()),
        Err(why) => text(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {}\n", crate::text::one_line(&why)),
        ),
    }
}

fn text(status: StatusCode, body: String) -> Response<BoxBody<Bytes, Infallible>> {
    let mut out = Response::new(Full::new(Bytes::from(body)).boxed());
    *out.status_mut() = status;
    out.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    out
}

/// The `Mcp-Session-Id` of a request to the endpoint when this server does
/// not hold that session (it ended, the server restarted, or a balancer
/// sent the request to another replica).
async fn unknown_session(
    req: &Request<Incoming>,
    sessions: &LocalSessionManager,
) -> Option<String> {
    if req.uri().path() != PATH {
        return None;
    }
    let id = req.headers().get("mcp-session-id")?;
    let id = String::from_utf8_lossy(id.as_bytes()).into_owned();
    let held = sessions.sessions.read().await.contains_key(id.as_str());
    (!held).then_some(id)
}

/// 404, as the MCP transport spec says for an unknown session: the client
/// starts a new one.
fn no_such_session(id: &str) -> Response<BoxBody<Bytes, Infallible>> {
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
fn draining() -> Response<BoxBody<Bytes, Infallible>> {
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

/// `--metrics`: `GET /metrics` in Prometheus text format on its own
/// listener, without a token (bind it where only the scraper reaches).
async fn serve_metrics(
    listener: TcpListener,
    server: McpServer,
    sessions: Arc<LocalSessionManager>,
    shutdown: CancellationToken,
) {
    if let Ok(a) = listener.local_addr() {
        tracing::info!("metrics at http://{a}/metrics");
    }
    // A scraper needs one or two connections; more wait.
    let room = Arc::new(tokio::sync::Semaphore::new(16));
    loop {
        let permit = tokio::select! {
            p = room.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => return },
            _ = shutdown.cancelled() => return,
        };
        let stream = tokio::select! {
            r = listener.accept() => match r {
                Ok((s, _)) => s,
                Err(e) => {
                    tracing::debug!("metrics: accept: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = shutdown.cancelled() => return,
        };
        let (server, sessions) = (server.clone(), sessions.clone());
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                let (server, sessions) = (server.clone(), sessions.clone());
                async move {
                    if req.uri().path() != "/metrics" {
                        return Ok::<_, Infallible>(text(
                            StatusCode::NOT_FOUND,
                            "not found: the metrics are at /metrics\n".into(),
                        ));
                    }
                    let gauges = super::metrics::Gauges {
                        sessions: sessions.sessions.read().await.len(),
                        pending_calls: server.shared.queue.pending(),
                        upstream_servers: server.upstream_states().await,
                        store_errors: crate::gate::store::errors(),
                    };
                    let mut out = text(StatusCode::OK, server.shared.metrics.render(&gauges));
                    out.headers_mut().insert(
                        hyper::header::CONTENT_TYPE,
                        hyper::header::HeaderValue::from_static(
                            "text/plain; version=0.0.4; charset=utf-8",
                        ),
                    );
                    Ok::<_, Infallible>(out)
                }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(Duration::from_secs(10))
                .serve_connection(TokioIo::new(stream), svc);
            let _ = tokio::time::timeout(Duration::from_secs(60), conn).await;
            drop(permit);
        });
    }
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

    #[test]
    fn allowed_hosts_are_names_with_an_optional_port() {
        assert_eq!(
            parse_allowed_host("MCP.example.com").unwrap(),
            "mcp.example.com"
        );
        assert_eq!(parse_allowed_host("mcp:8080").unwrap(), "mcp:8080");
        assert_eq!(parse_allowed_host("10.0.0.7").unwrap(), "10.0.0.7");
        assert_eq!(parse_allowed_host("[fd00::1]:80").unwrap(), "[fd00::1]:80");
        for bad in [
            "",
            "*.example.com",
            "http://x",
            "u@x",
            "x/y",
            "a b",
            "x:port",
        ] {
            assert!(parse_allowed_host(bad).is_err(), "{bad}");
        }
    }
}
