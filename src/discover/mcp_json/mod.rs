//! Octo / Claude Code `.mcp.json`: `{"mcpServers": {NAME: SERVER}}` where
//! SERVER is `{command, args, env, cwd}` (stdio) or `{type: "http", url,
//! headers}` (Streamable HTTP). `${VAR}` and `${VAR:-default}` are kept as
//! written (their syntax checked): the gateway expands them when it starts
//! the server, reading only the variables the operator's `env_from_host`
//! allows (`super::upstream`). `cwd` never reads the operator's
//! environment (`${VAR:-default}` gives the default). `type: "sse"` (the
//! legacy transport) is refused with the fix; a server named `toolcage`
//! is refused (its prompts would seem to be toolcage's). An entry that
//! runs `toolcage ... serve` itself (a client's registration of toolcage
//! written into the project's file) is skipped with a note: toolcage is
//! never its own upstream (docs/clients.md).

use super::upstream::{SkippedUpstream, Transport, UpstreamSpec};
use super::{Diagnostic, Found, fsread};
use crate::policy::Requests;
use crate::spec::Format;
use serde_json::{Map, Value};
use std::path::{Component, Path, PathBuf};

/// Where it lives, relative to the project.
pub(crate) const FILE: &str = ".mcp.json";

const READ_CAP: usize = 1024 * 1024;

/// Read `<project>/.mcp.json`, if there is one.
pub(crate) fn scan(project: &Path) -> Found {
    let mut f = Found::default();
    let path = project.join(FILE);
    if std::fs::symlink_metadata(&path).is_err() {
        return f;
    }
    f.examined.push(path.clone());
    if fsread::refuse_outside(&path, project, "the project", &mut f.diagnostics) {
        return f;
    }
    match fsread::read_text(&path, READ_CAP) {
        Ok(text) => parse(&text, &path, project, &mut f),
        Err(d) => f.diagnostics.push(d),
    }
    f
}

/// Parse the text of a `.mcp.json` at `file`; servers and diagnostics go
/// into `f`.
pub(crate) fn parse(text: &str, file: &Path, project: &Path, f: &mut Found) {
    let root: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => {
            f.diagnostics.push(
                Diagnostic::error(
                    file,
                    Some(e.line()),
                    format!("not valid JSON ({e}); no upstream server loaded"),
                )
                .fix("fix the JSON syntax"),
            );
            return;
        }
    };
    let Some(servers) = root.get("mcpServers").and_then(Value::as_object) else {
        f.diagnostics.push(
            Diagnostic::error(file, Some(1), "no \"mcpServers\" object; nothing loaded")
                .fix("write {\"mcpServers\": {\"NAME\": {\"command\": \"...\"}}}"),
        );
        return;
    };
    for (name, server) in servers {
        let line = line_of_key(text, name);
        let cx = Server {
            file,
            line,
            name,
            project,
        };
        match cx.read(server) {
            Ok(spec) => f.upstreams.push(spec),
            Err(d) => {
                f.skipped_upstreams
                    .push(skipped(name, server, file, line, &d));
                f.diagnostics.push(d);
            }
        }
    }
}

/// A server `read` refused, as `toolcage upstreams` lists it: a transport
/// toolcage does not speak is `unsupported`, any other problem `skipped`.
fn skipped(
    name: &str,
    server: &Value,
    file: &Path,
    line: Option<usize>,
    why: &Diagnostic,
) -> SkippedUpstream {
    let field = |k: &str| server.get(k).and_then(Value::as_str);
    let transport = match field("type") {
        Some(t) => t.to_string(),
        None if field("url").is_some() && field("command").is_none() => "http".into(),
        None => "stdio".into(),
    };
    let known = matches!(transport.as_str(), "stdio" | "http" | "streamable-http");
    let runs = match field("command") {
        Some(c) => {
            let mut words = vec![c.to_string()];
            if let Some(args) = server.get("args").and_then(Value::as_array) {
                words.extend(args.iter().filter_map(Value::as_str).map(str::to_string));
            }
            words.join(" ")
        }
        None => field("url").unwrap_or_default().to_string(),
    };
    SkippedUpstream {
        name: name.to_string(),
        format: Format::McpJson,
        source: file.to_path_buf(),
        line,
        state: if known { "skipped" } else { "unsupported" },
        transport,
        runs,
        diagnostic: why.clone(),
    }
}

struct Server<'a> {
    file: &'a Path,
    line: Option<usize>,
    name: &'a str,
    project: &'a Path,
}

impl Server<'_> {
    fn error(&self, message: impl std::fmt::Display, fix: &str) -> Diagnostic {
        Diagnostic::error(
            self.file,
            self.line,
            format!("server '{}': {message}; server skipped", self.name),
        )
        .fix(fix)
    }

    fn read(&self, server: &Value) -> Result<UpstreamSpec, Diagnostic> {
        if let Some(program) = runs_toolcage_serve(server) {
            return Err(Diagnostic::note(
                self.file,
                self.line,
                format!(
                    "server '{}' runs toolcage itself ({program} ... serve): skipped, toolcage \
                     is never its own upstream",
                    self.name
                ),
            )
            .fix(
                "register toolcage in your MCP client's user-level configuration \
                 (docs/clients.md) and remove this entry from the project's .mcp.json",
            ));
        }
        if self.name.is_empty() || self.name.chars().any(char::is_control) {
            return Err(self.error(
                "the name is empty or holds control characters",
                "name the server with letters, digits, '_' or '-'",
            ));
        }
        if super::upstream::impersonates_toolcage(self.name) {
            return Err(self.error(
                "the name is toolcage's own: its requests to the person would seem to come from \
                 toolcage",
                "rename the server (the key in \"mcpServers\")",
            ));
        }
        let Some(obj) = server.as_object() else {
            return Err(self.error(
                "not an object",
                "write {\"command\": \"...\", \"args\": [...]} or {\"type\": \"http\", \"url\": \"...\"}",
            ));
        };
        let kind = match obj.get("type") {
            None => None,
            Some(Value::String(s)) => Some(s.as_str()),
            Some(_) => {
                return Err(self.error("\"type\" is not a string", "use \"stdio\" or \"http\""));
            }
        };
        let mut requests = Requests::default();
        let transport = match kind {
            Some("sse") => {
                return Err(self.error(
                    "type \"sse\" (the legacy HTTP+SSE transport) is not supported",
                    "use the server's Streamable HTTP endpoint with \"type\": \"http\"",
                ));
            }
            Some("http" | "streamable-http") => self.http(obj, &mut requests)?,
            None if obj.contains_key("url") && !obj.contains_key("command") => {
                self.http(obj, &mut requests)?
            }
            None | Some("stdio") => self.stdio(obj)?,
            Some(other) => {
                return Err(self.error(
                    format!("unknown type \"{other}\""),
                    "use \"stdio\" (with command) or \"http\" (with url)",
                ));
            }
        };
        Ok(UpstreamSpec {
            name: self.name.to_string(),
            format: Format::McpJson,
            source: self.file.to_path_buf(),
            line: self.line,
            transport,
            requests,
        })
    }

    /// `s` as written, once its `${...}` syntax is checked (the gateway
    /// expands it).
    fn expand(&self, field: &str, s: &str) -> Result<String, Diagnostic> {
        super::upstream::check_template(s)
            .map(|()| s.to_string())
            .map_err(|e| self.error(format!("{field}: {e}"), "write ${NAME} or ${NAME:-default}"))
    }

    fn string(&self, obj: &Map<String, Value>, key: &str) -> Result<Option<String>, Diagnostic> {
        match obj.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => self.expand(key, s).map(Some),
            Some(_) => Err(self.error(
                format!("\"{key}\" is not a string"),
                "write it as a JSON string",
            )),
        }
    }

    fn pairs(
        &self,
        obj: &Map<String, Value>,
        key: &str,
    ) -> Result<Vec<(String, String)>, Diagnostic> {
        let Some(v) = obj.get(key) else {
            return Ok(Vec::new());
        };
        let Some(m) = v.as_object() else {
            return Err(self.error(
                format!("\"{key}\" is not an object"),
                "write {\"NAME\": \"value\"}",
            ));
        };
        let mut out = Vec::new();
        for (k, v) in m {
            let Some(s) = v.as_str() else {
                return Err(self.error(
                    format!("{key}.{k} is not a string"),
                    "write every value as a JSON string",
                ));
            };
            if key == "env" && !super::valid_env_name(k) {
                return Err(self.error(
                    format!("env: '{k}' is not a variable name"),
                    "use letters, digits and '_'",
                ));
            }
            out.push((k.clone(), self.expand(&format!("{key}.{k}"), s)?));
        }
        Ok(out)
    }

    fn stdio(&self, obj: &Map<String, Value>) -> Result<Transport, Diagnostic> {
        let Some(command) = self
            .string(obj, "command")?
            .filter(|c| !c.trim().is_empty())
        else {
            return Err(self.error("no \"command\"", "give the program that starts the server"));
        };
        let args = match obj.get("args") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) => {
                let mut out = Vec::new();
                for (i, v) in a.iter().enumerate() {
                    let Some(s) = v.as_str() else {
                        return Err(self.error(
                            format!("args[{i}] is not a string"),
                            "write every argument as a JSON string",
                        ));
                    };
                    out.push(self.expand(&format!("args[{i}]"), s)?);
                }
                out
            }
            Some(_) => return Err(self.error("\"args\" is not an array", "write [\"arg\", ...]")),
        };
        let env = self.pairs(obj, "env")?;
        let cwd = match self.string(obj, "cwd")? {
            None => None,
            Some(c) => Some(self.inside_project(&self.cwd_text(&c)?)?),
        };
        Ok(Transport::Stdio {
            command,
            args,
            env,
            cwd,
        })
    }

    fn http(
        &self,
        obj: &Map<String, Value>,
        requests: &mut Requests,
    ) -> Result<Transport, Diagnostic> {
        let Some(url) = self.string(obj, "url")? else {
            return Err(self.error(
                "type \"http\" without \"url\"",
                "give the server's Streamable HTTP endpoint",
            ));
        };
        let headers = self.pairs(obj, "headers")?;
        // A url with `${...}` is checked once the gateway expands it.
        *requests = match url.contains("${") {
            false => super::upstream::url_requests(&url).map_err(|(m, fix)| self.error(m, fix))?,
            true => Requests {
                network: Some(true),
                ..Requests::default()
            },
        };
        Ok(Transport::Http { url, headers })
    }

    /// `cwd` with `${VAR:-default}` as its default: it is checked here,
    /// inside the project, so it reads no host variable.
    fn cwd_text(&self, cwd: &str) -> Result<String, Diagnostic> {
        super::upstream::expand_env(cwd, |_| None).map_err(|e| {
            self.error(
                format!("cwd: {e} (cwd never reads the operator's environment)"),
                "write the directory, relative to the project",
            )
        })
    }

    /// `cwd` relative to the project; it must stay inside.
    fn inside_project(&self, cwd: &str) -> Result<PathBuf, Diagnostic> {
        let joined = self.project.join(cwd);
        let mut clean = PathBuf::new();
        for c in joined.components() {
            match c {
                Component::ParentDir => {
                    clean.pop();
                }
                Component::CurDir => {}
                other => clean.push(other),
            }
        }
        let real = clean.canonicalize().unwrap_or_else(|_| clean.clone());
        let root = self
            .project
            .canonicalize()
            .unwrap_or_else(|_| self.project.to_path_buf());
        if !real.starts_with(&root) {
            return Err(self.error(
                format!("cwd '{cwd}' is outside the project"),
                "use a directory inside the project",
            ));
        }
        Ok(real)
    }
}

/// The program of a stdio entry that starts `toolcage serve`: its command
/// is named `toolcage` (a bare name or a path ending in it), or is the
/// running binary (by path, or found first on `PATH`), and `serve` is one
/// of its arguments. `None` for anything else.
fn runs_toolcage_serve(server: &Value) -> Option<String> {
    let command = server.get("command")?.as_str()?;
    let args = server.get("args")?.as_array()?;
    if !args.iter().any(|a| a.as_str() == Some("serve")) {
        return None;
    }
    let named = Path::new(command)
        .file_name()
        .is_some_and(|n| n == "toolcage");
    (named || is_running_binary(command)).then(|| command.to_string())
}

/// Whether `command` (a path, or a name looked up on `PATH`) is the binary
/// running now.
fn is_running_binary(command: &str) -> bool {
    let Ok(me) = std::env::current_exe().and_then(|p| p.canonicalize()) else {
        return false;
    };
    let same = |p: &Path| p.canonicalize().is_ok_and(|p| p == me);
    if command.contains('/') {
        return same(Path::new(command));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(command))
        .find(|p| p.is_file())
        .is_some_and(|p| same(&p))
}

/// The 1-based line of the first `"key":` in `text`.
fn line_of_key(text: &str, key: &str) -> Option<usize> {
    let quoted = serde_json::to_string(key).ok()?;
    let mut from = 0;
    while let Some(p) = text[from..].find(&quoted) {
        let at = from + p;
        let rest = text[at + quoted.len()..].trim_start();
        if rest.starts_with(':') {
            return Some(text[..at].matches('\n').count() + 1);
        }
        from = at + quoted.len();
    }
    None
}
