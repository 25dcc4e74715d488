//! `toolcage serve`: the MCP server over stdio (default) or Streamable HTTP.

use super::{Global, PolicyArgs, status};
use crate::mcp::auth::{self, Auth, Token};
use crate::mcp::{self, EngineHost, McpServer, ServeConfig};
use crate::text::{parse_duration, parse_size};
use clap::Args;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    #[command(flatten)]
    pub(crate) policy: PolicyArgs,
    /// Serve Streamable HTTP at ADDR (PORT or :PORT binds 127.0.0.1; or IP:PORT)
    /// on the path /mcp, instead of stdio. Clients must send the bearer token
    /// (see --token-file, --no-auth); GET /healthz and /readyz answer without it.
    #[arg(long, value_name = "ADDR")]
    pub(crate) http: Option<String>,
    /// Calls running at the same time, across all clients; more wait.
    #[arg(long, value_name = "N", default_value_t = 8)]
    pub(crate) max_concurrent: usize,
    /// Largest accepted JSON-RPC message (stdio line or HTTP body), e.g. 4MiB.
    #[arg(long, value_name = "SIZE", default_value = "4MiB")]
    pub(crate) max_message_bytes: String,
    /// Tools per tools/list page.
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub(crate) page_size: usize,
    /// Do not watch the tool dirs for changes (no hot reload).
    #[arg(long)]
    pub(crate) no_watch: bool,
    /// Sandboxes kept prepared ahead of their call, for the grants recent
    /// calls used (each serves one call; 0 turns the pool off).
    #[arg(long, value_name = "N", default_value_t = crate::sandbox::pool::DEFAULT_SIZE)]
    pub(crate) pool: usize,
    /// How long an approval request (MCP elicitation) waits for an answer;
    /// no answer denies the call.
    #[arg(long, value_name = "DUR", default_value = "2m")]
    pub(crate) approval_timeout: String,
    /// HTTP sessions open at once; more get 503 until one ends.
    #[arg(long, value_name = "N", default_value_t = 256)]
    pub(crate) max_sessions: usize,
    /// Calls pending (waiting or running) in one session; more are refused
    /// at once with an isError result.
    #[arg(long, value_name = "N", default_value_t = 32)]
    pub(crate) max_pending_per_session: usize,
    /// Calls pending across all sessions; more are refused at once.
    #[arg(long, value_name = "N", default_value_t = 256)]
    pub(crate) max_pending: usize,
    /// HTTP connections open at once; at the limit the server stops
    /// accepting until one closes.
    #[arg(long, value_name = "N", default_value_t = 512, requires = "http")]
    pub(crate) max_connections: usize,
    /// How long an HTTP client has to send a request's headers (and how long
    /// a kept-alive connection may idle).
    #[arg(long, value_name = "DUR", default_value = "10s", requires = "http")]
    pub(crate) header_timeout: String,
    /// The bearer token HTTP clients must send, read from FILE (mode 0600 or
    /// stricter). Default: a new random token at every start, written to
    /// http-token in the project's state directory.
    #[arg(
        long,
        value_name = "FILE",
        requires = "http",
        conflicts_with = "no_auth"
    )]
    pub(crate) token_file: Option<PathBuf>,
    /// Serve HTTP without a bearer token: any local process that reaches the
    /// port can call every tool. Only on a loopback address.
    #[arg(long, requires = "http")]
    pub(crate) no_auth: bool,
    /// Behind a proxy or load balancer: also accept NAME (or NAME:PORT) in
    /// the Host and Origin headers, besides the loopback names. Repeatable.
    /// The bearer token is still required.
    #[arg(long = "allow-host", value_name = "NAME", requires = "http")]
    pub(crate) allow_host: Vec<String>,
    /// Serve Prometheus metrics at http://ADDR/metrics (PORT or :PORT binds
    /// 127.0.0.1), on their own listener and without a token: bind it where
    /// only the scraper reaches.
    #[arg(long, value_name = "ADDR", requires = "http")]
    pub(crate) metrics: Option<String>,
    /// On SIGTERM, SIGINT or SIGHUP: refuse new sessions and calls (/readyz
    /// answers 503), let running calls finish for up to DUR (e.g. 30s), then
    /// cancel the rest. Exit 0 when all finished in time. Without it,
    /// running calls are cancelled at once.
    #[arg(long, value_name = "DUR", requires = "http")]
    pub(crate) drain: Option<String>,
    #[command(flatten)]
    pub(crate) opts: super::options::StoreCmdOpts,
}

/// The flags of a served replica, checked before anything starts.
struct Replica {
    allow_hosts: Vec<String>,
    metrics: Option<SocketAddr>,
    drain: Option<Duration>,
}

fn check_replica(args: &ServeArgs) -> Result<Replica, String> {
    let allow_hosts = (args.allow_host.iter())
        .map(|h| mcp::http::parse_allowed_host(h))
        .collect::<Result<Vec<_>, _>>()?;
    let metrics = (args.metrics.as_deref())
        .map(|a| mcp::http::parse_addr(a).map_err(|e| e.replace("--http", "--metrics")))
        .transpose()?;
    let drain = (args.drain.as_deref())
        .map(|d| parse_duration(d).map_err(|e| format!("--drain: {e}")))
        .transpose()?;
    Ok(Replica {
        allow_hosts,
        metrics,
        drain,
    })
}

/// How HTTP clients are admitted, before anything is started: `--no-auth`
/// only on loopback; `--token-file` read now. `Ok(None)`: generate a token
/// once the state directory is known.
fn http_auth(args: &ServeArgs, addr: SocketAddr) -> Result<Option<Auth>, String> {
    if args.no_auth {
        let ip = addr.ip().to_canonical();
        if !ip.is_loopback() {
            return Err(format!(
                "--no-auth is refused on {addr}, which is not a loopback address: every \
                 process that reaches it could call every tool (fix: drop --no-auth, or \
                 serve on 127.0.0.1)"
            ));
        }
        return Ok(Some(Auth::None));
    }
    match &args.token_file {
        Some(f) => auth::read_token_file(f).map(|t| Some(Auth::Bearer(t))),
        None => Ok(None),
    }
}

/// The limits given as counts and sizes: 0 would drop every message
/// (`initialize` too), page nothing or run nothing, so it is refused with
/// the flag and the fix, as a bad size or address is.
fn check_limits(args: &ServeArgs) -> Result<usize, String> {
    let d = ServeConfig::default();
    let counts = [
        ("--max-concurrent", args.max_concurrent, d.max_concurrent),
        ("--page-size", args.page_size, d.page_size),
        ("--max-sessions", args.max_sessions, d.max_sessions),
        (
            "--max-pending-per-session",
            args.max_pending_per_session,
            d.max_pending_per_session,
        ),
        ("--max-pending", args.max_pending, d.max_pending),
        ("--max-connections", args.max_connections, d.max_connections),
    ];
    for (flag, n, default) in counts {
        if n == 0 {
            return Err(format!(
                "{flag} 0: must be at least 1 (fix: give 1 or more, or leave {flag} out for \
                 the default, {default})"
            ));
        }
    }
    let bytes = parse_size(&args.max_message_bytes)
        .map_err(|e| format!("--max-message-bytes: {e}"))
        .and_then(|n| usize::try_from(n).map_err(|e| format!("--max-message-bytes: {e}")))?;
    if bytes == 0 {
        return Err(format!(
            "--max-message-bytes {}: must be at least 1 byte; every message, initialize too, \
             would be dropped (fix: leave it out for the default, 4MiB, or give e.g. 1MiB)",
            args.max_message_bytes
        ));
    }
    Ok(bytes)
}

pub(crate) fn run(global: &Global, args: &ServeArgs) -> u8 {
    let max_message_bytes = match check_limits(args) {
        Ok(n) => n,
        Err(e) => {
            eprintln!("toolcage serve: {e}");
            return status::INTERNAL;
        }
    };
    let addr = match args.http.as_deref().map(mcp::http::parse_addr).transpose() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("toolcage serve: {e}");
            return status::INTERNAL;
        }
    };
    let auth = match addr.map(|a| http_auth(args, a)).transpose() {
        Ok(a) => a.flatten(),
        Err(e) => {
            eprintln!("toolcage serve: {e}");
            return status::INTERNAL;
        }
    };
    let replica = match check_replica(args) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("toolcage serve: {e}");
            return status::INTERNAL;
        }
    };
    match try_run(global, args, addr, auth, replica, max_message_bytes) {
        Ok(Stopped::Signal(sig)) => super::signals::exit_status(sig),
        Ok(Stopped::Drained | Stopped::Ended) => status::OK,
        Err(e) => {
            eprintln!("toolcage serve: {e:#}");
            status::INTERNAL
        }
    }
}

/// How serving ended.
enum Stopped {
    /// The client went away (stdio) or serving ended by itself.
    Ended,
    /// A signal, after a `--drain` in which every running call finished.
    Drained,
    /// Signal N, after the calls in flight were cancelled and recorded.
    Signal(i32),
}

fn try_run(
    global: &Global,
    args: &ServeArgs,
    addr: Option<SocketAddr>,
    auth: Option<Auth>,
    replica: Replica,
    max_message_bytes: usize,
) -> anyhow::Result<Stopped> {
    // Sandboxes made ahead of their call, one per call (sandbox/pool.rs),
    // by a process forked first, while toolcage is one thread. Without
    // it every call starts cold, which is as safe.
    if let Err(e) = crate::sandbox::pool::start(args.pool) {
        tracing::warn!("the pool of sandboxes is off: {e}");
    }
    // Every network-off call takes a network namespace made while the
    // previous call ran (sandbox/netns.rs).
    crate::sandbox::keep_network_namespace_ready();
    // Calls answer when their init reports; its exit is reaped apart.
    crate::sandbox::answer_calls_on_report();
    let config = serve_config(args, max_message_bytes)?;
    let engine = global.engine(&args.policy)?;
    check_audit_target(&engine, addr.is_some())?;
    mcp::host::log_diagnostics(&engine.catalog.diagnostics);
    tracing::info!("{} tool(s) discovered", engine.catalog.tools.len());
    let (server, served) = build_server(engine, config)?;
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
        let signals = super::signals::Signals::listen()?;
        let caught = Caught::default();
        let result = match addr {
            None => serve_stdio(&server, signals, &caught).await,
            Some(addr) => {
                let http = HttpServe {
                    args,
                    addr,
                    auth,
                    replica: &replica,
                    served,
                };
                serve_http(&server, http, signals, &caught).await
            }
        };
        after_serving(&server, result, &caught).await
    });
    // Running calls were cancelled with their requests; don't wait on a
    // blocking stdin reader or a straggler.
    rt.shutdown_timeout(Duration::from_secs(2));
    result
}

/// The server's limits from the command line.
fn serve_config(args: &ServeArgs, max_message_bytes: usize) -> anyhow::Result<ServeConfig> {
    let approval_timeout = parse_duration(&args.approval_timeout)
        .map_err(|e| anyhow::anyhow!("--approval-timeout: {e}"))?;
    let header_timeout = parse_duration(&args.header_timeout)
        .map_err(|e| anyhow::anyhow!("--header-timeout: {e}"))?;
    Ok(ServeConfig {
        approval_timeout,
        max_concurrent: args.max_concurrent,
        max_message_bytes,
        page_size: args.page_size,
        max_sessions: args.max_sessions,
        max_pending_per_session: args.max_pending_per_session,
        max_pending: args.max_pending,
        max_connections: connections_within(args, raise_open_files_limit()),
        header_timeout: header_timeout.max(Duration::from_millis(100)),
        watch: !args.no_watch,
        ..ServeConfig::default()
    })
}

/// What serving HTTP needs besides the server: the project's state
/// directory (the token file) and its readiness check.
struct Served {
    state_dir: PathBuf,
    ready: mcp::http::ReadyCheck,
}

/// The MCP server over `engine`, with its gate (approval, rate limits,
/// the audit log; the rate limits are the project's shared state, with
/// `toolcage call`; sessions are per client) and the management tools
/// `[manage]` enables.
fn build_server(
    engine: crate::call::Engine,
    config: ServeConfig,
) -> anyhow::Result<(McpServer, Served)> {
    let root = engine.project_root();
    let gate = crate::gate::Gate::for_server(&engine.gate_setup(&root))?;
    tracing::info!("audit log: {}", gate.audit_path().display());
    let state_dir = gate.state_dir().to_path_buf();
    let manage = gate.session_policy().manage;
    let ready = readiness(&engine);
    let gate = Arc::new(gate);
    let server = McpServer::new(Arc::new(EngineHost::new(engine)), config).with_gate(gate.clone());
    if manage.custom_script || manage.tool_manage {
        tracing::info!("[manage]: offering {manage:?}");
        let _ = server.shared.manage.set(Arc::new(mcp::manage::Manager {
            policy: manage,
            project: root,
            gate,
        }));
    }
    Ok((server, Served { state_dir, ready }))
}

/// The signal that stopped serving (0: none), and whether a `--drain`
/// saw every running call finish.
#[derive(Default)]
struct Caught {
    signal: Arc<std::sync::atomic::AtomicI32>,
    drained: Arc<std::sync::atomic::AtomicBool>,
}

/// Serve stdio until the client goes or a signal comes.
async fn serve_stdio(
    server: &McpServer,
    mut signals: super::signals::Signals,
    caught: &Caught,
) -> anyhow::Result<()> {
    let serving = mcp::stdio::serve_stdio(server.clone());
    tokio::pin!(serving);
    tokio::select! {
        r = &mut serving => r,
        sig = signals.recv() => {
            caught.signal.store(sig, std::sync::atomic::Ordering::SeqCst);
            server.begin_stop_on_signal(sig, &super::signals::stopped_by(sig, "serve"));
            Ok(())
        }
    }
}

/// Serving HTTP: the command line, the address, who may connect.
struct HttpServe<'a> {
    args: &'a ServeArgs,
    addr: SocketAddr,
    auth: Option<Auth>,
    replica: &'a Replica,
    served: Served,
}

/// Serve HTTP (and the metrics, with `--metrics`) until a signal, after a
/// `--drain` if asked for.
async fn serve_http(
    server: &McpServer,
    http: HttpServe<'_>,
    signals: super::signals::Signals,
    caught: &Caught,
) -> anyhow::Result<()> {
    let HttpServe {
        args,
        addr,
        auth,
        replica,
        served,
    } = http;
    let listener = mcp::http::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {addr}: {e}"))?;
    let local = listener.local_addr()?;
    let metrics = match replica.metrics {
        Some(m) => Some(
            mcp::http::bind(m)
                .await
                .map_err(|e| anyhow::anyhow!("--metrics: cannot listen on {m}: {e}"))?,
        ),
        None => None,
    };
    // The token file is in place before the address is printed:
    // a client that waits for the address finds the token.
    let (auth, written) = announce_auth(auth, args, &served.state_dir, local)?;
    eprintln!(
        "toolcage: MCP over HTTP at http://{local}{}",
        mcp::http::PATH
    );
    if let Some(m) = metrics.as_ref().and_then(|m| m.local_addr().ok()) {
        eprintln!("toolcage: metrics at http://{m}/metrics");
    }
    let options = mcp::http::HttpOptions {
        allow_hosts: replica.allow_hosts.clone(),
        ready: Some(served.ready),
        metrics,
        ..mcp::http::HttpOptions::new(auth)
    };
    let shutdown = tokio_util::sync::CancellationToken::new();
    stop_on_signal(
        server,
        signals,
        &options.in_flight,
        replica.drain,
        caught,
        shutdown.clone(),
    );
    let result = mcp::http::serve_with(server.clone(), listener, options, shutdown).await;
    if let Some((path, token)) = written {
        auth::remove_token_file(&path, &token);
    }
    result
}

/// On the first signal: drain (with `--drain`; a second signal ends the
/// drain at once), stop the calls and cancel `shutdown`.
fn stop_on_signal(
    server: &McpServer,
    mut signals: super::signals::Signals,
    in_flight: &mcp::http::InFlight,
    drain: Option<Duration>,
    caught: &Caught,
    shutdown: tokio_util::sync::CancellationToken,
) {
    let (seen, all_done) = (caught.signal.clone(), caught.drained.clone());
    let (stopping, in_flight) = (server.clone(), in_flight.clone());
    tokio::spawn(async move {
        let sig = signals.recv().await;
        seen.store(sig, std::sync::atomic::Ordering::SeqCst);
        if let Some(limit) = drain {
            let done = tokio::select! {
                d = drain_calls(&stopping, &in_flight, sig, limit) => d,
                _ = signals.recv() => false,
            };
            all_done.store(done, std::sync::atomic::Ordering::SeqCst);
        }
        stopping.begin_stop_on_signal(sig, &super::signals::stopped_by(sig, "serve"));
        shutdown.cancel();
    });
}

/// How serving ended: after a signal, the calls in flight are cancelled
/// and given 10 s to write their records.
async fn after_serving(
    server: &McpServer,
    served: anyhow::Result<()>,
    caught: &Caught,
) -> anyhow::Result<Stopped> {
    let sig = caught.signal.load(std::sync::atomic::Ordering::SeqCst);
    if sig == 0 {
        return served.map(|()| Stopped::Ended);
    }
    let reason = super::signals::stopped_by(sig, "serve");
    if !server.stop_calls(&reason, Duration::from_secs(10)).await {
        tracing::warn!("{reason}: some calls did not finish in 10s; their started records stay");
    }
    if caught.drained.load(std::sync::atomic::Ordering::SeqCst) {
        return served.map(|()| Stopped::Drained);
    }
    served.map(|()| Stopped::Signal(sig))
}

/// `--drain`: refuse new sessions and calls, then wait up to `limit` for
/// the running calls to write their records and their results to reach
/// the clients. True when all did.
async fn drain_calls(
    server: &McpServer,
    in_flight: &mcp::http::InFlight,
    sig: i32,
    limit: Duration,
) -> bool {
    let started = std::time::Instant::now();
    server.begin_drain();
    let running = server.shared.calls.len();
    tracing::warn!(
        "{}: draining: new sessions and calls are refused; {running} call(s) running get up \
         to {limit:?} to finish",
        super::signals::name(sig)
    );
    let done = server.calls_finished(limit).await
        && in_flight
            .settled(limit.saturating_sub(started.elapsed()))
            .await;
    if done {
        tracing::info!("drained: every running call finished");
    } else {
        tracing::warn!("the drain ran out ({limit:?}): cancelling the calls still running");
    }
    done
}

/// `[audit] path = "-"` writes the records to stdout: only `serve --http`,
/// whose stdout carries nothing else; stdio serve speaks MCP there.
fn check_audit_target(engine: &crate::call::Engine, http: bool) -> anyhow::Result<()> {
    let session = engine.stack.session(&engine.ctx)?;
    if !session.audit.to_stdout() {
        return Ok(());
    }
    if !http {
        anyhow::bail!(
            "[audit] path = \"-\" is refused for serve over stdio: stdout carries the MCP \
             messages, and audit lines there would corrupt them (fix: serve with --http ADDR, \
             or give [audit] path a file)"
        );
    }
    crate::audit::log::allow_stdout();
    Ok(())
}

/// `/readyz`: whether a call under the served policy's default grant can
/// be enforced here, as `toolcage doctor` decides it and as a trial run
/// shows (the policy is resolved again at each check, so a changed policy
/// file counts). A shared store that does not answer leaves the replica
/// ready but degraded: the calls that need it are refused, the others run,
/// and a store shared by every replica would otherwise take them all out
/// of the balancer at once.
fn readiness(engine: &crate::call::Engine) -> mcp::http::ReadyCheck {
    let engine = engine.clone();
    Arc::new(move || {
        let resolved = (engine.stack)
            .resolve(&engine.ctx, &engine.overrides, None)
            .map_err(|e| format!("the policy does not resolve: {e}"))?;
        super::doctor::enforceable(&resolved.grant)?;
        trial_run(&resolved.grant)?;
        Ok(engine.store.ping().err())
    })
}

/// One `/bin/true` through the path every call takes
/// (`toolcage_sandbox::run`: the mode, namespaces, the root with a fresh
/// `/proc`, Landlock, seccomp): what `doctor`'s probe cannot see, such as
/// a container whose masked `/proc` makes the kernel refuse that mount, so
/// that every call fails closed. A setup failure is not ready, with the
/// reason; `/bin/true` not found or not runnable under the grant says the
/// sandbox was set up, so it is ready.
fn trial_run(grant: &crate::policy::Grant) -> Result<(), String> {
    let cmd = crate::sandbox::Command {
        argv: vec!["/bin/true".into()],
        ..Default::default()
    };
    match crate::sandbox::run(grant, &cmd, None) {
        Err(e) if e.kind() == crate::sandbox::SandboxErrorKind::Setup => Err(format!(
            "a trial call under the served policy failed, so every call would: {e} (fix: in a \
             container whose /proc is masked, procMount: Unmasked, or a seccomp profile that \
             refuses namespaces so that calls run namespace-free; see docs/server.md)"
        )),
        _ => Ok(()),
    }
}

/// Raise the soft limit on open files to the hard one, so the server's own
/// limits (--max-connections) bind before EMFILE does. The limit now.
fn raise_open_files_limit() -> Option<u64> {
    match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(n) => {
            tracing::debug!("open files limit: {n}");
            Some(n)
        }
        Err(e) => {
            tracing::warn!("cannot raise the open files limit: {e}");
            None
        }
    }
}

/// `--max-connections`, lowered (with a warning) to what the open files
/// limit leaves after the running calls' share.
fn connections_within(args: &ServeArgs, open_files: Option<u64>) -> usize {
    let wanted = args.max_connections.max(1);
    let Some(n) = open_files else {
        return wanted;
    };
    let budget = mcp::connections::connection_budget(n, args.max_concurrent.max(1));
    if args.http.is_some() && budget < wanted {
        tracing::warn!(
            "--max-connections lowered from {wanted} to {budget}: the open files limit is {n} \
             (raise it with ulimit -Hn)"
        );
    }
    wanted.min(budget)
}

/// Generate the token when none was given, and say on stderr how clients
/// authenticate. Returns the auth and the token file this server wrote.
fn announce_auth(
    auth: Option<Auth>,
    args: &ServeArgs,
    state_dir: &Path,
    local: SocketAddr,
) -> anyhow::Result<(Auth, Option<(PathBuf, Token)>)> {
    match auth {
        Some(Auth::None) => {
            super::notice(&format!(
                "warning: --no-auth: any local process that reaches {local} can call every tool"
            ));
            Ok((Auth::None, None))
        }
        Some(Auth::Bearer(t)) => {
            let path = args.token_file.as_deref().unwrap_or(Path::new("?"));
            eprintln!("{}", token_hint(path));
            Ok((Auth::Bearer(t), None))
        }
        None => {
            let token = Token::generate()
                .map_err(|e| anyhow::anyhow!("cannot read random bytes from /dev/urandom: {e}"))?;
            let path = auth::write_token_file(state_dir, &token).map_err(anyhow::Error::msg)?;
            eprintln!("{}", token_hint(&path));
            Ok((Auth::Bearer(token.clone()), Some((path, token))))
        }
    }
}

/// The start-up line naming the token file (scripts look for "token file ").
fn token_hint(path: &Path) -> String {
    let p = path.display();
    format!(
        "toolcage: token file {p} ; clients send the header \"Authorization: Bearer $(cat {p})\""
    )
}
