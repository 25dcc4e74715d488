//! Where each setting of a grant came from: a file and key, a flag, a
//! profile (`Origin`, `At`), the layer being merged (`Layer`), and a value
//! with its origin (`Sourced`), which `toolcage policy` shows.

use super::error::PolicyError;
use super::parse::FileText;
use std::sync::Arc;

/// Where in the operator's input a value was written.
#[derive(Debug, Clone)]
pub(crate) enum At {
    File {
        file: Arc<FileText>,
        key: Vec<String>,
        index: Option<usize>,
    },
    Flag(String),
    /// Passed in by the caller (a tool's source directory, a tool request).
    Input,
    /// Added by toolcage to every grant, whatever the layers say (the
    /// safety floor in `floor.rs`); no layer can remove it.
    Floor,
}

/// Where a value came from: a label for people, a place for errors, and the
/// position of its layer (later layers have a higher `seq`).
#[derive(Debug, Clone)]
pub(crate) struct Origin {
    pub source: String,
    pub at: At,
    pub seq: usize,
    /// A read or write root as written, when it resolved to another path
    /// (a symlink on the way): `toolcage policy` shows both.
    pub written: Option<std::path::PathBuf>,
}

impl Origin {
    pub(crate) fn flag(flag: &str, seq: usize) -> Origin {
        Origin {
            source: flag.to_string(),
            at: At::Flag(flag.to_string()),
            seq,
            written: None,
        }
    }

    pub(crate) fn input(source: String, seq: usize) -> Origin {
        Origin {
            source,
            at: At::Input,
            seq,
            written: None,
        }
    }

    /// An entry of the safety floor: always applies, before every layer.
    pub(crate) fn floor(source: &str) -> Origin {
        Origin {
            source: source.to_string(),
            at: At::Floor,
            seq: 0,
            written: None,
        }
    }

    pub(crate) fn is_cli(&self) -> bool {
        matches!(self.at, At::Flag(_))
    }

    pub(crate) fn error(&self, message: impl Into<String>) -> PolicyError {
        let message = message.into();
        match &self.at {
            At::File { file, key, index } => PolicyError::File {
                file: file.label.clone(),
                line: file.line_of(key, *index),
                key: key.join("."),
                message,
            },
            At::Flag(flag) => PolicyError::Flag {
                flag: flag.clone(),
                message,
            },
            At::Input | At::Floor => PolicyError::Input(format!("{}: {message}", self.source)),
        }
    }
}

/// One file layer being applied: a whole file or one of its `[tools.NAME]`.
pub(crate) struct Layer<'a> {
    pub source: String,
    pub file: &'a Arc<FileText>,
    /// `[]` or `["tools", NAME]`.
    pub prefix: Vec<String>,
    pub seq: usize,
    /// A shipped profile: roots missing on this machine are skipped.
    pub shipped: bool,
    /// The operator's `--policy` file outside the project: it may lift a
    /// home secret (`[fs] allow_secrets`).
    pub operator: bool,
}

impl Layer<'_> {
    pub(crate) fn origin(&self, section: &str, key: &str, index: Option<usize>) -> Origin {
        self.origin_at(&[section, key], index)
    }

    /// The origin of a key outside any section (`with`), or of any key path.
    pub(crate) fn origin_at(&self, keys: &[&str], index: Option<usize>) -> Origin {
        let mut path = self.prefix.clone();
        path.extend(keys.iter().map(|k| k.to_string()));
        Origin {
            source: self.source.clone(),
            at: At::File {
                file: self.file.clone(),
                key: path,
                index,
            },
            seq: self.seq,
            written: None,
        }
    }
}

/// A value and where it came from (a list entry, or a single setting).
#[derive(Debug, Clone)]
pub(crate) struct Sourced<T> {
    pub v: T,
    pub o: Origin,
}
