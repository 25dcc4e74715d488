//! `toolcage call NAME [KEY=VALUE...] [--args JSON] [--yes]`: validate and
//! run one tool; print the result exactly as an agent would see it.
//!
//! Exit: 0 ok, 1 the tool reported an error, 2 invalid arguments or unknown
//! tool, 3 denied, 124 timeout, 125 toolcage's own failure.
//!
//! prepare → gate (concurrency cap, rate limits, approval) → run → audit
//! record → print. Approval is asked on the controlling terminal
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
use crate::call::CallError;
use crate::gate::terminal::Terminal;
use crate::gate::{ApprovalChannel, Decision, Gate, PreApproved, Ran, SessionId};
use crate::sandbox::Exit;
use clap::Args;
use serde_json::{Map, Value};

#[derive(Debug, Args)]
pub struct CallArgs {
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// Arguments as a JSON object; KEY=VALUE pairs win over its keys.
    #[arg(long = "args", value_name = "JSON")]
    pub args_json: Option<String>,
    /// Pre-approve the call instead of being asked on the terminal (only
    /// where the policy's approval.allow_yes permits it).
    #[arg(long)]
    pub yes: bool,
    /// Print {text, is_error, outcome} as JSON instead of the text.
    #[arg(long)]
    pub json: bool,
    /// The tool to call.
    #[arg(value_name = "NAME")]
    pub name: String,
    /// Arguments: a value is JSON when it parses as JSON and the parameter is
    /// not a string (count=3 → 3; name=3 → "3" when name is a string).
    #[arg(value_name = "KEY=VALUE")]
    pub pairs: Vec<String>,
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
pub fn build_args(
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
    super::say(&message);
    if args.json {
        let v = serde_json::json!({"error": message, "is_error": true, "exit_status": code});
        println!("{v}");
    }
    code
}

pub fn run(global: &Global, args: &CallArgs) -> u8 {
    let engine = match global.engine(&args.policy) {
        Ok(e) => e,
        Err(e) => return fail(args, &e.to_string(), status::INTERNAL),
    };
    let schema = engine.catalog.get(&args.name).map(|t| &t.input_schema);
    let map = match build_args(schema, args.args_json.as_deref(), &args.pairs) {
        Ok(m) => m,
        Err(message) => {
            let e = CallError::InvalidArguments {
                tool: args.name.clone(),
                message,
            };
            return fail(args, &e.to_string(), status::of_call(e.kind()));
        }
    };
    let gate = match Gate::shared(&engine) {
        Ok(g) => g,
        Err(e) => return fail(args, &e.to_string(), status::INTERNAL),
    };
    let session = SessionId::fresh("cli");
    let map = Value::Object(map);
    let prepared = match engine.prepare(&args.name, map.clone()) {
        Ok(p) => p,
        Err(e) => {
            // Refused before the gate: audited too, nothing ran.
            let tool = engine.catalog.get(&args.name);
            if let Err(audit) = gate.reject(tool, &args.name, &map, &session, &e) {
                return fail(args, &format!("{e}; {audit}"), status::INTERNAL);
            }
            return fail(args, &e.to_string(), status::of_call(e.kind()));
        }
    };
    // From here on SIGTERM, SIGINT and SIGHUP cancel the call (at the
    // prompt, or its running process tree) and leave its audit record.
    let interrupts = match Interrupts::watch() {
        Ok(i) => Some(i),
        Err(e) => {
            super::say(&format!(
                "warning: cannot catch SIGTERM/SIGINT/SIGHUP ({e}); a signal now leaves only the call's started record"
            ));
            None
        }
    };
    let token = interrupts.as_ref().map(|i| i.token().clone());
    let received = || interrupts.as_ref().and_then(Interrupts::received);
    let channel: Box<dyn ApprovalChannel> = match (args.yes, &token) {
        (true, _) => Box::new(PreApproved),
        (false, Some(t)) => Box::new(Terminal::new().with_interrupt(t.clone())),
        (false, None) => Box::new(Terminal::new()),
    };
    let decision = gate.check(&prepared, &session, channel.as_ref());
    if let Decision::Denied(d) = &decision {
        let (message, code) = (d.message.clone(), status::of_denial(d.reason));
        let code = received().map_or(code, signals::exit_status);
        if let Err(e) = gate.finish(&prepared, &session, decision, Ran::NotRun) {
            return fail(args, &format!("{message}; {e}"), code);
        }
        return fail(args, &message, code);
    }
    if let Some(sig) = received() {
        // Interrupted after approval, before the run: nothing ran.
        let e = CallError::Denied(format!(
            "{}: not run: toolcage got {}",
            args.name,
            signals::name(sig)
        ));
        let by = signals::stopped_by(sig, "call");
        let ran = Ran::Failed(&e, Default::default());
        if let Err(audit) = gate.finish_stopped(&prepared, &session, decision, ran, Some(&by)) {
            return fail(args, &format!("{e}; {audit}"), signals::exit_status(sig));
        }
        return fail(args, &e.to_string(), signals::exit_status(sig));
    }
    if let Err(e) = gate.start(&prepared, &session, &decision) {
        let why = CallError::Denied(format!("{}: not run: {e}", args.name));
        let _ = gate.finish(
            &prepared,
            &session,
            decision,
            Ran::Failed(&why, Default::default()),
        );
        return fail(args, &why.to_string(), status::INTERNAL);
    }
    let start = std::time::Instant::now();
    let run = engine.run(&prepared, token.as_ref());
    let ran = match &run {
        Ok(r) => Ran::Finished(r),
        Err(e) => Ran::Failed(e, start.elapsed()),
    };
    let cancelled = matches!(&run, Ok(r) if r.outcome.exit == Exit::Cancelled);
    let signalled = received().filter(|_| cancelled);
    let by = signalled.map(|sig| signals::stopped_by(sig, "call"));
    if let Err(e) = gate.finish_stopped(&prepared, &session, decision, ran, by.as_deref()) {
        return fail(args, &e, status::INTERNAL);
    }
    if let Some(sig) = signalled {
        let message = format!(
            "{}: killed with its process tree: toolcage got {} (the call is in the audit log)",
            args.name,
            signals::name(sig)
        );
        return fail(args, &message, signals::exit_status(sig));
    }
    let result = match run {
        Ok(r) => r,
        Err(CallError::Sandbox(e)) => {
            let message = super::hints::explain(&e, &prepared.resolved, &engine.ctx);
            let code = status::of_call(CallError::Sandbox(e).kind());
            return fail(args, &message, code);
        }
        Err(e) => return fail(args, &e.to_string(), status::of_call(e.kind())),
    };
    let outcome = &result.outcome;
    if !outcome.enforcement.degraded.is_empty() {
        super::say(&format!(
            "warning: ran degraded: {}",
            outcome.enforcement.degraded.join("; ")
        ));
    }
    for note in outcome.protected_notes("call") {
        super::say(&format!("warning: {note}"));
    }
    if args.json {
        // The result, and the PATH directories the call did not get.
        let json = serde_json::to_value(&result).and_then(|mut v| {
            v["path_dropped"] = serde_json::to_value(prepared.resolved.path_dropped(&engine.ctx))?;
            serde_json::to_string(&v)
        });
        match json {
            Ok(s) => println!("{s}"),
            Err(e) => return fail(args, &e.to_string(), status::INTERNAL),
        }
    } else {
        write_result(&result.text);
    }
    match outcome.exit {
        Exit::Timeout => status::TIMEOUT,
        _ if result.is_error => status::TOOL_ERROR,
        _ => status::OK,
    }
}

/// The tool's text on stdout: byte-exact into a pipe or a file (what an
/// agent would see); neutralised ([`crate::text::multi_line`]) when stdout
/// is a terminal, so a tool cannot drive the operator's terminal (erase
/// lines, print a fake prompt in hidden text, leave attributes set).
fn write_result(text: &str) {
    use std::io::{IsTerminal, Write};
    let mut out = std::io::stdout().lock();
    let _ = if out.is_terminal() {
        out.write_all(crate::text::multi_line(text).as_bytes())
    } else {
        out.write_all(text.as_bytes())
    };
    let _ = out.flush();
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
