//! `toolcage serve`: the MCP server over stdio (default) or Streamable HTTP.

use super::{Global, PolicyArgs, status};
use crate::mcp::{self, EngineHost, McpServer, ServeConfig};
use crate::policy::{parse_duration, parse_size};
use clap::Args;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// Serve Streamable HTTP at ADDR (PORT or :PORT binds 127.0.0.1; or IP:PORT)
    /// on the path /mcp, instead of stdio.
    #[arg(long, value_name = "ADDR")]
    pub http: Option<String>,
    /// Calls running at the same time, across all clients; more wait.
    #[arg(long, value_name = "N", default_value_t = 8)]
    pub max_concurrent: usize,
    /// Largest accepted JSON-RPC message (stdio line or HTTP body), e.g. 4MiB.
    #[arg(long, value_name = "SIZE", default_value = "4MiB")]
    pub max_message_bytes: String,
    /// Tools per tools/list page.
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub page_size: usize,
    /// Do not watch the tool dirs for changes (no hot reload).
    #[arg(long)]
    pub no_watch: bool,
    /// How long an approval request (MCP elicitation) waits for an answer;
    /// no answer denies the call.
    #[arg(long, value_name = "DUR", default_value = "2m")]
    pub approval_timeout: String,
    /// HTTP sessions open at once; more get 503 until one ends.
    #[arg(long, value_name = "N", default_value_t = 256)]
    pub max_sessions: usize,
}

pub fn run(global: &Global, args: &ServeArgs) -> u8 {
    match try_run(global, args) {
        Ok(Some(sig)) => super::signals::exit_status(sig),
        Ok(None) => status::OK,
        Err(e) => {
            eprintln!("toolcage serve: {e:#}");
            status::INTERNAL
        }
    }
}

/// `Ok(Some(N))`: stopped by signal N, after the calls in flight were
/// cancelled and recorded.
fn try_run(global: &Global, args: &ServeArgs) -> anyhow::Result<Option<i32>> {
    let max_message_bytes = parse_size(&args.max_message_bytes)
        .map_err(anyhow::Error::msg)
        .and_then(|n| usize::try_from(n).map_err(anyhow::Error::from))?;
    let approval_timeout = parse_duration(&args.approval_timeout)
        .map_err(|e| anyhow::anyhow!("--approval-timeout: {e}"))?;
    let config = ServeConfig {
        approval_timeout,
        max_concurrent: args.max_concurrent.max(1),
        max_message_bytes,
        page_size: args.page_size.max(1),
        max_sessions: args.max_sessions.max(1),
        ..ServeConfig::default()
    };
    let addr = args
        .http
        .as_deref()
        .map(mcp::http::parse_addr)
        .transpose()
        .map_err(anyhow::Error::msg)?;

    let engine = global.engine(&args.policy)?;
    for d in &engine.catalog.diagnostics {
        tracing::warn!("{d}");
    }
    tracing::info!("{} tool(s) discovered", engine.catalog.tools.len());
    // Approval, rate limits and the audit log; the rate limits are the
    // project's shared state (with `toolcage call`), sessions are per client.
    let gate = crate::gate::Gate::for_server(&engine)?;
    tracing::info!("audit log: {}", gate.audit_path().display());
    let server =
        McpServer::new(Arc::new(EngineHost::new(engine)), config).with_gate(Arc::new(gate));

    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("toolcage-mcp")
        .build()?;
    let result = rt.block_on(async {
        let _reloader = if args.no_watch {
            None
        } else {
            Some(mcp::reload::start(server.clone())?)
        };
        // SIGTERM, SIGINT, SIGHUP: cancel the calls in flight, record them,
        // exit 128+N.
        let mut signals = super::signals::Signals::listen()?;
        let got = std::sync::Arc::new(std::sync::atomic::AtomicI32::new(0));
        let served = match addr {
            None => {
                let serving = mcp::stdio::serve_stdio(server.clone());
                tokio::pin!(serving);
                tokio::select! {
                    r = &mut serving => r,
                    sig = signals.recv() => {
                        got.store(sig, std::sync::atomic::Ordering::SeqCst);
                        server.begin_stop(&super::signals::stopped_by(sig, "serve"));
                        Ok(())
                    }
                }
            }
            Some(addr) => {
                let listener = mcp::http::bind(addr)
                    .await
                    .map_err(|e| anyhow::anyhow!("cannot listen on {addr}: {e}"))?;
                let local = listener.local_addr()?;
                eprintln!(
                    "toolcage: MCP over HTTP at http://{local}{}",
                    mcp::http::PATH
                );
                let shutdown = tokio_util::sync::CancellationToken::new();
                let stop = shutdown.clone();
                let (seen, stopping) = (got.clone(), server.clone());
                tokio::spawn(async move {
                    let sig = signals.recv().await;
                    seen.store(sig, std::sync::atomic::Ordering::SeqCst);
                    stopping.begin_stop(&super::signals::stopped_by(sig, "serve"));
                    stop.cancel();
                });
                mcp::http::serve_http(server.clone(), listener, shutdown).await
            }
        };
        let sig = got.load(std::sync::atomic::Ordering::SeqCst);
        if sig == 0 {
            return served.map(|()| None);
        }
        let reason = super::signals::stopped_by(sig, "serve");
        if !server.stop_calls(&reason, Duration::from_secs(10)).await {
            tracing::warn!(
                "{reason}: some calls did not finish in 10s; their started records stay"
            );
        }
        served.map(|()| Some(sig))
    });
    // Running calls were cancelled with their requests; don't wait on a
    // blocking stdin reader or a straggler.
    rt.shutdown_timeout(Duration::from_secs(2));
    result
}
