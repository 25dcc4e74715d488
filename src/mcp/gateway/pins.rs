//! Tool pinning: the definition of every upstream tool (name, description,
//! input schema, annotations) is hashed the first time it is seen and
//! recorded in the project's state directory (`pins.json`, out of every
//! grant). A definition that differs from its pin is held back (not
//! offered, calls refused) until the operator approves it with
//! `toolcage upstreams approve NAME`: a server cannot swap what a tool
//! does behind the name an agent already trusts.

use rmcp::model::Tool;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The digest of what a tool is: what an agent reads and what it sends.
pub fn digest(tool: &Tool) -> String {
    let v = serde_json::json!({
        "name": tool.name,
        "description": tool.description,
        "inputSchema": tool.input_schema,
        "annotations": tool.annotations,
    });
    // serde_json keeps object keys sorted (no preserve_order): stable text.
    let text = serde_json::to_string(&v).unwrap_or_default();
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
struct PinFile {
    /// server → tool → sha256 of the definition.
    servers: BTreeMap<String, BTreeMap<String, String>>,
}

/// What a tool's definition is against its pin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PinState {
    /// Seen for the first time now: pinned as it is.
    New,
    /// As pinned.
    Pinned,
    /// Differs from its pin: held back until approved.
    Changed { pinned: String, now: String },
}

/// The pins of one project.
#[derive(Debug, Clone)]
pub struct Pins {
    path: PathBuf,
}

impl Pins {
    pub fn new(state_dir: &Path) -> Pins {
        Pins {
            path: state_dir.join("pins.json"),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn load(&self) -> PinFile {
        std::fs::read(&self.path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }

    fn save(&self, f: &PinFile) -> Result<(), String> {
        if let Some(dir) = self.path.parent() {
            crate::audit::location::private_dir(dir)?;
        }
        let tmp = self
            .path
            .with_extension(format!("json.{}", std::process::id()));
        let text = serde_json::to_vec_pretty(f).map_err(|e| e.to_string())?;
        std::fs::write(&tmp, text)
            .and_then(|()| std::fs::rename(&tmp, &self.path))
            .map_err(|e| format!("cannot write {}: {e}", self.path.display()))
    }

    /// Check `tools` of `server` against their pins; pin the new ones.
    pub fn check(&self, server: &str, tools: &[Tool]) -> Vec<PinState> {
        let mut f = self.load();
        let pinned = f.servers.entry(server.to_string()).or_default();
        let mut changed_file = false;
        let states = tools
            .iter()
            .map(|t| {
                let now = digest(t);
                match pinned.get(t.name.as_ref()) {
                    None => {
                        pinned.insert(t.name.to_string(), now);
                        changed_file = true;
                        PinState::New
                    }
                    Some(p) if *p == now => PinState::Pinned,
                    Some(p) => PinState::Changed {
                        pinned: p.clone(),
                        now,
                    },
                }
            })
            .collect();
        if changed_file && let Err(e) = self.save(&f) {
            tracing::warn!("pins: {e}");
        }
        states
    }

    /// Pin the current definitions of `tools` of `server` (all of them, or
    /// the one named `only`). The names pinned anew.
    pub fn approve(
        &self,
        server: &str,
        tools: &[Tool],
        only: Option<&str>,
    ) -> Result<Vec<String>, String> {
        let mut f = self.load();
        let pinned = f.servers.entry(server.to_string()).or_default();
        let mut approved = Vec::new();
        for t in tools.iter().filter(|t| only.is_none_or(|o| t.name == o)) {
            let now = digest(t);
            if pinned.get(t.name.as_ref()) != Some(&now) {
                pinned.insert(t.name.to_string(), now);
                approved.push(t.name.to_string());
            }
        }
        self.save(&f)?;
        Ok(approved)
    }

    /// How many tools of `server` are pinned.
    pub fn count(&self, server: &str) -> usize {
        self.load().servers.get(server).map_or(0, BTreeMap::len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(desc: &str) -> Tool {
        serde_json::from_value(serde_json::json!({
            "name": "echo", "description": desc, "inputSchema": {"type": "object"}
        }))
        .unwrap()
    }

    #[test]
    fn a_changed_definition_is_held_until_approved() {
        let dir = tempfile::tempdir().unwrap();
        let pins = Pins::new(dir.path());
        assert_eq!(pins.check("s", &[tool("a")]), vec![PinState::New]);
        assert_eq!(pins.check("s", &[tool("a")]), vec![PinState::Pinned]);
        assert!(matches!(
            pins.check("s", &[tool("b")])[0],
            PinState::Changed { .. }
        ));
        // Still held: checking does not re-pin.
        assert!(matches!(
            pins.check("s", &[tool("b")])[0],
            PinState::Changed { .. }
        ));
        assert_eq!(pins.approve("s", &[tool("b")], None).unwrap(), vec!["echo"]);
        assert_eq!(pins.check("s", &[tool("b")]), vec![PinState::Pinned]);
    }
}
