//! Tool pinning: the definition of every upstream tool (name, description,
//! input schema, annotations) is hashed the first time it is seen and
//! recorded, with the definition itself and the flat name the tool was
//! given, in the project's state directory (`pins.json`, out of every
//! grant). A definition that differs from its pin is held back (not
//! offered, calls refused) until the operator reviews it
//! (`toolcage upstreams show NAME`) and approves exactly what they saw
//! (`toolcage upstreams approve NAME --digest HEX`): a server cannot swap
//! what a tool does behind the name an agent already trusts, nor move a
//! name (and the operator's `[tools."name"]` section) onto another tool.
//!
//! The pins are a document of the project's store
//! ([`crate::gate::store`]): `pins.json` in the state directory (read and
//! replaced under an exclusive `flock` on `pins.lock`, written to a unique
//! temp file, synced, renamed into place), or a key in the Redis every
//! replica shares (`--store`), updated by compare-and-set. No pins yet is a
//! fresh start; an empty document or one that does not parse refuses every
//! upstream tool (fail closed) and is never rewritten: the operator
//! restores it or removes it. A store that does not answer refuses every
//! upstream tool too, until it answers again.

use super::names;
use crate::gate::store::{DocError, Store};
use rmcp::model::Tool;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// What is pinned of a tool: what an agent reads and what it sends.
pub(crate) fn definition(tool: &Tool) -> Value {
    serde_json::json!({
        "name": tool.name,
        "description": tool.description,
        "inputSchema": tool.input_schema,
        "annotations": tool.annotations,
    })
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The digest of a tool's definition.
pub(crate) fn digest(tool: &Tool) -> String {
    // serde_json keeps object keys sorted (no preserve_order): stable text.
    sha256_hex(
        serde_json::to_string(&definition(tool))
            .unwrap_or_default()
            .as_bytes(),
    )
}

/// The digest an operator approves a set of held definitions with
/// (`(tool, sha256 now)`): a single definition's own digest, or one over
/// every one of them, so approving a server approves exactly the set shown.
pub(crate) fn approval_digest(held: &[(String, String)]) -> String {
    if let [(_, one)] = held {
        return one.clone();
    }
    let mut lines: Vec<String> = held.iter().map(|(t, d)| format!("{t}\0{d}\n")).collect();
    lines.sort();
    sha256_hex(lines.concat().as_bytes())
}

/// One pinned tool.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct Pin {
    pub(crate) sha256: String,
    /// The flat name it was given (absent in pins of older versions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) name: Option<String>,
    /// The definition pinned (absent in pins of older versions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) definition: Option<Value>,
}

/// A pin as stored: the current form, or an older file's bare digest.
#[derive(Deserialize)]
#[serde(untagged)]
enum Stored {
    Pin(Pin),
    Digest(String),
}

#[derive(Deserialize)]
struct StoredFile {
    servers: BTreeMap<String, BTreeMap<String, Stored>>,
}

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
struct PinFile {
    /// server → tool → its pin.
    servers: BTreeMap<String, BTreeMap<String, Pin>>,
}

impl PinFile {
    fn parse(text: &str) -> Result<PinFile, String> {
        if text.trim().is_empty() {
            return Err("the file is empty".into());
        }
        let stored: StoredFile = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let mut names = BTreeSet::new();
        let mut f = PinFile::default();
        for (server, tools) in stored.servers {
            let pins = f.servers.entry(server.clone()).or_default();
            for (tool, s) in tools {
                let pin = match s {
                    Stored::Pin(p) => p,
                    Stored::Digest(d) => Pin {
                        sha256: d,
                        name: None,
                        definition: None,
                    },
                };
                let hex = pin.sha256.len() == 64
                    && pin
                        .sha256
                        .bytes()
                        .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
                if !hex {
                    return Err(format!("{server}/{tool}: sha256 is not 64 hex digits"));
                }
                if let Some(n) = &pin.name
                    && (!names::valid(n) || !names.insert(n.clone()))
                {
                    return Err(format!(
                        "{server}/{tool}: name '{n}' is not a flat name or is given twice"
                    ));
                }
                pins.insert(tool, pin);
            }
        }
        Ok(f)
    }

    /// Every flat name given, of every server.
    fn names(&self) -> BTreeSet<String> {
        self.servers
            .values()
            .flat_map(|t| t.values().filter_map(|p| p.name.clone()))
            .collect()
    }
}

/// What a tool's definition is against its pin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum PinState {
    /// Seen for the first time now: pinned as it is, with a new name.
    New,
    /// As pinned.
    Pinned,
    /// Differs from its pin: held back until approved.
    Changed { pinned: String, now: String },
    /// Its pinned name is now a local tool's: not offered (the name is
    /// never moved to another tool).
    NameTaken,
}

/// A tool of a server against the pins: its flat name and its state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Checked {
    pub(crate) name: String,
    pub(crate) state: PinState,
}

/// The pins of one project, in its store ([`crate::gate::store`]): the
/// state directory's `pins.json`, or Redis shared by every replica.
#[derive(Debug, Clone)]
pub(crate) struct Pins {
    store: Arc<dyn Store>,
    /// The document: [`DOC`] for tools, [`PROMPTS_DOC`] for prompts,
    /// [`PROMPT_MESSAGES_DOC`] for their messages.
    doc: &'static str,
}

/// The document the pins are, in the store.
const DOC: &str = "pins";
/// The document upstream prompts are pinned in (kept apart from tools:
/// a prompt's name takes no tool's flat name).
const PROMPTS_DOC: &str = "prompt-pins";
/// The document the messages of prompts' gets with no arguments are
/// pinned in (apart again: a prompt's definition digest stays as it was).
const PROMPT_MESSAGES_DOC: &str = "prompt-message-pins";

impl Pins {
    pub(crate) fn in_store(store: Arc<dyn Store>) -> Pins {
        Pins { store, doc: DOC }
    }

    /// The pins of upstream prompts, in the same store.
    pub(crate) fn prompts_in(store: Arc<dyn Store>) -> Pins {
        Pins {
            store,
            doc: PROMPTS_DOC,
        }
    }

    /// The pins of the messages upstream prompts return for no arguments,
    /// in the same store.
    pub(crate) fn prompt_messages_in(store: Arc<dyn Store>) -> Pins {
        Pins {
            store,
            doc: PROMPT_MESSAGES_DOC,
        }
    }

    /// Where the pins are: a path, or a key in a store.
    pub(crate) fn location(&self) -> String {
        self.store.doc_location(self.doc)
    }

    /// The pins' text, parsed, or why it cannot be trusted: the refusal
    /// that names it and the fix.
    fn parsed(&self, text: Option<&str>) -> Result<PinFile, String> {
        match text {
            None => Ok(PinFile::default()),
            Some(t) => PinFile::parse(t).map_err(|e| self.unusable(&format!("it is damaged: {e}"))),
        }
    }

    fn load(&self) -> Result<PinFile, String> {
        match self.store.read_doc(self.doc) {
            Ok(text) => self.parsed(text.as_deref()),
            Err(e) => Err(self.refusal(e)),
        }
    }

    fn refusal(&self, e: DocError) -> String {
        match e {
            DocError::Content(m) => m,
            DocError::Store(m) => format!(
                "upstream tool pins ({}): {m}; every upstream tool is refused until they can be \
                 read",
                self.location()
            ),
        }
    }

    fn unusable(&self, why: &str) -> String {
        let p = self.location();
        let reset = self.store.doc_reset(self.doc);
        format!(
            "upstream tool pins {p}: {why}; every upstream tool is refused until it is fixed \
             (restore it from a backup, or remove it to pin every upstream tool anew as its \
             server now reports it: {reset})"
        )
    }

    /// Read the pins, let `change` edit them, and write them back when it
    /// says they changed: atomic against every process and replica.
    fn update<T>(
        &self,
        mut change: impl FnMut(&mut PinFile) -> Result<(bool, T), String>,
    ) -> Result<T, String> {
        let mut out = None;
        let mut update = |text: Option<&str>| -> Result<Option<String>, String> {
            let mut f = self.parsed(text)?;
            let (changed, t) = change(&mut f)?;
            out = Some(t);
            if !changed {
                return Ok(None);
            }
            serde_json::to_string_pretty(&f)
                .map(Some)
                .map_err(|e| e.to_string())
        };
        self.store
            .update_doc(self.doc, &mut update)
            .map_err(|e| self.refusal(e))?;
        out.ok_or_else(|| "the pins were not read".to_string())
    }

    /// Check `tools` of `server` against their pins, in their order; pin
    /// the new ones with a name unique against `reserved` (local tools,
    /// names given to other servers) and every name ever pinned.
    pub(crate) fn check(
        &self,
        server: &str,
        tools: &[Tool],
        reserved: &BTreeSet<String>,
    ) -> Result<Vec<Checked>, String> {
        self.update(|f| Ok(Self::check_in(f, server, tools, reserved)))
    }

    fn check_in(
        f: &mut PinFile,
        server: &str,
        tools: &[Tool],
        reserved: &BTreeSet<String>,
    ) -> (bool, Vec<Checked>) {
        let mut taken: BTreeSet<String> = reserved.union(&f.names()).cloned().collect();
        let pinned = f.servers.entry(server.to_string()).or_default();
        let mut changed_file = false;
        let mut out: Vec<Option<Checked>> = vec![None; tools.len()];
        // New tools are named in an order of their own, never the list's:
        // a tool whose name needs no change first, then by name.
        let mut order: Vec<usize> = (0..tools.len()).collect();
        order.sort_by_key(|&i| {
            let n = tools[i].name.as_ref();
            (names::sanitize(n) != n, n.to_string())
        });
        for i in order {
            let t = &tools[i];
            let now = digest(t);
            let (name, state) = match pinned.get_mut(t.name.as_ref()) {
                None => {
                    let name = names::fresh(server, &t.name, &taken);
                    pinned.insert(
                        t.name.to_string(),
                        Pin {
                            sha256: now,
                            name: Some(name.clone()),
                            definition: Some(definition(t)),
                        },
                    );
                    changed_file = true;
                    (name, PinState::New)
                }
                Some(p) => {
                    let name = match &p.name {
                        Some(n) => n.clone(),
                        None => {
                            // A pin of an older version: named now, once.
                            let n = names::fresh(server, &t.name, &taken);
                            p.name = Some(n.clone());
                            changed_file = true;
                            n
                        }
                    };
                    let state = if reserved.contains(&name) {
                        PinState::NameTaken
                    } else if p.sha256 == now {
                        if p.definition.is_none() {
                            p.definition = Some(definition(t));
                            changed_file = true;
                        }
                        PinState::Pinned
                    } else {
                        PinState::Changed {
                            pinned: p.sha256.clone(),
                            now,
                        }
                    };
                    (name, state)
                }
            };
            taken.insert(name.clone());
            out[i] = Some(Checked { name, state });
        }
        (changed_file, out.into_iter().flatten().collect())
    }

    /// Pin the definitions of `tools` of `server` as they are (the
    /// operator approved exactly these); each keeps its name. The names of
    /// the tools pinned anew.
    pub(crate) fn approve(&self, server: &str, tools: &[&Tool]) -> Result<Vec<String>, String> {
        self.update(|f| Ok(Self::approve_in(f, server, tools)))
    }

    fn approve_in(f: &mut PinFile, server: &str, tools: &[&Tool]) -> (bool, Vec<String>) {
        let mut taken = f.names();
        let pinned = f.servers.entry(server.to_string()).or_default();
        let mut approved = Vec::new();
        for t in tools {
            let now = digest(t);
            let name = match pinned.get(t.name.as_ref()).and_then(|p| p.name.clone()) {
                Some(n) => n,
                None => names::fresh(server, &t.name, &taken),
            };
            taken.insert(name.clone());
            let pin = Pin {
                sha256: now,
                name: Some(name.clone()),
                definition: Some(definition(t)),
            };
            if pinned.get(t.name.as_ref()) != Some(&pin) {
                pinned.insert(t.name.to_string(), pin);
                approved.push(name);
            }
        }
        (!approved.is_empty(), approved)
    }

    /// The pin of `tool` of `server`.
    pub(crate) fn pin(&self, server: &str, tool: &str) -> Result<Option<Pin>, String> {
        Ok(self
            .load()?
            .servers
            .get(server)
            .and_then(|t| t.get(tool))
            .cloned())
    }

    /// The server and tool pinned under the flat name `name`.
    pub(crate) fn by_name(&self, name: &str) -> Result<Option<(String, String)>, String> {
        let f = self.load()?;
        Ok(f.servers.iter().find_map(|(s, tools)| {
            tools
                .iter()
                .find(|(_, p)| p.name.as_deref() == Some(name))
                .map(|(t, _)| (s.clone(), t.clone()))
        }))
    }

    /// How many tools of `server` are pinned (0 when the pins cannot be
    /// read: every tool is refused then).
    pub(crate) fn count(&self, server: &str) -> usize {
        self.load()
            .ok()
            .and_then(|f| f.servers.get(server).map(BTreeMap::len))
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::store::FileStore;
    use std::path::Path;

    impl Pins {
        /// The pins in `state_dir` (`pins.json`).
        fn new(state_dir: &Path) -> Pins {
            Pins::in_store(Arc::new(FileStore::new(state_dir)))
        }
    }

    fn tool(name: &str, desc: &str) -> Tool {
        serde_json::from_value(serde_json::json!({
            "name": name, "description": desc, "inputSchema": {"type": "object"}
        }))
        .unwrap()
    }

    fn states(c: &[Checked]) -> Vec<PinState> {
        c.iter().map(|c| c.state.clone()).collect()
    }

    #[test]
    fn a_changed_definition_is_held_until_approved() {
        let dir = tempfile::tempdir().unwrap();
        let pins = Pins::new(dir.path());
        let none = BTreeSet::new();
        let check = |d: &str| states(&pins.check("s", &[tool("echo", d)], &none).unwrap());
        assert_eq!(check("a"), vec![PinState::New]);
        assert_eq!(check("a"), vec![PinState::Pinned]);
        assert!(matches!(check("b")[0], PinState::Changed { .. }));
        // Still held: checking does not re-pin.
        assert!(matches!(check("b")[0], PinState::Changed { .. }));
        let b = tool("echo", "b");
        assert_eq!(pins.approve("s", &[&b]).unwrap(), vec!["s__echo"]);
        assert_eq!(check("b"), vec![PinState::Pinned]);
        let pin = pins.pin("s", "echo").unwrap().unwrap();
        assert_eq!(pin.definition.unwrap()["description"], "b");
    }

    #[test]
    fn names_stay_with_their_tools_whatever_the_order() {
        let dir = tempfile::tempdir().unwrap();
        let pins = Pins::new(dir.path());
        let none = BTreeSet::new();
        let (dot, under) = (tool("del.all", "x"), tool("del_all", "y"));
        let a = pins
            .check("s", &[dot.clone(), under.clone()], &none)
            .unwrap();
        let b = pins
            .check("s", &[under.clone(), dot.clone()], &none)
            .unwrap();
        assert_eq!(a[0].name, b[1].name);
        assert_eq!(a[1].name, b[0].name);
        assert_eq!(a[1].name, "s__del_all");
        // A new collision gets its own suffix; the others keep theirs.
        let third = tool("del-all", "z");
        let c = pins.check("s", &[third, under, dot], &none).unwrap();
        assert_eq!((c[1].name.as_str(), &c[2].name), ("s__del_all", &a[0].name));
        assert!(c[0].name.starts_with("s__del-all") || c[0].name.starts_with("s__del_all_"));
    }

    #[test]
    fn a_pinned_name_a_local_tool_took_is_not_given_to_anyone_else() {
        let dir = tempfile::tempdir().unwrap();
        let pins = Pins::new(dir.path());
        let echo = tool("echo", "a");
        let c = pins
            .check("s", std::slice::from_ref(&echo), &BTreeSet::new())
            .unwrap();
        assert_eq!(c[0].name, "s__echo");
        let local: BTreeSet<String> = ["s__echo".to_string()].into();
        let c = pins
            .check("s", std::slice::from_ref(&echo), &local)
            .unwrap();
        assert_eq!(
            (c[0].name.as_str(), &c[0].state),
            ("s__echo", &PinState::NameTaken)
        );
        // Control: the local tool gone, the tool is offered under its name again.
        let c = pins.check("s", &[echo], &BTreeSet::new()).unwrap();
        assert_eq!(c[0].state, PinState::Pinned);
    }

    #[test]
    fn a_damaged_file_refuses_and_is_left_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let pins = Pins::new(dir.path());
        for damaged in ["{not json", "", "{\"servers\": {\"s\": {\"t\": \"zz\"}}}"] {
            std::fs::write(dir.path().join("pins.json"), damaged).unwrap();
            let e = pins
                .check("s", &[tool("echo", "a")], &BTreeSet::new())
                .unwrap_err();
            assert!(
                e.contains(&format!("rm {}", dir.path().join("pins.json").display())),
                "{e}"
            );
            assert_eq!(
                std::fs::read_to_string(dir.path().join("pins.json")).unwrap(),
                damaged
            );
        }
        // An older file's bare digests still read, and gain a name.
        let d = digest(&tool("echo", "a"));
        std::fs::write(
            dir.path().join("pins.json"),
            format!("{{\"servers\":{{\"s\":{{\"echo\":\"{d}\"}}}}}}"),
        )
        .unwrap();
        let c = pins
            .check("s", &[tool("echo", "a")], &BTreeSet::new())
            .unwrap();
        assert_eq!(c[0].state, PinState::Pinned);
        assert_eq!(
            pins.pin("s", "echo").unwrap().unwrap().name.as_deref(),
            Some("s__echo")
        );
        // No temp file is left behind.
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }
}
