//! A3S `kind: script` calls: the script runs in a child, `toolcage
//! __script-runner` ([`child`]), started through the sandbox under the
//! tool's grant. QuickJS never runs in toolcage's own process, so no
//! engine crash, memory bomb or stack overflow can take `serve` down.
//!
//! The parent answers the child's `ctx.tool(name, args)` frames: it checks
//! `allowed_tools` and `maxToolCalls`, then runs the inner call through
//! the engine (validation, the inner tool's own grant and sandbox).
//!
//! Bounds on a tree of calls: each call carries the chain of scripts that
//! made it ([`crate::gate::PreparedCall::callers`]), so scripts nest at
//! most [`super::pipeline::nested::MAX_DEPTH`] deep whatever threads serve the calls; and the parent
//! answers one frame at a time, so a script has at most one inner call
//! running (a `Promise.all` of many runs them one after another). A tree
//! thus holds at most `MAX_DEPTH` script runners and one other tool's
//! sandbox at once, all in the outer call's run slot.

pub mod child;

use super::pipeline::nested::too_deep;
use super::toolbox::Toolbox;
use super::{CallError, CallResult, result};
use crate::discover::{ToolKind, ToolSpec};
use crate::policy::Grant;
use crate::sandbox::output::{CappedBuffer, truncation_marker};
use crate::sandbox::{CancelToken, Exit, SandboxError};
use serde_json::{Map, Value, json};
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};

/// QuickJS heap limit (the seed's 64 MiB).
pub(crate) const HEAP_BYTES: u64 = 64 << 20;
/// QuickJS stack limit (the seed's 512 KiB).
pub(crate) const STACK_BYTES: u64 = 512 << 10;
/// `maxToolCalls` when the front matter sets none.
pub(crate) const DEFAULT_MAX_TOOL_CALLS: u64 = 30;
/// `maxOutputBytes` when the front matter sets none.
pub(crate) const DEFAULT_MAX_OUTPUT_BYTES: u64 = 64 << 10;
/// The child's address space at most (the heap limit is QuickJS's own
/// accounting; this is the kernel's backstop).
const MAX_ADDRESS_SPACE: u64 = 1 << 30;
/// The largest frame the parent reads from a child.
const MAX_FRAME: u64 = 16 << 20;
/// How much of the child's stderr is kept.
const STDERR_CAP: usize = 16 << 10;

/// The binary that runs scripts, when not this one (see [`set_child_binary`]).
static CHILD_BINARY: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();

/// Run scripts with `toolcage` at `binary` instead of re-executing the
/// current one: for an embedder (a test, a bench) whose own binary is not
/// toolcage. The first setting wins.
pub fn set_child_binary(binary: std::path::PathBuf) {
    let _ = CHILD_BINARY.set(binary);
}

/// The limits of one script tool, from its front matter, and the scripts
/// whose calls run it (outermost first).
struct Limits<'a> {
    name: &'a str,
    allowed: &'a [String],
    max_calls: u64,
    callers: &'a [String],
}

fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    Ok(nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?)
}

fn internal(e: impl std::fmt::Display) -> CallError {
    CallError::Sandbox(SandboxError::Prepare(format!("script runner: {e}")))
}

/// Run `tool` (a `kind: script`) with `args` (`{inputs}`) under `grant`.
/// `toolbox` runs the script's `ctx.tool` calls; without one they fail.
pub(crate) fn execute(
    tool: &ToolSpec,
    args: &Map<String, Value>,
    grant: &Grant,
    run: super::runner::Run<'_>,
    toolbox: Option<&dyn Toolbox>,
) -> Result<CallResult, CallError> {
    let script = script_of(tool)?;
    let limits = Limits {
        name: &tool.name,
        allowed: script.allowed_tools,
        max_calls: script.max_tool_calls.unwrap_or(DEFAULT_MAX_TOOL_CALLS),
        callers: run.callers,
    };
    // The pipeline refuses it before the gate; an engine used directly
    // reaches here.
    if let Some(why) = too_deep(tool, run.callers) {
        return Err(CallError::Unsupported(why));
    }
    let (cmd, ends) = child_command(script.path, grant)?;
    let inputs = args.get("inputs").cloned().unwrap_or_else(|| json!({}));
    let grant = &child_grant(grant);
    let ran = run_and_converse(grant, &cmd, ends, &inputs, &limits, toolbox, run.cancel);
    let (end, mut outcome) = ran?;
    let max_output = script.max_output_bytes.unwrap_or(DEFAULT_MAX_OUTPUT_BYTES);
    let (text, is_error) = result_text(&outcome, end, grant, max_output);
    // The child's stdout carries frames, not output: what the script
    // returned is the call's output (the audit record counts it).
    outcome.stdout = crate::sandbox::Captured {
        text: text.clone(),
        bytes_kept: text.len() as u64,
        bytes_omitted: 0,
    };
    Ok(CallResult {
        text,
        is_error,
        outcome,
        content: None,
        content_kinds: None,
    })
}

/// What a script tool's child needs from its tool file.
struct Script<'a> {
    path: &'a std::path::Path,
    allowed_tools: &'a [String],
    max_tool_calls: Option<u64>,
    max_output_bytes: Option<u64>,
}

fn script_of(tool: &ToolSpec) -> Result<Script<'_>, CallError> {
    match &tool.kind {
        ToolKind::AgentdirScript {
            path,
            allowed_tools,
            max_tool_calls,
            max_output_bytes,
            ..
        } => Ok(Script {
            path,
            allowed_tools,
            max_tool_calls: *max_tool_calls,
            max_output_bytes: *max_output_bytes,
        }),
        _ => Err(CallError::Internal(format!(
            "{} is not a script tool",
            tool.name
        ))),
    }
}

/// The pipes between the parent and its child: the child's ends (closed
/// in the parent once the run ends) and the parent's.
struct Ends {
    stdin_r: OwnedFd,
    stdout_w: OwnedFd,
    stderr_w: OwnedFd,
    stdin_w: OwnedFd,
    stdout_r: OwnedFd,
    stderr_r: OwnedFd,
}

/// `toolcage __script-runner SCRIPT HEAP STACK TIMEOUT_MS` on new pipes.
fn child_command(
    script: &std::path::Path,
    grant: &Grant,
) -> Result<(crate::sandbox::Command, Ends), CallError> {
    let exe = match CHILD_BINARY.get() {
        Some(p) => p.clone(),
        None => std::env::current_exe().map_err(internal)?,
    };
    let (stdin_r, stdin_w) = pipe().map_err(internal)?;
    let (stdout_r, stdout_w) = pipe().map_err(internal)?;
    let (stderr_r, stderr_w) = pipe().map_err(internal)?;
    let cmd = crate::sandbox::Command {
        argv: vec![
            exe.clone().into(),
            child::SUBCOMMAND.into(),
            script.to_path_buf().into(),
            HEAP_BYTES.to_string().into(),
            STACK_BYTES.to_string().into(),
            grant.timeout.as_millis().to_string().into(),
        ],
        // toolcage's own binary; the script is in the tool's needs_read.
        extra_read: vec![exe],
        stdio_fds: Some([
            stdin_r.as_raw_fd(),
            stdout_w.as_raw_fd(),
            stderr_w.as_raw_fd(),
        ]),
        ..Default::default()
    };
    let ends = Ends {
        stdin_r,
        stdout_w,
        stderr_w,
        stdin_w,
        stdout_r,
        stderr_r,
    };
    Ok((cmd, ends))
}

/// The child's rlimits: the grant's, tightened (never loosened).
fn child_grant(grant: &Grant) -> Grant {
    let mut grant = grant.clone();
    let cpu = grant.timeout.as_secs().saturating_add(1);
    let l = &mut grant.limits;
    l.address_space = Some(
        l.address_space
            .map_or(MAX_ADDRESS_SPACE, |a| a.min(MAX_ADDRESS_SPACE)),
    );
    l.cpu_seconds = Some(l.cpu_seconds.map_or(cpu, |c| c.min(cpu)));
    grant
}

/// Run the child in the sandbox while answering its frames and keeping
/// its stderr: the script's last frame and the run's outcome.
fn run_and_converse(
    grant: &Grant,
    cmd: &crate::sandbox::Command,
    ends: Ends,
    inputs: &Value,
    limits: &Limits<'_>,
    toolbox: Option<&dyn Toolbox>,
    cancel: Option<&CancelToken>,
) -> Result<(Option<Result<String, String>>, crate::sandbox::Outcome), CallError> {
    let Ends {
        stdin_r,
        stdout_w,
        stderr_w,
        stdin_w,
        stdout_r,
        stderr_r,
    } = ends;
    let (end, stderr, outcome) = std::thread::scope(|s| {
        let child = s.spawn(move || {
            let outcome = crate::sandbox::run(grant, cmd, cancel);
            // Our copies of the child's ends: its output ends only once
            // they are closed too.
            drop((stdin_r, stdout_w, stderr_w));
            outcome
        });
        let stderr = s.spawn(move || read_capped(File::from(stderr_r)));
        let end = converse(
            File::from(stdin_w),
            File::from(stdout_r),
            inputs,
            limits,
            toolbox,
            cancel,
        );
        let outcome = child.join();
        (end, stderr.join(), outcome)
    });
    let mut outcome = outcome
        .map_err(|_| CallError::Internal("the script runner's thread panicked".into()))??;
    if let Ok(stderr) = stderr {
        outcome.stderr = stderr;
    }
    // Stopped by its own interrupt at the deadline, or killed there by the
    // supervisor: the same timeout either way.
    if let (Exit::Code(0), Some(Err(m))) = (outcome.exit, &end)
        && m.starts_with(child::PAST_TIMEOUT)
    {
        outcome.exit = Exit::Timeout;
    }
    Ok((end, outcome))
}

/// The child's stderr, the first [`STDERR_CAP`] bytes kept.
fn read_capped(mut file: File) -> crate::sandbox::Captured {
    let mut buf = CappedBuffer::new(STDERR_CAP);
    let mut chunk = [0u8; 4096];
    while let Ok(n) = file.read(&mut chunk) {
        if n == 0 {
            break;
        }
        buf.push(&chunk[..n]);
    }
    buf.finish()
}

/// What the agent sees, and whether it is an error: what the script
/// returned or threw, capped, or why the child ended without it.
fn result_text(
    outcome: &crate::sandbox::Outcome,
    end: Option<Result<String, String>>,
    grant: &Grant,
    max_output: u64,
) -> (String, bool) {
    match (result::failure_line(outcome.exit, grant), end) {
        (None, Some(Ok(text))) => (cap(result::shown(&text).into_owned(), max_output), false),
        (None, Some(Err(message))) => (cap(message, max_output), true),
        // Killed (timeout, signal, cancel) or ended without a result.
        (failure, end) => {
            let mut text =
                failure.unwrap_or_else(|| "the script runner ended without a result".into());
            if let Some(Err(message)) = end {
                text.push_str(&format!("\n{message}"));
            }
            let stderr = result::shown_stream(&outcome.stderr);
            if !stderr.is_empty() {
                text.push_str(&format!("\n[stderr]\n{stderr}"));
            }
            (text, true)
        }
    }
}

/// At most `max` bytes of `text` (on a character boundary), with the
/// truncation marker when cut.
fn cap(text: String, max: u64) -> String {
    let max = usize::try_from(max).unwrap_or(usize::MAX);
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let omitted = (text.len() - end) as u64;
    format!("{}\n{}", &text[..end], truncation_marker(omitted))
}

/// Speak the protocol until the child's last frame (see [`child`]):
/// `Some(Ok(result))`, `Some(Err(message))`, or `None` when it ended
/// without one. One frame at a time: the next is read only once the inner
/// call a `tool` frame asked for has ended, so however the script
/// schedules its calls, at most one of them runs.
fn converse(
    mut to_child: File,
    from_child: File,
    inputs: &Value,
    limits: &Limits<'_>,
    toolbox: Option<&dyn Toolbox>,
    cancel: Option<&CancelToken>,
) -> Option<Result<String, String>> {
    // A write to a child that died fails; its exit tells why.
    let _ = writeln!(to_child, "{}", json!({ "inputs": inputs }));
    let mut from_child = BufReader::new(from_child);
    let mut calls = 0u64;
    loop {
        let mut line = Vec::new();
        match (&mut from_child)
            .take(MAX_FRAME)
            .read_until(b'\n', &mut line)
        {
            Ok(0) | Err(_) => return None,
            Ok(_) => {}
        }
        if !line.ends_with(b"\n") {
            return Some(Err(format!(
                "the script runner sent a frame over {} MiB",
                MAX_FRAME >> 20
            )));
        }
        let Ok(frame) = serde_json::from_slice::<Value>(&line) else {
            return Some(Err("the script runner sent a malformed frame".into()));
        };
        let text = |key: &str| {
            frame
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        match frame.get("op").and_then(Value::as_str) {
            Some("done") => return Some(Ok(text("result"))),
            Some("error") => return Some(Err(text("message"))),
            Some("tool") => {
                let args = frame.get("args").cloned().unwrap_or_else(|| json!({}));
                let answer = match nested(&text("name"), args, limits, &mut calls, toolbox, cancel)
                {
                    Ok(text) => json!({ "ok": text }),
                    Err(message) => json!({ "error": message }),
                };
                if writeln!(to_child, "{answer}").is_err() {
                    return None;
                }
            }
            _ => return Some(Err("the script runner sent an unknown frame".into())),
        }
    }
}

/// One `ctx.tool(name, args)`: checked against the script's limits, then
/// run through the engine like any call. An error result is an error.
fn nested(
    name: &str,
    args: Value,
    limits: &Limits<'_>,
    calls: &mut u64,
    toolbox: Option<&dyn Toolbox>,
    cancel: Option<&CancelToken>,
) -> Result<String, String> {
    if name == limits.name {
        return Err(format!("ctx.tool('{name}'): a script cannot call itself"));
    }
    if !limits.allowed.iter().any(|a| a == name) {
        let allowed = match limits.allowed.is_empty() {
            true => "none".to_string(),
            false => limits.allowed.join(", "),
        };
        return Err(format!(
            "ctx.tool('{name}'): not in this script's allowed_tools ({allowed})"
        ));
    }
    if *calls >= limits.max_calls {
        return Err(format!(
            "ctx.tool('{name}'): over this script's maxToolCalls ({})",
            limits.max_calls
        ));
    }
    *calls += 1;
    // The inner call is made one level deeper: by this script's callers
    // and this script.
    let mut callers = limits.callers.to_vec();
    callers.push(limits.name.to_string());
    // Through the outer call's pipeline when there is one: the inner call
    // is gated and recorded like any other; else the engine runs it.
    let result = match crate::call::pipeline::nested::call(name, args.clone(), cancel, &callers) {
        Some(r) => r.map_err(|e| format!("ctx.tool('{name}'): {e}"))?,
        None => {
            let toolbox =
                toolbox.ok_or_else(|| format!("ctx.tool('{name}'): no engine to run it"))?;
            let mut call = toolbox
                .prepare(name, args)
                .map_err(|e| format!("ctx.tool('{name}'): {e}"))?;
            call.callers = callers;
            toolbox
                .execute(&call, cancel)
                .map_err(|e| format!("ctx.tool('{name}'): {e}"))?
        }
    };
    match result.is_error {
        false => Ok(result.text),
        true => Err(format!("ctx.tool('{name}') failed: {}", result.text)),
    }
}
