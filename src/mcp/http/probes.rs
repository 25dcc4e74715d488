//! What operators' tooling asks the server, without a token: `/healthz`,
//! `/readyz` (its answer fresh for [`READY_TTL`], then decided again in the
//! background while probes get the last one), and `--metrics`'
//! `/metrics` on a listener of its own.

use super::answers::text;
use super::{HEALTHZ, McpServer, ReadyCheck};
use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// How long a readiness answer is fresh. An older one is still the answer
/// while the next is decided in the background: a probe never waits on a
/// trial call (a balancer's check times out in a few hundred ms).
const READY_TTL: Duration = Duration::from_secs(5);

/// The readiness answer, decided at most every [`READY_TTL`].
pub(super) struct Readiness {
    pub(super) check: Option<ReadyCheck>,
    pub(super) last: Mutex<Option<(Instant, Decision)>>,
    /// A decision is being made: probes meanwhile get the last one.
    pub(super) deciding: AtomicBool,
}

/// Ready (with what is degraded, if anything), or why not.
type Decision = Result<Option<String>, String>;

impl Readiness {
    async fn decide(self: &Arc<Self>) -> Decision {
        let Some(check) = &self.check else {
            return Ok(None);
        };
        let last = self.last.lock().unwrap_or_else(|p| p.into_inner()).clone();
        match last {
            Some((at, r)) if at.elapsed() < READY_TTL => r,
            Some((_, r)) => {
                self.decide_in_background(check.clone());
                r
            }
            // The first probe waits: there is nothing older to answer.
            None => self.decide_now(check.clone()).await,
        }
    }

    async fn decide_now(&self, check: ReadyCheck) -> Decision {
        let r = tokio::task::spawn_blocking(move || check())
            .await
            .unwrap_or_else(|e| Err(format!("the readiness check failed: {e}")));
        *self.last.lock().unwrap_or_else(|p| p.into_inner()) = Some((Instant::now(), r.clone()));
        r
    }

    fn decide_in_background(self: &Arc<Self>, check: ReadyCheck) {
        if self.deciding.swap(true, Ordering::AcqRel) {
            return;
        }
        let me = Arc::clone(self);
        tokio::spawn(async move {
            // Kept in `last` for the probes that follow.
            let _ = me.decide_now(check).await;
            me.deciding.store(false, Ordering::Release);
        });
    }
}

/// `/healthz` and `/readyz`.
pub(super) async fn probe_answer(
    req: &Request<Incoming>,
    server: &McpServer,
    ready: &Arc<Readiness>,
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
        Ok(None) => text(StatusCode::OK, "ready\n".into()),
        // Still ready: taking every replica out of the balancer for a
        // shared store would stop the calls that need no store too.
        Ok(Some(degraded)) => text(
            StatusCode::OK,
            format!("ready, degraded: {}\n", crate::text::one_line(&degraded)),
        ),
        Err(why) => text(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {}\n", crate::text::one_line(&why)),
        ),
    }
}

/// `--metrics`: `GET /metrics` in Prometheus text format on its own
/// listener, without a token (bind it where only the scraper reaches).
pub(super) async fn serve_metrics(
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
                    let gauges = crate::mcp::metrics::Gauges {
                        sessions: sessions.sessions.read().await.len(),
                        pending_calls: server.shared.queue.pending(),
                        upstream_servers: server.upstream_states().await,
                        store_errors: crate::gate::store::errors(),
                        store_up: crate::gate::store::up(),
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
