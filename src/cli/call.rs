//! `toolcage call NAME [KEY=VALUE...] [--args JSON] [--yes]`: validate and
//! run one tool; print the result exactly as an agent would see it.
//!
//! Exit: 0 ok, 1 the tool reported an error, 2 invalid arguments or unknown
//! tool, 3 denied, 124 timeout, 125 toolcage's own failure.
//!
//! The call pipeline ([`crate::call::pipeline`]) does the call; this
//! module parses, prints, and is its surface ([`TerminalCall`]). Approval
//! is asked on the controlling terminal
//! (`/dev/tty`); `--yes` pre-approves where the policy's `allow_yes`
//! permits it and is refused otherwise. Denied calls are audited too. The
//! result is printed only after its audit record is written.
//!
//! A call that runs leaves a `started` record first, then its final one.
//! SIGTERM, SIGINT (Ctrl-C) or SIGHUP at the prompt refuses the call
//! (`approval_interrupted`); during the run it kills the call's process
//! tree, records the call as cancelled with `stopped_by`, and toolcage
//! exits with 128 + the signal's number.

use super::signals::{self, Interrupts};
use super::{Global, PolicyArgs, status};
use crate::call::pipeline::{Job, JobDone, Turn};
use crate::call::{CallError, CallErrorKind, NotRun, NotRunKind, Pipeline, PreparedCall, Surface};
use crate::gate::terminal::Terminal;
use crate::gate::{ApprovalChannel, BoxFuture, Gate, PreApproved, SessionId};
use crate::sandbox::Exit;
use crate::upstream::Session;
use clap::Args;
use serde_json::{Map, Value};
use std::sync::{Arc, OnceLock};

#[derive(Debug, Args)]
pub(crate) struct CallArgs {
    #[command(flatten)]
    pub(crate) policy: PolicyArgs,
    /// Arguments as a JSON object; KEY=VALUE pairs win over its keys.
    #[arg(long = "args", value_name = "JSON")]
    pub(crate) args_json: Option<String>,
    /// Pre-approve the call instead of being asked on the terminal (only
    /// where the policy's approval.allow_yes permits it).
    #[arg(long)]
    pub(crate) yes: bool,
    /// Print {text, is_error, outcome} as JSON instead of the text.
    #[arg(long)]
    pub(crate) json: bool,
    /// After the result, print what the sandbox refused and what would grant it.
    #[arg(long)]
    pub(crate) explain: bool,
    /// The tool to call.
    #[arg(value_name = "NAME")]
    pub(crate) name: String,
    /// Arguments: a value is JSON when it parses as JSON and the parameter is
    /// not a string (count=3 → 3; name=3 → "3" when name is a string).
    #[arg(value_name = "KEY=VALUE")]
    pub(crate) pairs: Vec<String>,
    #[command(flatten)]
    pub(crate) opts: super::options::StoreCmdOpts,
}

/// Whether the schema says `key` is a string (so its value is never parsed).
fn is_string_param(schema: &Value, key: &str) -> bool {
    match schema
        .get("properties")
        .and_then(|p| p.get(key))
        .and_then(|p| p.get("type"))
    {
        Some(Value::String(t)) => t == "string",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "string"),
        _ => false,
    }
}

/// Build the arguments object from `--args` and the KEY=VALUE pairs.
pub(crate) fn build_args(
    schema: Option<&Value>,
    args_json: Option<&str>,
    pairs: &[String],
) -> Result<Map<String, Value>, String> {
    let mut map = match args_json {
        None => Map::new(),
        Some(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(m)) => m,
            Ok(Value::Null) => Map::new(),
            Ok(other) => {
                return Err(format!(
                    "--args must be a JSON object, got {}",
                    crate::call::validate::json_kind(&other)
                ));
            }
            Err(e) => return Err(format!("--args is not valid JSON: {e}")),
        },
    };
    for pair in pairs {
        let Some((key, raw)) = pair.split_once('=') else {
            return Err(format!(
                "argument '{pair}' is not KEY=VALUE (use e.g. name=value, or --args '{{...}}')"
            ));
        };
        if key.is_empty() {
            return Err(format!("argument '{pair}' has an empty KEY"));
        }
        let as_string = schema.is_some_and(|s| is_string_param(s, key));
        let value = if as_string {
            Value::String(raw.to_string())
        } else {
            serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_string()))
        };
        map.insert(key.to_string(), value);
    }
    Ok(map)
}

fn fail(args: &CallArgs, message: &str, code: u8) -> u8 {
    fail_with(args, message, code, Vec::new())
}

/// [`fail`] with the denials that refused the call. Under `--json` the
/// result has an `outcome` like a run's: nothing ran, and why.
fn fail_with(args: &CallArgs, message: &str, code: u8, denials: Vec<crate::sandbox::Denial>) -> u8 {
    super::say(&message);
    if args.json {
        let note = format!("nothing ran: {message}");
        let v = serde_json::json!({
            "error": message,
            "is_error": true,
            "exit_status": code,
            "outcome": {
                "enforcement": crate::audit::record::not_ran(note),
                "denials": denials,
            },
        });
        outln!("{v}");
    }
    code
}

pub(crate) fn run(global: &Global, args: &CallArgs) -> u8 {
    let mut engine = match global.engine(&args.policy) {
        Ok(e) => e,
        Err(e) => return fail(args, &e.to_string(), status::INTERNAL),
    };
    engine.explain = args.explain;
    // A name no local tool has may be an upstream server's tool.
    let upstream = match engine.catalog.get(&args.name) {
        Some(_) => Session::none(),
        None => match Session::for_command(&engine) {
            Ok(g) => g,
            Err(e) => return fail(args, &e, status::INTERNAL),
        },
    };
    let map = match call_arguments(args, &engine, &upstream) {
        Ok(m) => m,
        Err(code) => return code,
    };
    let root = engine.project_root();
    let gate = match Gate::shared(&engine.gate_setup(&root)) {
        Ok(g) => g,
        Err(e) => return fail(args, &e.to_string(), status::INTERNAL),
    };
    let surface = Arc::new(TerminalCall::new(args.yes, watch_interrupts()));
    let engine = Arc::new(engine);
    let pipeline = Pipeline {
        tools: upstream.toolbox(engine.clone()),
        gate: Some(Arc::new(gate)),
    };
    let called = pipeline.call(&args.name, Value::Object(map), surface.clone());
    let called = futures::executor::block_on(called);
    let received = surface.received();
    let prepared = surface.prepared.get();
    match called {
        Ok(result) => finish(args, &result, prepared, &engine.ctx, received),
        Err(e) => call_failed(args, e, prepared, &engine.ctx, received),
    }
}

/// The call's arguments from `KEY=VALUE` and `--args`, typed by the
/// tool's schema (a local tool's, or an upstream server's); a failure
/// already said, as the exit status.
fn call_arguments(
    args: &CallArgs,
    engine: &crate::call::Engine,
    upstream: &Session,
) -> Result<Map<String, Value>, u8> {
    let exposed = upstream.exposed();
    let schema = match exposed.as_ref().and_then(|e| e.get(&args.name)) {
        Some(t) => Some(&t.spec.input_schema),
        None => engine.catalog.get(&args.name).map(|t| &t.input_schema),
    };
    build_args(schema, args.args_json.as_deref(), &args.pairs).map_err(|message| {
        let e = CallError::InvalidArguments {
            tool: args.name.clone(),
            message,
        };
        fail(args, &e.to_string(), status::of_call(e.kind()))
    })
}

/// SIGTERM, SIGINT and SIGHUP cancel the call (at the prompt, or its
/// running process tree) and leave its audit record.
fn watch_interrupts() -> Option<Interrupts> {
    match Interrupts::watch() {
        Ok(i) => Some(i),
        Err(e) => {
            super::notice(&format!(
                "warning: cannot catch SIGTERM/SIGINT/SIGHUP ({e}); a signal now leaves only the call's started record"
            ));
            None
        }
    }
}

/// A call that did not return a result: the error said, its exit status.
fn call_failed(
    args: &CallArgs,
    e: CallError,
    prepared: Option<&Arc<PreparedCall>>,
    ctx: &crate::policy::Context,
    received: Option<i32>,
) -> u8 {
    if let CallError::Sandbox(e) = e {
        // With the fix for this operator: the flag that grants the path.
        let message = match prepared {
            Some(p) => super::hints::explain(&e, &p.resolved, ctx),
            None => e.to_string(),
        };
        let code = status::of_call(CallError::Sandbox(e).kind());
        return fail(args, &message, code);
    }
    let code = match (received, e.kind()) {
        (Some(sig), CallErrorKind::Denied(_) | CallErrorKind::NotRun | CallErrorKind::Audit) => {
            signals::exit_status(sig)
        }
        (_, kind) => status::of_call(kind),
    };
    let denials = match &e {
        CallError::Denied(d) => vec![d.entry(&args.name)],
        _ => Vec::new(),
    };
    fail_with(args, &e.to_string(), code, denials)
}

/// A call that ran: its warnings, the result printed, the exit status.
fn finish(
    args: &CallArgs,
    result: &crate::call::CallResult,
    prepared: Option<&Arc<PreparedCall>>,
    ctx: &crate::policy::Context,
    received: Option<i32>,
) -> u8 {
    let outcome = &result.outcome;
    if let (Exit::Cancelled, Some(sig)) = (outcome.exit, received) {
        let message = format!(
            "{}: killed with its process tree: toolcage got {} (the call is in the audit log)",
            args.name,
            signals::name(sig)
        );
        return fail(args, &message, signals::exit_status(sig));
    }
    if !outcome.enforcement.degraded.is_empty() {
        super::notice(&format!(
            "warning: ran degraded: {}",
            outcome.enforcement.degraded.join("; ")
        ));
    }
    for note in outcome.protected_notes("call") {
        super::notice(&format!("warning: {note}"));
    }
    if args.json {
        // The result, and the PATH directories the call did not get.
        let dropped = prepared.map(|p| p.resolved.path_dropped(ctx));
        let json = serde_json::to_value(result).and_then(|mut v| {
            v["path_dropped"] = serde_json::to_value(dropped.unwrap_or_default())?;
            serde_json::to_string(&v)
        });
        match json {
            Ok(s) => outln!("{s}"),
            Err(e) => return fail(args, &e.to_string(), status::INTERNAL),
        }
    } else {
        write_result(&result.text);
    }
    // The result text already lists them (what an agent sees); --explain
    // puts them on stderr too.
    super::explain::report(&outcome.denials, args.explain, false, true);
    // A change to a protected path toolcage could not undo fails the call.
    if let Some(reason) = outcome.not_undone() {
        super::say(&reason);
        return status::INTERNAL;
    }
    match outcome.exit {
        Exit::Timeout => status::TIMEOUT,
        _ if result.is_error => status::TOOL_ERROR,
        _ => status::OK,
    }
}

/// `toolcage call` as a surface of the call pipeline: approval on the
/// controlling terminal (or `--yes`), the run inline, and the first of
/// SIGTERM, SIGINT, SIGHUP as the reason a call stops.
struct TerminalCall {
    session: SessionId,
    channel: Box<dyn ApprovalChannel>,
    interrupts: Option<Interrupts>,
    /// The call as prepared: its grant, for the hints and `path_dropped`.
    prepared: OnceLock<Arc<PreparedCall>>,
}

impl TerminalCall {
    fn new(yes: bool, interrupts: Option<Interrupts>) -> TerminalCall {
        let token = interrupts.as_ref().map(|i| i.token().clone());
        let channel: Box<dyn ApprovalChannel> = match (yes, token) {
            (true, _) => Box::new(PreApproved),
            (false, Some(t)) => Box::new(Terminal::new().with_interrupt(t)),
            (false, None) => Box::new(Terminal::new()),
        };
        TerminalCall {
            session: SessionId::fresh("cli"),
            channel,
            interrupts,
            prepared: OnceLock::new(),
        }
    }

    fn received(&self) -> Option<i32> {
        self.interrupts.as_ref().and_then(Interrupts::received)
    }
}

impl Surface for TerminalCall {
    fn session(&self) -> &SessionId {
        &self.session
    }

    fn approval(&self) -> &dyn ApprovalChannel {
        self.channel.as_ref()
    }

    fn prepared(&self, call: &Arc<PreparedCall>) {
        let _ = self.prepared.set(call.clone());
    }

    /// The terminal prompt watches the signals itself (a signal there is an
    /// `approval_interrupted` refusal).
    fn interrupted<'a>(&'a self, _: &'a str) -> BoxFuture<'a, NotRun> {
        Box::pin(std::future::pending())
    }

    /// Approved, but a signal came before the run: nothing runs.
    fn turn<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Turn, NotRun>> {
        let turn = match self.received() {
            Some(sig) => Err(NotRun {
                kind: NotRunKind::Interrupted,
                text: format!("{name}: not run: toolcage got {}", signals::name(sig)),
                stopped_by: Some(signals::stopped_by(sig, "call")),
            }),
            None => Ok(Box::new(()) as Turn),
        };
        Box::pin(std::future::ready(turn))
    }

    /// Inline: `toolcage call` has nothing else to do meanwhile; a signal
    /// cancels the token and so kills the call's process tree.
    fn carry<'a>(&'a self, _: &'a str, job: Job) -> BoxFuture<'a, Result<JobDone, CallError>> {
        let token = self.interrupts.as_ref().map(|i| i.token().clone());
        Box::pin(async move { Ok(job(token.as_ref())) })
    }

    fn stopped_by(&self) -> Option<String> {
        self.received().map(|sig| signals::stopped_by(sig, "call"))
    }

    fn stop_status(&self) -> Option<i32> {
        self.received().map(|sig| signals::exit_status(sig).into())
    }

    fn gone(&self, name: &str) -> String {
        format!("{name}: not run: toolcage call stopped before the call ran")
    }
}

/// The tool's text on stdout: byte-exact into a pipe or a file (what an
/// agent would see); neutralised ([`crate::text::multi_line`]) when stdout
/// is a terminal, so a tool cannot drive the operator's terminal (erase
/// lines, print a fake prompt in hidden text, leave attributes set).
fn write_result(text: &str) {
    use std::io::IsTerminal;
    if std::io::stdout().is_terminal() {
        super::out::text(&crate::text::multi_line(text));
    } else {
        super::out::text(text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pairs(p: &[&str]) -> Vec<String> {
        p.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn values_are_json_unless_the_parameter_is_a_string() {
        let schema = json!({"properties": {"name": {"type": "string"}, "count": {"type": "integer"},
                                           "opt": {"type": ["string", "null"]}}});
        let m = build_args(
            Some(&schema),
            None,
            &pairs(&[
                "count=3",
                "name=3",
                "opt=true",
                "other=[1,2]",
                "word=hello",
                "eq=a=b",
            ]),
        )
        .unwrap();
        assert_eq!(
            Value::Object(m),
            json!({"count": 3, "name": "3", "opt": "true", "other": [1, 2], "word": "hello", "eq": "a=b"})
        );
    }

    #[test]
    fn pairs_win_over_args_json() {
        let m = build_args(None, Some(r#"{"a": 1, "b": 2}"#), &pairs(&["b=3"])).unwrap();
        assert_eq!(Value::Object(m), json!({"a": 1, "b": 3}));
    }

    #[test]
    fn bad_input_is_a_one_line_error() {
        assert!(
            build_args(None, Some("[1]"), &[])
                .unwrap_err()
                .contains("JSON object")
        );
        assert!(
            build_args(None, Some("{"), &[])
                .unwrap_err()
                .contains("not valid JSON")
        );
        assert!(
            build_args(None, None, &pairs(&["novalue"]))
                .unwrap_err()
                .contains("KEY=VALUE")
        );
        assert!(
            build_args(None, None, &pairs(&["=x"]))
                .unwrap_err()
                .contains("empty KEY")
        );
    }
}
