//! The child side of a script call: `toolcage __script-runner SCRIPT HEAP
//! STACK TIMEOUT_MS`, started by [`super::execute`] inside the tool's
//! sandbox. It never runs in toolcage's own process.
//!
//! Protocol (JSON lines): the parent writes `{"inputs":…}`; the child
//! answers with any number of `{"op":"tool","name":…,"args":…}` (each
//! answered by `{"ok":"text"}` or `{"error":"text"}`), then one
//! `{"op":"done","result":"text"}` or `{"op":"error","message":"text"}`.

use crate::sandbox::script::{compile, load, lock_down_script};
use rquickjs::context::intrinsic::{
    Date, Json, MapSet, Promise as PromiseIntrinsic, RegExp, RegExpCompiler, TypedArrays,
};
use rquickjs::function::Opt;
use rquickjs::{Context, Ctx, Exception, Function, Object, Promise, Runtime, Value};
use serde_json::json;
use std::io::{BufRead, Write};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// The hidden subcommand's name.
pub(crate) const SUBCOMMAND: &str = "__script-runner";

/// What the parent passes on the command line.
struct Setup {
    script: String,
    heap: usize,
    stack: usize,
    timeout: Duration,
}

fn setup(args: &[String]) -> Result<Setup, String> {
    let [script, heap, stack, timeout] = args else {
        return Err(format!(
            "usage: toolcage {SUBCOMMAND} SCRIPT HEAP STACK TIMEOUT_MS"
        ));
    };
    let num = |s: &str| s.parse::<u64>().map_err(|e| format!("{s}: {e}"));
    Ok(Setup {
        script: script.clone(),
        heap: num(heap)? as usize,
        stack: num(stack)? as usize,
        timeout: Duration::from_millis(num(timeout)?),
    })
}

/// How the error that the interrupt handler's stop becomes begins: the
/// parent counts it as the call's timeout (the supervisor would have
/// killed the runner at the same moment).
pub(crate) const PAST_TIMEOUT: &str = "the script ran past its timeout";

/// Run the script named on the command line; the result goes to stdout as
/// a frame. The exit status is 0 whenever a frame was written.
pub(crate) fn main(args: &[String]) -> ExitCode {
    let frame = match setup(args).and_then(|s| run(&s)) {
        Ok(text) => json!({"op": "done", "result": text}),
        Err(message) => json!({"op": "error", "message": message}),
    };
    match send(&frame) {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::from(125),
    }
}

fn send(frame: &serde_json::Value) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    let mut line = serde_json::to_vec(frame)?;
    line.push(b'\n');
    out.write_all(&line)?;
    out.flush()
}

fn receive() -> Result<serde_json::Value, String> {
    let mut line = String::new();
    match std::io::stdin().lock().read_line(&mut line) {
        Ok(0) => Err("the parent closed the channel".into()),
        Ok(_) => serde_json::from_str(&line).map_err(|e| format!("bad frame from the parent: {e}")),
        Err(e) => Err(format!("reading from the parent: {e}")),
    }
}

fn run(s: &Setup) -> Result<String, String> {
    let source = std::fs::read_to_string(&s.script)
        .map_err(|e| format!("cannot read the script {}: {e}", s.script))?;
    let inputs = receive()?
        .get("inputs")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let rt = Runtime::new().map_err(|e| format!("QuickJS: {e}"))?;
    rt.set_memory_limit(s.heap);
    rt.set_max_stack_size(s.stack);
    // The supervisor kills at the timeout anyway; this stops a loop with
    // a clear message first. No deadline when the timeout overflows.
    let deadline = Instant::now().checked_add(s.timeout);
    rt.set_interrupt_handler(Some(Box::new(move || {
        deadline.is_some_and(|d| Instant::now() >= d)
    })));
    // Compile where eval exists; the module form makes `run` reachable
    // without a global, and strict.
    let module_source = format!("{source}\n;export {{ run }};\n");
    let bytecode = {
        let full = Context::full(&rt).map_err(|e| format!("QuickJS: {e}"))?;
        full.with(|ctx| compile(&ctx, "script", &module_source).map_err(|e| explain(&ctx, e, s)))?
    };
    lock_down_script()?;
    // Run where it does not: no Eval intrinsic, no module loader.
    let ctx = Context::custom::<(
        Date,
        RegExpCompiler,
        RegExp,
        Json,
        MapSet,
        TypedArrays,
        PromiseIntrinsic,
    )>(&rt)
    .map_err(|e| format!("QuickJS: {e}"))?;
    ctx.with(|ctx| {
        let result = start(&ctx, &bytecode, &inputs).and_then(|p| settle(&ctx, p));
        match result {
            Ok(v) => text_of(&ctx, v).map_err(|e| explain(&ctx, e, s)),
            Err(e) => Err(explain(&ctx, e, s)),
        }
    })
}

/// Evaluate the module and call `run(ctx, inputs)`.
fn start<'js>(
    ctx: &Ctx<'js>,
    bytecode: &crate::sandbox::script::Bytecode,
    inputs: &serde_json::Value,
) -> rquickjs::Result<Value<'js>> {
    let (module, evaluated) = load(ctx.clone(), bytecode)?.eval()?;
    evaluated.finish::<()>()?;
    let run: Function = module.get("run")?;
    let inputs = ctx.json_parse(inputs.to_string())?;
    run.call((context_object(ctx)?, inputs))
}

/// The `ctx` argument: a frozen object whose only member is `tool`.
fn context_object<'js>(ctx: &Ctx<'js>) -> rquickjs::Result<Object<'js>> {
    let obj = Object::new(ctx.clone())?;
    let tool = Function::new(
        ctx.clone(),
        |ctx: Ctx<'js>,
         name: Value<'js>,
         args: Opt<Value<'js>>|
         -> rquickjs::Result<Promise<'js>> {
            let (promise, resolve, reject) = Promise::new(&ctx)?;
            match tool_call(&ctx, name, args.0) {
                Ok(text) => resolve.call::<_, ()>((text,))?,
                Err(message) => {
                    let error = Exception::from_message(ctx.clone(), &message)?;
                    reject.call::<_, ()>((error,))?
                }
            }
            Ok(promise)
        },
    )?;
    obj.set("tool", tool)?;
    let freeze: Function = ctx.globals().get::<_, Object>("Object")?.get("freeze")?;
    freeze.call::<_, Value>((obj.clone(),))?;
    Ok(obj)
}

/// One `ctx.tool(name, args)`: ask the parent, wait for its answer.
fn tool_call<'js>(
    ctx: &Ctx<'js>,
    name: Value<'js>,
    args: Option<Value<'js>>,
) -> Result<String, String> {
    let Some(name) = name.as_string().and_then(|s| s.to_string().ok()) else {
        return Err("ctx.tool(name, args): name must be a string".into());
    };
    let args = match args.filter(|a| !a.is_undefined()) {
        None => json!({}),
        Some(a) => {
            let text = ctx
                .json_stringify(a)
                .ok()
                .flatten()
                .and_then(|s| s.to_string().ok())
                .ok_or("ctx.tool(name, args): args must be JSON-serialisable")?;
            serde_json::from_str(&text).map_err(|e| format!("ctx.tool args: {e}"))?
        }
    };
    send(&json!({"op": "tool", "name": name, "args": args}))
        .map_err(|e| format!("ctx.tool: the parent is gone: {e}"))?;
    let answer = receive()?;
    if let Some(ok) = answer.get("ok").and_then(|v| v.as_str()) {
        return Ok(ok.to_string());
    }
    Err(answer
        .get("error")
        .and_then(|v| v.as_str())
        .unwrap_or("ctx.tool: malformed answer from the parent")
        .to_string())
}

/// Run jobs until `value` (a promise, or a plain value) settles.
fn settle<'js>(ctx: &Ctx<'js>, value: Value<'js>) -> rquickjs::Result<Value<'js>> {
    let Some(promise) = value.as_promise().cloned() else {
        return Ok(value);
    };
    match promise.finish() {
        Err(rquickjs::Error::WouldBlock) => Err(Exception::throw_message(
            ctx,
            "run() returned a promise that never settles",
        )),
        other => other,
    }
}

/// The result text: a string as it is, anything else as JSON.
fn text_of<'js>(ctx: &Ctx<'js>, v: Value<'js>) -> rquickjs::Result<String> {
    if let Some(s) = v.as_string() {
        return s.to_string();
    }
    if v.is_undefined() {
        return Ok(String::new());
    }
    Ok(match ctx.json_stringify(v)? {
        Some(s) => s.to_string()?,
        None => String::new(),
    })
}

/// One line for an engine error: the thrown value's name and message, or
/// which limit was hit.
fn explain(ctx: &Ctx<'_>, e: rquickjs::Error, s: &Setup) -> String {
    let text = match e {
        rquickjs::Error::Exception => {
            let thrown = ctx.catch();
            match thrown.as_exception() {
                Some(x) => {
                    let name: String = x.get("name").unwrap_or_else(|_| "Error".into());
                    format!("{name}: {}", x.message().unwrap_or_default())
                }
                None => match thrown.as_string().and_then(|s| s.to_string().ok()) {
                    Some(s) => s,
                    None => format!("{thrown:?}"),
                },
            }
        }
        other => other.to_string(),
    };
    if text.contains("interrupted") {
        return format!(
            "{PAST_TIMEOUT} ({} ms) and was stopped",
            s.timeout.as_millis()
        );
    }
    if text.contains("out of memory") || text.contains("Allocation") {
        return format!(
            "the script ran out of memory (heap limit {} MiB): {text}",
            s.heap >> 20
        );
    }
    if text.contains("stack overflow") || text.contains("call stack") {
        return format!(
            "the script overflowed its stack (limit {} KiB): {text}",
            s.stack >> 10
        );
    }
    text
}
