//! Policy errors: each one a single line that names where the problem is
//! (file and line, or the CLI flag) and, where obvious, the fix.

/// Why a policy could not be loaded or resolved.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// A problem at a place in a policy file.
    #[error("policy {file}:{line}: {}{message}", key_prefix(key))]
    File {
        /// The file's path, or `<shipped>/NAME.toml` for a shipped profile.
        file: String,
        /// 1-based.
        line: usize,
        /// Dotted key path (`limits.timeout`); empty when not known.
        key: String,
        message: String,
    },
    /// The policy file could not be read.
    #[error("policy {file}: cannot read: {source}")]
    Read {
        file: String,
        #[source]
        source: std::io::Error,
    },
    /// `--profile NAME` with a name that is not shipped.
    #[error("unknown profile '{name}' (valid profiles: {valid})")]
    UnknownProfile { name: String, valid: String },
    /// A problem with a command-line flag (`--read`, `--timeout`, ...).
    #[error("{flag}: {message}")]
    Flag { flag: String, message: String },
    /// A problem with what the caller passed in (a tool's source directory,
    /// the project) rather than with the operator's policy.
    #[error("{0}")]
    Input(String),
}

fn key_prefix(key: &str) -> String {
    if key.is_empty() {
        String::new()
    } else {
        format!("{key}: ")
    }
}
