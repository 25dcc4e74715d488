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

mod answers;
mod probes;

use super::McpServer;
use super::auth::{self, Auth};
use super::connections::{AcceptBackoff, Connections};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::{Request, Response, StatusCode, body::Incoming};
use hyper_util::rt::{TokioIo, TokioTimer};
use probes::Readiness;
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
pub(crate) const PATH: &str = "/mcp";
/// Liveness: 200 while the process answers.
pub(crate) const HEALTHZ: &str = "/healthz";
/// Readiness: 200 when calls can be enforced here and the server is not
/// draining.
pub(crate) const READYZ: &str = "/readyz";
/// Whether calls can be enforced here (the caller's decision: `doctor`'s
/// and a trial run's, for the served policy); `Err` says why not,
/// `Ok(Some(note))` that this replica is ready but degraded (the shared
/// store does not answer: some calls are refused, the others run).
pub(crate) type ReadyCheck = Arc<dyn Fn() -> Result<Option<String>, String> + Send + Sync>;

/// What `serve --http` adds to the endpoint beyond the server itself.
pub(crate) struct HttpOptions {
    pub(crate) auth: Auth,
    /// `--allow-host`: names (`NAME` or `NAME:PORT`) accepted in `Host` and
    /// `Origin` besides the loopback ones.
    pub(crate) allow_hosts: Vec<String>,
    /// Readiness beyond "not draining"; `None`: always ready.
    pub(crate) ready: Option<ReadyCheck>,
    /// `--metrics`: its own listener serving `/metrics`.
    pub(crate) metrics: Option<TcpListener>,
    /// Responses to POSTs still being written (a call's result travels in
    /// one): a drain waits for them after the calls are done.
    pub(crate) in_flight: InFlight,
}

impl HttpOptions {
    pub(crate) fn new(auth: Auth) -> HttpOptions {
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
pub(crate) struct InFlight(Arc<AtomicUsize>);

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
    pub(crate) async fn settled(&self, limit: Duration) -> bool {
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
pub(crate) fn parse_allowed_host(s: &str) -> Result<String, String> {
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

/// `8080` and `:8080` mean 127.0.0.1:8080; otherwise `IP:PORT` or
/// `HOST:PORT`.
pub(crate) fn parse_addr(s: &str) -> Result<SocketAddr, String> {
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
pub(crate) async fn serve_with(
    server: McpServer,
    listener: TcpListener,
    options: HttpOptions,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let local = listener.local_addr()?;
    let factory = server.clone();
    let sessions = Arc::new(LocalSessionManager::default());
    let service = Arc::new(StreamableHttpService::new(
        move || Ok(factory.session()),
        sessions.clone(),
        config(&server, local, &options.allow_hosts, &shutdown),
    ));
    tracing::info!("MCP over HTTP at http://{local}{PATH}");
    if let Some(m) = options.metrics {
        tokio::spawn(probes::serve_metrics(
            m,
            server.clone(),
            sessions.clone(),
            shutdown.clone(),
        ));
    }
    let handler = Handler {
        service,
        sessions,
        auth: options.auth,
        ready: Arc::new(Readiness {
            check: options.ready,
            last: Mutex::new(None),
            deciding: std::sync::atomic::AtomicBool::new(false),
        }),
        in_flight: options.in_flight,
        max_sessions: server.shared.config.max_sessions,
        server,
    };
    accept_loop(&handler, listener, &shutdown).await;
    Ok(())
}

/// Accept connections until `shutdown`, each served on a task of its own.
async fn accept_loop(handler: &Handler, listener: TcpListener, shutdown: &CancellationToken) {
    let connections = Connections::new(handler.server.shared.config.max_connections);
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
        tokio::spawn(
            handler
                .clone()
                .connection(stream, peer, place, shutdown.clone()),
        );
    }
}

/// What answering a request needs; one clone per connection.
#[derive(Clone)]
struct Handler {
    service: Arc<Service>,
    sessions: Arc<LocalSessionManager>,
    auth: Auth,
    ready: Arc<Readiness>,
    in_flight: InFlight,
    server: McpServer,
    max_sessions: usize,
}

impl Handler {
    /// Serve one connection until it ends, is evicted to make room, or
    /// the server shuts down (gracefully: a request in progress finishes).
    async fn connection(
        self,
        stream: tokio::net::TcpStream,
        peer: SocketAddr,
        place: super::connections::Place,
        shutdown: CancellationToken,
    ) {
        let header_timeout = self.server.shared.config.header_timeout;
        let trusted = place.trusted.clone();
        let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
            let handler = self.clone();
            let probe = matches!(req.uri().path(), HEALTHZ | READYZ);
            let admitted = handler.auth.admit(req.headers());
            if admitted.is_ok() && !probe {
                trusted.store(true, Ordering::Relaxed);
            }
            async move {
                // The probes answer without a token: they say only
                // "alive" and "ready or why not".
                if probe {
                    let answer = probes::probe_answer(&req, &handler.server, &handler.ready);
                    return Ok::<_, Infallible>(answer.await);
                }
                if let Err(why) = admitted {
                    tracing::info!("refused a request from {peer}: {why:?} bearer token");
                    return Ok::<_, Infallible>(auth::unauthorized(why));
                }
                Ok::<_, Infallible>(handler.answer(req).await)
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
            _ = shutdown.cancelled() => {
                conn.as_mut().graceful_shutdown();
                let _ = conn.as_mut().await;
            }
        }
        drop(place);
    }

    /// An admitted request: refused while draining, past `--max-sessions`
    /// or for a session this server does not hold; otherwise rmcp's answer,
    /// a POST's counted in flight until its body is written.
    async fn answer(&self, req: Request<Incoming>) -> Response<BoxBody<Bytes, Infallible>> {
        if opens_session(&req) && self.server.shared.draining.is_cancelled() {
            return answers::draining();
        }
        if opens_session(&req) && self.sessions.sessions.read().await.len() >= self.max_sessions {
            return answers::too_many_sessions(self.max_sessions);
        }
        if let Some(id) = unknown_session(&req, &self.sessions).await {
            return answers::no_such_session(&id);
        }
        let post = req.method() == hyper::Method::POST;
        let resp = route(&self.service, req).await;
        if !post {
            return resp;
        }
        // Counted until the body (a call's result) is written.
        let guard = self.in_flight.enter();
        resp.map(move |b| {
            b.map_frame(move |f| {
                let _ = &guard;
                f
            })
            .boxed()
        })
    }
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
        return answers::undecodable(resp, &body).await;
    }
    // rmcp answers a session DELETE with 202; clients (the Python SDK) expect
    // 200 for a terminated session and warn otherwise.
    if delete && resp.status() == StatusCode::ACCEPTED {
        *resp.status_mut() = StatusCode::OK;
    }
    resp
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

/// A POST to the endpoint without a session id: an `initialize` that would
/// open a session.
fn opens_session(req: &Request<Incoming>) -> bool {
    req.method() == hyper::Method::POST
        && req.uri().path() == PATH
        && !req.headers().contains_key("mcp-session-id")
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
