//! Who may use `serve --http`: the holder of a bearer token.
//!
//! Without it any local process that reaches the port could open a session
//! and call every tool with the operator's rights (and, declaring
//! elicitation, answer its own approval prompts). So by default the server
//! makes a token of 32 random bytes from the OS (64 hex digits), writes it
//! to `<state dir>/http-token` (mode 0600, the directory 0700, written to a
//! temporary file and renamed into place) and admits only requests with
//! `Authorization: Bearer <token>`; the rest get 401 with a JSON-RPC error
//! and `WWW-Authenticate: Bearer`. `--token-file FILE` uses the operator's
//! token instead (the file must not be readable by group or others).
//! `--no-auth` turns the check off and is refused unless the address is
//! loopback (see `cli::serve`).

use bytes::Bytes;
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::{HeaderMap, Response, StatusCode, header};
use sha2::{Digest, Sha256};
use std::convert::Infallible;
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The token file's name in the state directory.
pub(crate) const TOKEN_FILE: &str = "http-token";

/// Largest token file read (a token is a line, not a document).
const MAX_TOKEN_FILE: u64 = 4096;

/// What a request must carry.
#[derive(Clone)]
pub enum Auth {
    /// `Authorization: Bearer <token>`.
    Bearer(Token),
    /// Anyone who reaches the port (`--no-auth`, loopback only).
    None,
}

/// A bearer token; never printed.
#[derive(Clone)]
pub struct Token(String);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

impl Token {
    /// A token the caller supplies (tests, embedders); see [`Token::check`]
    /// for what is allowed.
    pub fn new(s: &str) -> Result<Token, String> {
        Token::check(s.trim()).map(|t| Token(t.to_string()))
    }

    /// 32 random bytes from the OS, as 64 hex digits.
    pub(crate) fn generate() -> std::io::Result<Token> {
        let mut raw = [0u8; 32];
        std::fs::File::open("/dev/urandom")?.read_exact(&mut raw)?;
        Ok(Token(raw.iter().map(|b| format!("{b:02x}")).collect()))
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }

    /// Visible ASCII without spaces, so it fits in a header as it is.
    fn check(s: &str) -> Result<&str, String> {
        if s.is_empty() {
            return Err("is empty".into());
        }
        if !s.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(
                "holds characters a header cannot carry (use visible ASCII without spaces)".into(),
            );
        }
        Ok(s)
    }

    /// Constant-time comparison: both sides are hashed first, so neither
    /// the content nor the length of the token leaks through timing.
    pub(crate) fn matches(&self, presented: &str) -> bool {
        let a = Sha256::digest(self.0.as_bytes());
        let b = Sha256::digest(presented.as_bytes());
        a.iter()
            .zip(b.iter())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
    }
}

/// Why a request was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// No `Authorization: Bearer` header.
    Missing,
    /// A bearer token that is not this server's.
    Invalid,
}

impl Auth {
    /// `Ok` when `headers` carry what this server requires.
    pub(crate) fn admit(&self, headers: &HeaderMap) -> Result<(), Refused> {
        let Auth::Bearer(token) = self else {
            return Ok(());
        };
        let presented = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                let (scheme, rest) = v.trim().split_once(' ')?;
                scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
            });
        match presented {
            None => Err(Refused::Missing),
            Some(p) if token.matches(p) => Ok(()),
            Some(_) => Err(Refused::Invalid),
        }
    }
}

/// 401 with a JSON-RPC error (`id` null) and `WWW-Authenticate: Bearer`.
pub(crate) fn unauthorized(why: Refused) -> Response<BoxBody<Bytes, Infallible>> {
    let (message, challenge) = match why {
        Refused::Missing => (
            "unauthorized: this server requires \"Authorization: Bearer <token>\"; the token is \
             in the file `toolcage serve --http` printed at start",
            "Bearer realm=\"toolcage\"",
        ),
        Refused::Invalid => (
            "unauthorized: the bearer token is not this server's (it makes a new one at every \
             start: read the token file again)",
            "Bearer realm=\"toolcage\", error=\"invalid_token\"",
        ),
    };
    let body = serde_json::json!({"jsonrpc": "2.0", "id": null, "error": {
        "code": -32001,
        "message": message,
    }});
    let mut out = Response::new(Full::new(Bytes::from(body.to_string())).boxed());
    *out.status_mut() = StatusCode::UNAUTHORIZED;
    let h = out.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    h.insert(
        header::WWW_AUTHENTICATE,
        header::HeaderValue::from_static(challenge),
    );
    out
}

/// Read the operator's token from `path` (`--token-file`): a regular file
/// not readable or writable by group or others; surrounding whitespace is
/// trimmed; empty is an error.
pub(crate) fn read_token_file(path: &Path) -> Result<Token, String> {
    let shown = path.display();
    let file = std::fs::File::open(path).map_err(|e| {
        format!("--token-file {shown}: cannot open: {e} (fix: give a readable file)")
    })?;
    let meta = file
        .metadata()
        .map_err(|e| format!("--token-file {shown}: {e}"))?;
    if !meta.is_file() {
        return Err(format!(
            "--token-file {shown}: not a regular file (fix: put the token in a file)"
        ));
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(format!(
            "--token-file {shown}: mode {mode:04o} lets group or others read it \
             (fix: chmod 600 {shown})"
        ));
    }
    let mut text = String::new();
    file.take(MAX_TOKEN_FILE + 1)
        .read_to_string(&mut text)
        .map_err(|e| format!("--token-file {shown}: cannot read as UTF-8 text: {e}"))?;
    if text.len() as u64 > MAX_TOKEN_FILE {
        return Err(format!(
            "--token-file {shown}: larger than {MAX_TOKEN_FILE} bytes (fix: put only the token in it)"
        ));
    }
    Token::check(text.trim())
        .map(|t| Token(t.to_string()))
        .map_err(|why| {
            format!("--token-file {shown}: the token {why} (fix: write the token on one line)")
        })
}

/// Write `token` to `<dir>/http-token` (0600; `dir` created 0700, and made
/// 0700 when it is ours and looser), atomically: a temporary file in the
/// same directory, renamed into place. Returns the file's path.
pub(crate) fn write_token_file(dir: &Path, token: &Token) -> Result<PathBuf, String> {
    crate::audit::location::private_dir(dir)?;
    let meta = std::fs::symlink_metadata(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    if !meta.is_dir() {
        return Err(format!(
            "{} is not a directory (fix: remove it, toolcage makes it)",
            dir.display()
        ));
    }
    if meta.permissions().mode() & 0o077 != 0 && meta.uid() == nix::unistd::geteuid().as_raw() {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| format!("cannot make {} private: {e}", dir.display()))?;
    }
    let path = dir.join(TOKEN_FILE);
    let tmp = dir.join(format!(".{TOKEN_FILE}.{}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
            .open(&tmp)?;
        f.write_all(format!("{}\n", token.as_str()).as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, &path)
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!("cannot write the token file {}: {e}", path.display())
    })?;
    Ok(path)
}

/// Remove the token file at shutdown, unless another server has replaced
/// it with its own token since.
pub(crate) fn remove_token_file(path: &Path, token: &Token) {
    if let Ok(text) = std::fs::read_to_string(path)
        && text.trim() == token.as_str()
    {
        let _ = std::fs::remove_file(path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(auth: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Some(a) = auth {
            h.insert(header::AUTHORIZATION, a.parse().unwrap());
        }
        h
    }

    #[test]
    fn bearer_admits_only_its_token() {
        let t = Token::generate().unwrap();
        assert_eq!(t.as_str().len(), 64);
        assert_ne!(t.as_str(), Token::generate().unwrap().as_str());
        let auth = Auth::Bearer(t.clone());
        let good = format!("Bearer {}", t.as_str());
        assert_eq!(auth.admit(&headers(Some(&good))), Ok(()));
        let lower = format!("bearer  {} ", t.as_str());
        assert_eq!(auth.admit(&headers(Some(&lower))), Ok(()));
        assert_eq!(auth.admit(&headers(None)), Err(Refused::Missing));
        assert_eq!(
            auth.admit(&headers(Some(&format!("Basic {}", t.as_str())))),
            Err(Refused::Missing)
        );
        for bad in [
            "Bearer x".to_string(),
            format!("Bearer {}x", t.as_str()),
            format!("Bearer {}", &t.as_str()[..63]),
        ] {
            assert_eq!(auth.admit(&headers(Some(&bad))), Err(Refused::Invalid));
        }
        // No auth: anything goes.
        assert_eq!(Auth::None.admit(&headers(None)), Ok(()));
        assert_eq!(format!("{t:?}"), "Token(<redacted>)");
    }

    #[test]
    fn unauthorized_is_401_with_a_challenge() {
        let r = unauthorized(Refused::Missing);
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
        assert!(
            r.headers()[header::WWW_AUTHENTICATE]
                .to_str()
                .unwrap()
                .starts_with("Bearer")
        );
    }

    #[test]
    fn token_files_are_private_and_written_atomically() {
        let d = tempfile::tempdir().unwrap();
        let state = d.path().join("state/abc");
        let t = Token::generate().unwrap();
        let path = write_token_file(&state, &t).unwrap();
        assert_eq!(path, state.join(TOKEN_FILE));
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(&state), 0o700);
        assert_eq!(read_token_file(&path).unwrap().as_str(), t.as_str());
        // Replaced, not appended; no temporary file left behind.
        let t2 = Token::generate().unwrap();
        write_token_file(&state, &t2).unwrap();
        assert_eq!(read_token_file(&path).unwrap().as_str(), t2.as_str());
        assert_eq!(std::fs::read_dir(&state).unwrap().count(), 1);
        // Removed at shutdown only while it is still ours.
        remove_token_file(&path, &t);
        assert!(path.exists());
        remove_token_file(&path, &t2);
        assert!(!path.exists());
    }

    #[test]
    fn operator_token_files_must_be_private_and_non_empty() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("tok");
        let write = |text: &str, mode: u32| {
            std::fs::write(&p, text).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        write("  s3cret-token\n", 0o600);
        assert_eq!(read_token_file(&p).unwrap().as_str(), "s3cret-token");
        write("s3cret-token\n", 0o400);
        assert!(read_token_file(&p).is_ok());
        write("s3cret-token\n", 0o644);
        let e = read_token_file(&p).unwrap_err();
        assert!(e.contains("0644") && e.contains("chmod 600"), "{e}");
        write("s3cret-token\n", 0o640);
        assert!(read_token_file(&p).is_err());
        write(" \n", 0o600);
        assert!(read_token_file(&p).unwrap_err().contains("empty"));
        write("two words\n", 0o600);
        assert!(read_token_file(&p).is_err());
        assert!(read_token_file(&d.path().join("missing")).is_err());
        assert!(read_token_file(d.path()).is_err());
    }
}
