//! The gate: between preparing a call and running it, decide whether it
//! may run (concurrency cap, rate limits, human approval), and write the
//! call's audit records.
//!
//! The call pipeline ([`crate::call::pipeline`]) is its one user:
//! [`admit`] asks the [`Gatekeeper`] (this module's [`Gate`], or a test's
//! fake) for a [`Verdict`]; a denial is recorded at once, an allowed call
//! comes back as an [`Admission`] that cannot end without a record
//! ([`admission`] says how).
//!
//! - [`Gate::decide`](Gatekeeper::decide) never runs anything. The tool's
//!   concurrency slot is held in the [`Permit`] until the admission ends.
//! - Approval is asked through an [`ApprovalChannel`]: the terminal
//!   ([`terminal::Terminal`]), [`PreApproved`] for `--yes`, or the MCP
//!   server's elicitation (accept → `Approved`, decline → `Declined`,
//!   cancel → `Cancelled`, timeout → `TimedOut`, client without
//!   elicitation → `NoChannel`). Anything but an explicit yes denies the
//!   call: the gate never fails open.
//! - `once` and `once-per-args` approvals are remembered per [`SessionId`]
//!   for the life of the `Gate`, bound to the tool's definition digest
//!   ([`PreparedCall::definition_sha256`]): a changed tool is asked again.
//! - Order: concurrency cap, then rate limits, then approval, so nobody is
//!   asked about a call that could not run anyway. A call refused by a
//!   person still counts against the rate limits: prompts are rate-limited
//!   too. A call that needs approval no one can give (no terminal, a client
//!   without elicitation, `--yes` where it is not permitted) is refused
//!   before the rate limits, so it uses up nothing.

pub(crate) mod admission;
pub mod approval;
mod journal;
pub mod persist;
mod prepared;
pub mod ratelimit;
mod records;
pub mod store;
pub(crate) mod terminal;
mod verdict;

pub use admission::{Admission, CallEvent, DeniedCall, Gatekeeper, Ran, Rejected, admit};
pub(crate) use admission::{Gone, StoppedBy};
pub use approval::{
    ApprovalAnswer, ApprovalChannel, ApprovalRequest, BoxFuture, PreApproved, Refusal,
};
pub(crate) use approval::{ApprovalMode, GrantSummary};
pub use prepared::PreparedCall;
pub use verdict::{Approval, DenyReason, GateDenial, Permit, Verdict};

use crate::audit::location;
use crate::policy::{Context, Overrides, PolicyError, PolicyStack, RateLimit, SessionPolicy};
use crate::text::format_duration;
use approval::{Memory, Need};
use journal::{Journal, Unwritten};
use persist::{FileSlots, RateCheck, RateRefusal, Slot, SlotStore};
use ratelimit::{Clock, Concurrency, RateLimiter, WallClock, wait_text};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Who is calling: approvals for `once` / `once-per-args` are remembered per
/// session (an MCP connection; one `toolcage call` process).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SessionId(pub String);

impl SessionId {
    pub fn new(id: impl Into<String>) -> SessionId {
        SessionId(id.into())
    }

    /// `<prefix>-<pid>-<nanoseconds since the epoch>`.
    pub(crate) fn fresh(prefix: &str) -> SessionId {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        SessionId(format!("{prefix}-{}-{nanos}", std::process::id()))
    }
}

/// The gate could not be set up (bad session policy, unusable audit log).
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    #[error(transparent)]
    Policy(#[from] PolicyError),
    #[error("{0}")]
    Audit(String),
}

/// What a gate needs from the project's policy (`call::Engine::gate_setup`).
#[derive(Debug, Clone, Copy)]
pub struct Setup<'a> {
    /// The project root, symlinks resolved: where its state directory is.
    pub project_root: &'a Path,
    pub ctx: &'a Context,
    pub stack: &'a PolicyStack,
    pub overrides: &'a Overrides,
    /// Where rate limits are counted across processes and replicas: the
    /// state directory's files, or `--store`'s Redis (`gate::store`).
    pub store: &'a Arc<dyn store::Store>,
}

/// Approval memory, rate limits, concurrency slots and the audit log of one
/// project. `Send + Sync`: share one per server.
pub struct Gate {
    session: SessionPolicy,
    journal: Journal,
    clock: Arc<dyn Clock>,
    memory: Memory,
    rates: Arc<dyn RateCheck>,
    slots: Box<dyn SlotStore>,
}

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gate")
            .field("state_dir", &self.journal.state_dir())
            .field("audit_path", &self.journal.path())
            .finish_non_exhaustive()
    }
}

impl Gate {
    /// For a long-lived server (`toolcage serve`): the rate limits are the
    /// project's shared store ([`Setup::store`]: the state directory's
    /// file, shared with every `toolcage call` and every other server of
    /// the machine, or Redis, shared by every replica), kept across
    /// restarts; concurrency slots are counted in memory. The audit log is
    /// opened now.
    pub fn for_server(setup: &Setup<'_>) -> Result<Gate, GateError> {
        let dir = location::state_dir(setup.project_root, setup.ctx);
        Gate::build(
            setup,
            dir,
            Arc::new(WallClock),
            setup.store.clone(),
            Box::new(Concurrency::default()),
        )
    }

    /// Rate limits in the project's store (the state directory, or
    /// `--store`'s Redis) and slots in its state directory, shared by
    /// every process (`toolcage call`). The audit log is opened at the
    /// first record, checked against that call's grant (`gate::journal`).
    pub(crate) fn shared(setup: &Setup<'_>) -> Result<Gate, GateError> {
        let dir = location::state_dir(setup.project_root, setup.ctx);
        let session = setup.stack.session(setup.ctx)?;
        let audit_path = location::audit_path(&session.audit, &dir);
        let (stack, ctx, overrides) = (
            setup.stack.clone(),
            setup.ctx.clone(),
            setup.overrides.clone(),
        );
        let defaults: journal::Defaults = Box::new(move || {
            let resolved = stack.resolve(&ctx, &overrides, None);
            resolved.map(|r| r.grant).map_err(|e| e.to_string())
        });
        let journal = Journal::open_later(session.audit.clone(), audit_path, dir.clone(), defaults);
        Ok(Gate::with_parts(
            session,
            journal,
            Arc::new(WallClock),
            setup.store.clone(),
            Box::new(FileSlots::new(&dir)),
        ))
    }

    /// In memory, with a clock the caller moves and an explicit state
    /// directory (tests, embedders).
    pub fn with_clock(
        setup: &Setup<'_>,
        clock: Arc<dyn Clock>,
        state_dir: PathBuf,
    ) -> Result<Gate, GateError> {
        Gate::build(
            setup,
            state_dir,
            clock,
            Arc::new(RateLimiter::default()),
            Box::new(Concurrency::default()),
        )
    }

    fn build(
        setup: &Setup<'_>,
        state_dir: PathBuf,
        clock: Arc<dyn Clock>,
        rates: Arc<dyn RateCheck>,
        slots: Box<dyn SlotStore>,
    ) -> Result<Gate, GateError> {
        let session = setup.stack.session(setup.ctx)?;
        let audit_path = location::audit_path(&session.audit, &state_dir);
        // The defaults must not let a call write the log or the state.
        let defaults = setup.stack.resolve(setup.ctx, setup.overrides, None)?;
        let journal = Journal::open_now(
            session.audit.clone(),
            audit_path,
            state_dir,
            &defaults.grant,
        )?;
        Ok(Gate::with_parts(session, journal, clock, rates, slots))
    }

    fn with_parts(
        session: SessionPolicy,
        journal: Journal,
        clock: Arc<dyn Clock>,
        rates: Arc<dyn RateCheck>,
        slots: Box<dyn SlotStore>,
    ) -> Gate {
        Gate {
            session,
            journal,
            clock,
            memory: Memory::default(),
            rates,
            slots,
        }
    }

    pub(crate) fn audit_path(&self) -> &Path {
        self.journal.path()
    }

    pub(crate) fn state_dir(&self) -> &Path {
        self.journal.state_dir()
    }

    pub(crate) fn session_policy(&self) -> &SessionPolicy {
        &self.session
    }

    /// Append a record that is no call of a tool (a management tool's
    /// change). `Err`: not written.
    pub(crate) fn append_record(&self, record: &crate::audit::AuditRecord) -> Result<(), String> {
        self.journal.append(record)
    }

    /// `[audit] redact`: keep only digests of what a client sent.
    pub(crate) fn redact(&self) -> bool {
        self.journal.redact()
    }

    /// The limits that apply to `call`: key, limit, description.
    fn limits(&self, call: &PreparedCall) -> Vec<(String, RateLimit, String)> {
        let name = &call.tool.name;
        let mut out = Vec::new();
        let granted = call.resolved.grant.rate_limit;
        if let Some(l) = granted {
            let source = self.provenance(call, "rate_limit", "policy");
            let source = source.split(';').next().unwrap_or("policy");
            out.push((
                format!("tool:{name}"),
                l,
                format!("tool '{name}' ({source})"),
            ));
        }
        // The tool's own limit when the policy kept a different one: both apply.
        if let Some(own) = call.tool.requests.rate_limit
            && own.requests > 0
            && !own.window.is_zero()
            && Some(own) != granted
        {
            out.push((
                format!("own:{name}"),
                own,
                format!("tool '{name}' (its own [tools.rate_limit])"),
            ));
        }
        if let Some(g) = self.session.global_rate_limit {
            out.push(("global".into(), g, "all tools ([global_rate_limit])".into()));
        }
        out
    }

    /// Everything before asking: locations, slot, rate limits, and what
    /// approval is still needed.
    fn screen(
        &self,
        call: &PreparedCall,
        session: &SessionId,
        unanswerable: Option<Refusal>,
    ) -> Result<(Slot, Need, String), GateDenial> {
        let grant = &call.resolved.grant;
        let name = &call.tool.name;
        self.journal
            .check_locations(grant)
            .map_err(|m| GateDenial::new(DenyReason::Unavailable, m))?;
        let slot = match self.slots.try_enter(name, grant.concurrent) {
            Ok(Some(s)) => s,
            Ok(None) => {
                let cap = grant.concurrent.unwrap_or(0);
                return Err(GateDenial::new(
                    DenyReason::Concurrency,
                    format!(
                        "tool '{name}' already has {cap} call(s) running, its cap \
                         (limits.concurrent = {cap}); try again when one finishes"
                    ),
                ));
            }
            Err(e) => return Err(GateDenial::new(DenyReason::Unavailable, e.0)),
        };
        let digest = approval::args_digest(&serde_json::Value::Object(call.args.clone()));
        let bound = approval::Bound {
            name,
            definition: &call.definition_sha256,
        };
        let need = approval::need(grant.approval, &self.memory, &session.0, &bound, &digest);
        if let (Need::Ask { .. }, Some(r)) = (&need, unanswerable) {
            return Err(self.refusal(call, r));
        }
        let limits = self.limits(call);
        let keyed: Vec<(String, RateLimit)> =
            limits.iter().map(|(k, l, _)| (k.clone(), *l)).collect();
        match self.rates.check(&keyed, self.clock.now()) {
            Ok(()) => {}
            Err(RateRefusal::Limited(l)) => {
                let (_, limit, what) = &limits[l.index];
                let mut d = GateDenial::new(
                    DenyReason::RateLimited,
                    format!(
                        "rate limit: {what} allows {} call(s) per {}; try again in {}",
                        limit.requests,
                        format_duration(limit.window),
                        wait_text(l.retry_after)
                    ),
                );
                d.retry_after = Some(l.retry_after);
                return Err(d);
            }
            Err(RateRefusal::Unavailable(e)) => {
                // The limits cannot be counted: the call is refused, not
                // let through uncounted.
                return Err(GateDenial::new(DenyReason::Unavailable, e.0));
            }
        }
        Ok((slot, need, digest))
    }

    /// What the person is shown.
    pub(crate) fn request(&self, call: &PreparedCall) -> ApprovalRequest {
        let source = match call.tool.line {
            Some(l) => format!("{}:{l}", call.tool.source.display()),
            None => call.tool.source.display().to_string(),
        };
        ApprovalRequest {
            tool: call.tool.name.clone(),
            format: call.tool.format,
            runs: call.runs.clone(),
            source,
            definition_sha256: call.definition_sha256.clone(),
            arguments: serde_json::Value::Object(call.args.clone()),
            grant: GrantSummary::of(&call.resolved.grant),
            reason: format!(
                "approval mode {} ({})",
                mode_name(call.resolved.grant.approval),
                self.mode_source(call)
            ),
        }
    }

    fn mode_source(&self, call: &PreparedCall) -> String {
        self.provenance(call, "approval", "built-in")
    }

    /// Where the grant's `key` came from, as `toolcage policy` shows it.
    fn provenance(&self, call: &PreparedCall, key: &str, fallback: &str) -> String {
        call.resolved
            .provenance
            .iter()
            .find(|p| p.key == key)
            .map_or_else(|| fallback.to_string(), |p| p.source.clone())
    }

    fn conclude(
        &self,
        call: &PreparedCall,
        slot: Slot,
        settled: Result<String, Refusal>,
    ) -> Verdict {
        match settled {
            Ok(by) => Verdict::Allowed(Permit::new(
                Approval::Approved {
                    by,
                    remembered: false,
                },
                slot,
            )),
            Err(r) => Verdict::Denied(self.refusal(call, r)),
        }
    }

    fn refusal(&self, call: &PreparedCall, r: Refusal) -> GateDenial {
        GateDenial::new(
            DenyReason::Approval(r),
            approval::refusal_message(
                r,
                &call.tool.name,
                call.resolved.grant.approval,
                &self.mode_source(call),
            ),
        )
    }

    /// Everything up to the question: a final decision (denied, or allowed
    /// without asking), or the slot and memory key to ask with.
    fn before_asking(
        &self,
        call: &PreparedCall,
        session: &SessionId,
        pre_approval: bool,
        can_ask: bool,
    ) -> Result<(Slot, Option<approval::MemKey>), Verdict> {
        let early = approval::unanswerable(pre_approval, call.resolved.grant.allow_yes, can_ask);
        let (slot, need, digest) = self.screen(call, session, early).map_err(Verdict::Denied)?;
        match need {
            Need::Nothing => Err(Verdict::Allowed(
                Permit::new(Approval::NotNeeded, slot).with_digest(digest),
            )),
            Need::Remembered { by } => Err(Verdict::Allowed(
                Permit::new(
                    Approval::Approved {
                        by,
                        remembered: true,
                    },
                    slot,
                )
                .with_digest(digest),
            )),
            Need::Ask { key } => Ok((slot, key)),
        }
    }

    /// The verdict for `call`, asking `channel` when approval is needed.
    async fn verdict(
        &self,
        call: &PreparedCall,
        session: &SessionId,
        channel: &dyn ApprovalChannel,
    ) -> Verdict {
        let pre = channel.is_pre_approval();
        let (slot, key) = match self.before_asking(call, session, pre, channel.can_ask()) {
            Ok(ask) => ask,
            Err(decided) => return decided,
        };
        // `before_asking` already refused `--yes` where it is not allowed.
        let answer = channel.ask(&self.request(call)).await;
        let allow_yes = call.resolved.grant.allow_yes;
        let settled = approval::settle(|| answer, pre, allow_yes, &self.memory, key);
        self.conclude(call, slot, settled)
    }
}

impl Gatekeeper for Gate {
    fn redact(&self) -> bool {
        self.journal.redact()
    }

    fn decide<'a>(
        &'a self,
        call: &'a PreparedCall,
        session: &'a SessionId,
        channel: &'a dyn ApprovalChannel,
    ) -> BoxFuture<'a, Verdict> {
        Box::pin(self.verdict(call, session, channel))
    }

    fn record(&self, event: &CallEvent<'_>) -> Result<(), String> {
        let record = records::of_event(event, self.journal.redact());
        let consequence = match event.ran {
            Ran::Starting => "the call is not run",
            _ => "the call's result is withheld",
        };
        let grant = &event.call.resolved.grant;
        match self.journal.write(&record, Some(grant), consequence) {
            Ok(()) => Ok(()),
            // The denial is this very problem: a log this call's grant
            // could write is never opened, so there is nothing to write to.
            Err(Unwritten::Misplaced(_)) if matches!(event.verdict, Verdict::Denied(d) if d.reason == DenyReason::Unavailable) => {
                Ok(())
            }
            Err(Unwritten::Misplaced(e) | Unwritten::Failed(e)) => Err(e),
        }
    }

    /// Every call leaves a record; `Err` whenever the write failed.
    fn reject(&self, rejected: &Rejected<'_>) -> Result<(), String> {
        let record = records::of_rejected(rejected, self.journal.redact());
        self.journal.append(&record)
    }
}

/// `never`, `always`, `once`, `once-per-args`.
pub(crate) fn mode_name(m: ApprovalMode) -> &'static str {
    match m {
        ApprovalMode::Never => "never",
        ApprovalMode::Always => "always",
        ApprovalMode::Once => "once",
        ApprovalMode::OncePerArgs => "once-per-args",
    }
}
