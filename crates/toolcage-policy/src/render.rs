//! Text output for `toolcage policy`: one line per setting with where it
//! came from, then what the tool requested and what it was granted.

use super::resolve::Resolved;
use super::search_path::DroppedDir;
use super::state::enum_name;

/// Render a resolved grant, e.g. `network        off      (profile ci)`,
/// and the PATH directories it leaves out ([`Resolved::path_dropped`]).
pub fn render_text(r: &Resolved, path_dropped: &[DroppedDir]) -> String {
    let mut out = match &r.tool {
        Some(name) => format!("policy for tool {name}\n"),
        None => "policy defaults (no tool)\n".to_string(),
    };
    let kw = r
        .provenance
        .iter()
        .map(|p| p.key.len())
        .chain(r.requested.iter().map(|q| q.key.len()))
        .max()
        .unwrap_or(0);
    let vw = r
        .provenance
        .iter()
        .map(|p| p.value.len())
        .max()
        .unwrap_or(0)
        .min(48);
    for p in &r.provenance {
        // A root reached through a symlink: what the grant holds, then
        // the path as written.
        let source = match &p.written {
            Some(w) => format!("{}; written {w}", p.source),
            None => p.source.clone(),
        };
        out.push_str(&format!("  {:<kw$}  {:<vw$}  ({source})\n", p.key, p.value));
    }
    if !path_dropped.is_empty() {
        out.push_str("PATH directories left out (the grant cannot read them)\n");
        let dw = path_dropped.iter().map(|d| d.dir.len()).max().unwrap_or(0);
        for d in path_dropped {
            out.push_str(&format!("  {:<dw$}  (fix: {})\n", d.dir, d.fix));
        }
    }
    if !r.requested.is_empty() {
        out.push_str(&format!(
            "requested by tool {}\n",
            r.tool.as_deref().unwrap_or_default()
        ));
        for q in &r.requested {
            out.push_str(&format!(
                "  {:<kw$}  requested {}, granted {}  ({}: {})\n",
                q.key,
                q.requested,
                q.granted,
                enum_name(&q.decision),
                q.reason
            ));
        }
    }
    out
}
