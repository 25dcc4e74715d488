//! One running upstream server: a long-lived child in the sandbox under
//! the server's grant, spoken to over its stdin and stdout with rmcp's
//! client. Its stderr goes into a ring of the last 16 KiB (error texts,
//! `check`), never to toolcage's own output. Dropping the instance kills
//! its whole process tree (the sandbox's cancel token).

use super::client::UpstreamClient;
use super::start_error::{Tail, client_error, exit_text, unreachable_program, with_stderr};
use crate::discover::{Transport, UpstreamSpec};
use crate::policy::Grant;
use crate::sandbox::{CancelToken, EnforcementReport};
use rmcp::model::{CallToolRequestParams, CallToolResult, ClientRequest, Tool};
use rmcp::service::{PeerRequestOptions, RunningService, ServiceError};
use rmcp::{RoleClient, ServiceExt};
use std::collections::BTreeMap;
use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a server may take from exec to answering `initialize` and
/// `tools/list` (`npx` may download first).
pub(crate) const START_TIMEOUT: Duration = Duration::from_secs(60);

/// Bounds on one listing of a server's tools (`tools/list` and its
/// `nextCursor` pages): a server past any of them is stopped, with the
/// reason `upstreams`, `check` and `list` show. An endless `nextCursor`
/// once took `toolcage list` past 7 GiB.
pub(crate) const MAX_LIST_PAGES: usize = 100;
pub(crate) const MAX_LIST_TOOLS: usize = 1000;
pub(crate) const MAX_LIST_BYTES: usize = 4 * 1024 * 1024;

/// Why a call to a running server produced no result.
#[derive(Debug)]
pub(crate) enum CallFailure {
    /// The server exited or closed its output while the call was in flight.
    Gone(String),
    /// No answer within the call's timeout: the request was cancelled.
    Timeout(Duration),
    /// The caller cancelled it (`notifications/cancelled` was sent on).
    Cancelled,
    /// The server answered with a JSON-RPC error.
    Error(String),
}

/// A stdio server's command, arguments, environment and directory.
type StdioParts<'a> = (
    &'a String,
    &'a Vec<String>,
    &'a Vec<(String, String)>,
    &'a Option<std::path::PathBuf>,
);

pub(crate) struct Instance {
    service: RunningService<RoleClient, UpstreamClient>,
    /// Kills the server's process tree.
    kill: CancelToken,
    pub(crate) stderr: Arc<Tail>,
    /// What confines it, as the sandbox reported at its start.
    pub(crate) enforcement: EnforcementReport,
    /// Its tools, as last listed.
    pub(crate) tools: Mutex<Vec<Tool>>,
    pub(crate) last_used: Mutex<Instant>,
    exited: Arc<Mutex<Option<String>>>,
    progress: super::client::ProgressRoutes,
    /// The host values its declaration read (`super::Launch::hidden`).
    hidden: Vec<(String, String)>,
    /// A re-listing runs; another was asked for meanwhile.
    pub(crate) relisting: std::sync::atomic::AtomicBool,
    pub(crate) relist_again: std::sync::atomic::AtomicBool,
    /// Its calls in flight, for elicitation (`super::client::Elicits`).
    pub(crate) elicits: Arc<super::client::Elicits>,
}

impl Drop for Instance {
    fn drop(&mut self) {
        self.kill.cancel();
    }
}

fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    Ok(nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?)
}

impl Instance {
    /// Start `spec` (stdio) under `grant` and initialize it. On failure,
    /// the message says why, with the stderr tail when there is one.
    /// `launch` is `spec` with its `${VAR}` expanded: what runs. Messages
    /// name the server as declared and never show an expanded value.
    pub(crate) async fn start(
        spec: &UpstreamSpec,
        launch: &super::Launch,
        grant: &Grant,
        client: UpstreamClient,
    ) -> Result<Instance, String> {
        let elicits = client.elicits.clone();
        let started = match &launch.transport {
            Transport::Stdio {
                command,
                args,
                env,
                cwd,
            } => Self::start_stdio(spec, (command, args, env, cwd), grant, client).await,
            Transport::Http { url, headers } => {
                Self::start_http(spec, url, headers, grant, client).await
            }
        };
        started
            .map(|mut i| {
                i.hidden = launch.hidden.clone();
                i.elicits = elicits;
                i
            })
            .map_err(|e| super::hide(&e, &launch.hidden))
    }

    /// A Streamable HTTP server: no process of ours; toolcage's HTTP
    /// client under the grant's network is the transport.
    async fn start_http(
        spec: &UpstreamSpec,
        url: &str,
        headers: &[(String, String)],
        grant: &Grant,
        client: UpstreamClient,
    ) -> Result<Instance, String> {
        use rmcp::transport::StreamableHttpClientTransport;
        use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
        let progress = client.progress.clone();
        let http = super::http_client::PolicyHttpClient {
            server: spec.name.clone(),
            network: grant.network.clone(),
            headers: headers.to_vec(),
            timeout: grant.timeout,
        };
        let config = StreamableHttpClientTransportConfig::with_uri(url.to_string());
        let transport = StreamableHttpClientTransport::with_client(http, config);
        let service = match tokio::time::timeout(START_TIMEOUT, client.serve(transport)).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                return Err(format!(
                    "'{}' at {url}: {}",
                    spec.name,
                    client_error(&e.to_string())
                ));
            }
            Err(_) => {
                return Err(format!(
                    "'{}' at {url} did not answer initialize within {}s",
                    spec.name,
                    START_TIMEOUT.as_secs()
                ));
            }
        };
        let instance = Instance {
            service,
            kill: CancelToken::new().map_err(|e| format!("cancel token: {e}"))?,
            stderr: Arc::new(Tail::default()),
            enforcement: EnforcementReport::in_process(),
            tools: Mutex::new(Vec::new()),
            last_used: Mutex::new(Instant::now()),
            exited: Arc::new(Mutex::new(None)),
            progress,
            hidden: Vec::new(),
            relisting: Default::default(),
            relist_again: Default::default(),
            elicits: Default::default(),
        };
        instance
            .refresh_tools()
            .await
            .map_err(|e| format!("'{}' did not list its tools: {e}", spec.name))?;
        Ok(instance)
    }

    /// A stdio server: a long-lived child in the sandbox, spoken to over
    /// its stdin and stdout; its stderr kept in a [`Tail`].
    async fn start_stdio(
        spec: &UpstreamSpec,
        parts: StdioParts<'_>,
        grant: &Grant,
        client: UpstreamClient,
    ) -> Result<Instance, String> {
        let pipes = Pipes::new()?;
        let (report_tx, report_rx) = std::sync::mpsc::sync_channel(1);
        let cmd = stdio_command(parts, &pipes, report_tx);
        let kill = CancelToken::new().map_err(|e| format!("cancel token: {e}"))?;
        let exited = Arc::new(Mutex::new(None));
        let stderr = Arc::new(Tail::default());
        let Pipes {
            stdin_r,
            stdin_w,
            stdout_r,
            stdout_w,
            stderr_r,
            stderr_w,
        } = pipes;
        let child_ends = (stdin_r, stdout_w, stderr_w);
        let setup_rx = run_sandboxed(&spec.name, grant, cmd, child_ends, &kill, &exited)?;
        read_stderr(&spec.name, stderr_r, &stderr);
        let Some(enforcement) = enforcement_report(report_rx).await else {
            kill.cancel();
            let why = match setup_rx.await {
                Ok(setup) => setup,
                Err(_) => "the sandbox did not start it".into(),
            };
            return Err(with_stderr(
                format!("cannot start '{}': {why}", spec.name),
                &stderr,
            ));
        };
        let progress = client.progress.clone();
        let io = (|| {
            Ok::<_, std::io::Error>((
                tokio::net::unix::pipe::Receiver::from_owned_fd(stdout_r)?,
                tokio::net::unix::pipe::Sender::from_owned_fd(stdin_w)?,
            ))
        })()
        .map_err(|e| format!("pipes: {e}"))?;
        let service = handshake(spec, client, io, &kill, &stderr).await?;
        let instance = Instance {
            service,
            kill,
            stderr,
            enforcement,
            tools: Mutex::new(Vec::new()),
            last_used: Mutex::new(Instant::now()),
            exited,
            progress,
            hidden: Vec::new(),
            relisting: Default::default(),
            relist_again: Default::default(),
            elicits: Default::default(),
        };
        instance.refresh_tools().await.map_err(|e| {
            with_stderr(
                format!("'{}' did not list its tools: {e}", spec.name),
                &instance.stderr,
            )
        })?;
        Ok(instance)
    }

    /// List the server's tools again (after `list_changed`), within the
    /// bounds ([`MAX_LIST_PAGES`], [`MAX_LIST_TOOLS`], [`MAX_LIST_BYTES`]).
    pub(crate) async fn refresh_tools(&self) -> Result<Vec<Tool>, String> {
        let tools =
            match tokio::time::timeout(START_TIMEOUT, list_bounded(self.service.peer())).await {
                Ok(r) => r?,
                Err(_) => return Err("tools/list timed out".into()),
            };
        *self.tools.lock().unwrap_or_else(|p| p.into_inner()) = tools.clone();
        Ok(tools)
    }

    /// The session with the server (resources, prompts: `super::resources`).
    pub(crate) fn peer(&self) -> &rmcp::Peer<RoleClient> {
        self.service.peer()
    }

    /// Whether the server declared `resources` when it started.
    pub(crate) fn has_resources(&self) -> bool {
        self.service
            .peer()
            .peer_info()
            .is_some_and(|i| i.capabilities.resources.is_some())
    }

    /// Whether the server declared `prompts` when it started.
    pub(crate) fn has_prompts(&self) -> bool {
        self.service
            .peer()
            .peer_info()
            .is_some_and(|i| i.capabilities.prompts.is_some())
    }

    /// Why the server is gone, if it is.
    pub(crate) fn exited(&self) -> Option<String> {
        if let Some(why) = self
            .exited
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
        {
            return Some(why);
        }
        self.service
            .peer()
            .is_transport_closed()
            .then(|| "the server closed its output".to_string())
    }

    /// Call `tool` with `args`. Never re-sent: a call the server took and
    /// did not answer fails.
    pub(crate) async fn call(
        &self,
        tool: &str,
        args: serde_json::Map<String, serde_json::Value>,
        timeout: Duration,
        cancel: Option<&CancelToken>,
        progress: Option<super::client::ProgressSink>,
    ) -> Result<CallToolResult, CallFailure> {
        *self.last_used.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
        let mut params = CallToolRequestParams::new(tool.to_string());
        params.arguments = Some(args);
        let request = ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(params));
        let peer = self.service.peer().clone();
        let handle = match peer
            .send_cancellable_request(request, PeerRequestOptions::no_options())
            .await
        {
            Ok(h) => h,
            Err(e) => return Err(CallFailure::Gone(self.gone_text(&e.to_string()).await)),
        };
        let id = handle.id.clone();
        let token = handle.progress_token.clone();
        let routes = self.progress.clone();
        if let Some(sink) = progress {
            routes
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(token.clone(), sink);
        }
        let _unroute = Unroute(routes, token);
        let response = handle.await_response();
        tokio::pin!(response);
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut tick = tokio::time::interval(Duration::from_millis(25));
        let outcome = loop {
            tokio::select! {
                r = &mut response => break Ok(r),
                _ = &mut deadline => break Err(CallFailure::Timeout(timeout)),
                _ = tick.tick() => {
                    if cancel.is_some_and(CancelToken::is_cancelled) {
                        break Err(CallFailure::Cancelled);
                    }
                }
            }
        };
        *self.last_used.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
        match outcome {
            Ok(Ok(rmcp::model::ServerResult::CallToolResult(r))) => Ok(r),
            Ok(Ok(other)) => Err(CallFailure::Error(format!(
                "unexpected answer to tools/call: {}",
                serde_json::to_string(&other).unwrap_or_default()
            ))),
            Ok(Err(ServiceError::McpError(e))) => Err(CallFailure::Error(e.message.to_string())),
            Ok(Err(e)) => Err(CallFailure::Gone(self.gone_text(&e.to_string()).await)),
            Err(failure) => {
                let reason = match &failure {
                    CallFailure::Timeout(_) => "timeout",
                    _ => "cancelled by the client",
                };
                let note =
                    rmcp::model::CancelledNotificationParam::new(Some(id), Some(reason.into()));
                let _ = peer.notify_cancelled(note).await;
                Err(failure)
            }
        }
    }

    async fn gone_text(&self, error: &str) -> String {
        self.stderr.settled(Duration::from_secs(1)).await;
        let why = self.exited().unwrap_or_else(|| error.to_string());
        let tail = self.stderr.text(20);
        let text = match tail.trim().is_empty() {
            true => why,
            false => format!("{why}; its stderr ends with:\n{tail}"),
        };
        super::hide(&text, &self.hidden)
    }
}

/// Every page of `tools/list`, stopping at the first bound passed.
async fn list_bounded(peer: &rmcp::Peer<RoleClient>) -> Result<Vec<Tool>, String> {
    let past = |what: String| {
        format!(
            "its tool list goes past {what}; toolcage stopped listing and stopped the server \
             (fix: the server is broken or hostile: fix it, or remove it from the project)"
        )
    };
    let mut tools = Vec::new();
    let mut bytes = 0usize;
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_LIST_PAGES {
        let params = cursor
            .take()
            .map(|c| rmcp::model::PaginatedRequestParams::default().with_cursor(Some(c)));
        let page = peer.list_tools(params).await.map_err(|e| e.to_string())?;
        for t in page.tools {
            bytes += serde_json::to_vec(&t).map_or(0, |b| b.len());
            tools.push(t);
            if tools.len() > MAX_LIST_TOOLS {
                return Err(past(format!("{MAX_LIST_TOOLS} tools")));
            }
            if bytes > MAX_LIST_BYTES {
                return Err(past(format!(
                    "{} of tool definitions",
                    crate::text::units::format_size(MAX_LIST_BYTES as u64)
                )));
            }
        }
        match page.next_cursor {
            None => return Ok(tools),
            Some(c) => cursor = Some(c),
        }
    }
    Err(past(format!(
        "{MAX_LIST_PAGES} pages (every answer named another nextCursor)"
    )))
}

/// A stdio server's pipes: the child's ends (`stdin_r`, `stdout_w`,
/// `stderr_w`) and ours.
struct Pipes {
    stdin_r: OwnedFd,
    stdin_w: OwnedFd,
    stdout_r: OwnedFd,
    stdout_w: OwnedFd,
    stderr_r: OwnedFd,
    stderr_w: OwnedFd,
}

impl Pipes {
    fn new() -> Result<Pipes, String> {
        let (stdin_r, stdin_w) = pipe().map_err(|e| format!("pipe: {e}"))?;
        let (stdout_r, stdout_w) = pipe().map_err(|e| format!("pipe: {e}"))?;
        let (stderr_r, stderr_w) = pipe().map_err(|e| format!("pipe: {e}"))?;
        Ok(Pipes {
            stdin_r,
            stdin_w,
            stdout_r,
            stdout_w,
            stderr_r,
            stderr_w,
        })
    }
}

/// The sandbox command of a stdio server, on the child's ends of `pipes`,
/// its enforcement report sent to `report_to`.
fn stdio_command(
    (command, args, env, cwd): StdioParts<'_>,
    pipes: &Pipes,
    report_to: std::sync::mpsc::SyncSender<EnforcementReport>,
) -> crate::sandbox::Command {
    let mut argv = vec![command.into()];
    argv.extend(args.iter().map(Into::into));
    crate::sandbox::Command {
        argv,
        env: env.iter().cloned().collect::<BTreeMap<_, _>>(),
        cwd: cwd.clone(),
        stdio_fds: Some([
            pipes.stdin_r.as_raw_fd(),
            pipes.stdout_w.as_raw_fd(),
            pipes.stderr_w.as_raw_fd(),
        ]),
        report_to: Some(report_to),
        ..Default::default()
    }
}

/// Run `cmd` in the sandbox on a thread of its own until `kill`; when it
/// ends, `exited` says why. The receiver gets the sandbox's refusal if it
/// could not start it.
fn run_sandboxed(
    name: &str,
    grant: &Grant,
    cmd: crate::sandbox::Command,
    child_ends: (OwnedFd, OwnedFd, OwnedFd),
    kill: &CancelToken,
    exited: &Arc<Mutex<Option<String>>>,
) -> Result<tokio::sync::oneshot::Receiver<String>, String> {
    // The server lives until it is killed: its calls have their own
    // timeout (the grant's), not its process.
    let mut grant = grant.clone();
    grant.timeout = Duration::from_secs(u64::from(u32::MAX));
    let (setup_tx, setup_rx) = tokio::sync::oneshot::channel::<String>();
    let kill = kill.clone();
    let exited = exited.clone();
    let name = name.to_string();
    std::thread::Builder::new()
        .name(format!("upstream-{name}"))
        .spawn(move || {
            let result = crate::sandbox::run(&grant, &cmd, Some(&kill));
            // Our copies of the child's ends: the server's output
            // ends only once they are closed too.
            drop(child_ends);
            let why = match result {
                Ok(o) => format!("the server exited ({})", exit_text(o.exit)),
                Err(e) => {
                    let text = unreachable_program(&e, &name).unwrap_or_else(|| e.to_string());
                    let _ = setup_tx.send(text.clone());
                    text
                }
            };
            *exited.lock().unwrap_or_else(|p| p.into_inner()) = Some(why);
        })
        .map_err(|e| format!("cannot start a thread: {e}"))?;
    Ok(setup_rx)
}

/// Keep what the server writes to stderr in `tail`, on a thread of its own.
fn read_stderr(name: &str, stderr_r: OwnedFd, tail: &Arc<Tail>) {
    let stderr = tail.clone();
    let mut file = std::fs::File::from(stderr_r);
    stderr.reading.store(true, Ordering::Release);
    let _ = std::thread::Builder::new()
        .name(format!("upstream-{name}-stderr"))
        .spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = file.read(&mut buf) {
                if n == 0 {
                    break;
                }
                stderr.push(&buf[..n]);
            }
            stderr.reading.store(false, Ordering::Release);
        });
}

/// The sandbox's enforcement report, once the child is set up; `None`
/// when it did not come within 30 s.
async fn enforcement_report(
    report: std::sync::mpsc::Receiver<EnforcementReport>,
) -> Option<EnforcementReport> {
    match tokio::task::spawn_blocking(move || report.recv_timeout(Duration::from_secs(30))).await {
        Ok(Ok(r)) => Some(r),
        _ => None,
    }
}

/// `initialize` with the server over `io`, within [`START_TIMEOUT`]; a
/// server that fails it is killed.
async fn handshake(
    spec: &UpstreamSpec,
    client: UpstreamClient,
    io: (
        tokio::net::unix::pipe::Receiver,
        tokio::net::unix::pipe::Sender,
    ),
    kill: &CancelToken,
    stderr: &Tail,
) -> Result<RunningService<RoleClient, UpstreamClient>, String> {
    match tokio::time::timeout(START_TIMEOUT, client.serve(io)).await {
        Ok(Ok(s)) => Ok(s),
        Ok(Err(e)) => {
            kill.cancel();
            // What it wrote before it went: read to the end, not slept for.
            stderr.settled(Duration::from_secs(1)).await;
            Err(with_stderr(
                format!("'{}' did not complete the MCP handshake: {e}", spec.name),
                stderr,
            ))
        }
        Err(_) => {
            kill.cancel();
            Err(with_stderr(
                format!(
                    "'{}' did not answer initialize within {}s",
                    spec.name,
                    START_TIMEOUT.as_secs()
                ),
                stderr,
            ))
        }
    }
}

/// Stops routing a request's progress when its call ends.
struct Unroute(super::client::ProgressRoutes, rmcp::model::ProgressToken);

impl Drop for Unroute {
    fn drop(&mut self) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.1);
    }
}
