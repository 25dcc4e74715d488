//! The shared store: one Redis for every replica of a service.
//!
//! Every key is `toolcage:NS:…`: `NS` is the namespace of one project or
//! deployment (`--store-prefix`, else the project's digest), so projects
//! sharing one Redis share nothing.
//!
//! - Rate limits: one sorted set per limit key (`toolcage:NS:rate:KEY`), the
//!   admitted calls' times (milliseconds) as scores. One Lua script
//!   ([`RATE_SCRIPT`], `EVALSHA`, falling back to `EVAL` once after a
//!   Redis restart) checks every limit of a call and records it in all or
//!   none, atomically: one round trip per limited call. The windows are the
//!   file store's ([`crate::gate::ratelimit::RateLimiter`]): a call is
//!   admitted when fewer than `requests` calls were admitted in the
//!   `window` before now; a refused call is not recorded; the wait is until
//!   the call `requests` back leaves the window. Time is the Redis server's
//!   clock (`TIME`), one clock for every replica.
//! - Documents (the pins): a string key `toolcage:NS:doc:NAME`, updated by a
//!   compare-and-set script (the text read must still be there), retried
//!   when another replica wrote in between.
//!
//! The connection is opened at the first operation and reopened at the
//! next one after any failure, with connect, read and write timeouts
//! ([`TIMEOUT`]): a store that does not answer refuses in half a second.

use super::{
    DocError, PasswordFrom, Store, StoreSpec, Update, check_prefix, count_error, default_prefix,
};
use crate::gate::persist::{RateCheck, RateRefusal, StateError};
use crate::gate::ratelimit::Limited;
use crate::policy::RateLimit;
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

/// Connect, read and write timeout of every store operation.
pub(crate) const TIMEOUT: Duration = Duration::from_millis(500);

/// How often a document update is tried against concurrent writers.
const CAS_TRIES: usize = 16;

/// `KEYS`: the limits' sorted sets. `ARGV[1]`: now in ms (`""`: the
/// server's clock); then `requests`, `window ms` per key. Returns
/// `{-1, 0}` when admitted (and recorded under every key), else
/// `{index of the refusing limit, ms until it admits one}`.
const RATE_SCRIPT: &str = r"
local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
else
  now = tonumber(ARGV[1])
end
for i, key in ipairs(KEYS) do
  local requests = tonumber(ARGV[2 * i])
  local window = tonumber(ARGV[2 * i + 1])
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
  local n = redis.call('ZCARD', key)
  if n >= requests then
    local at = redis.call('ZRANGE', key, n - requests, n - requests, 'WITHSCORES')
    local oldest = now
    if at[2] then oldest = tonumber(at[2]) end
    local wait = oldest + window - now
    if wait < 0 then wait = 0 end
    return {i - 1, wait}
  end
end
for i, key in ipairs(KEYS) do
  local same = redis.call('ZCOUNT', key, now, now)
  redis.call('ZADD', key, now, now .. ':' .. same)
  redis.call('PEXPIRE', key, tonumber(ARGV[2 * i + 1]))
end
return {-1, 0}
";

/// `KEYS[1]`: the document. `ARGV[1]`: `1` when it was read with text
/// `ARGV[2]`, `0` when there was none; `ARGV[3]`: the new text. Returns 1
/// when written, 0 when it changed since it was read.
const CAS_SCRIPT: &str = r"
local cur = redis.call('GET', KEYS[1])
if (ARGV[1] == '0' and not cur) or (ARGV[1] == '1' and cur == ARGV[2]) then
  redis.call('SET', KEYS[1], ARGV[3])
  return 1
end
return 0
";

/// Gate state in Redis.
pub struct RedisStore {
    client: redis::Client,
    /// The URL as the operator gave it (never with a password).
    shown: String,
    /// `toolcage:NS:`, the start of every key.
    prefix: String,
    conn: Mutex<Option<redis::Connection>>,
    rate: redis::Script,
    cas: redis::Script,
    /// Now in ms for the rate script instead of the server's clock (tests).
    fixed_now: bool,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("url", &self.shown)
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

/// Check a store URL: `redis://` or `rediss://`, a host, an optional port
/// and database, no password (it would show in `ps` and in logs).
pub(crate) fn check_url(url: &str) -> Result<url::Url, String> {
    let bad = |why: &str| {
        format!(
            "--store: {why} (fix: give redis://HOST:PORT[/DB] or rediss://HOST:PORT[/DB]; a \
             password goes in --store-password-file or --store-password-env)"
        )
    };
    let u = url::Url::parse(url).map_err(|e| bad(&format!("not a URL: {e}")))?;
    if !matches!(u.scheme(), "redis" | "rediss") {
        return Err(bad(&format!(
            "scheme '{}' is not redis or rediss",
            u.scheme()
        )));
    }
    if u.password().is_some() {
        return Err(bad("the URL holds a password"));
    }
    if u.host_str().is_none_or(str::is_empty) {
        return Err(bad("no host"));
    }
    if u.query().is_some() || u.fragment().is_some() {
        return Err(bad("a query or fragment is not accepted"));
    }
    let path = u.path().trim_start_matches('/');
    if !path.is_empty() && path.parse::<u32>().is_err() {
        return Err(bad(&format!("database '{path}' is not a number")));
    }
    Ok(u)
}

impl RedisStore {
    /// A store at `url` (checked by [`check_url`]), authenticating with
    /// `password` when given, its keys in namespace `default` until
    /// [`RedisStore::with_prefix`] names one. Nothing is connected yet.
    pub fn new(url: &str, password: Option<String>) -> Result<RedisStore, String> {
        let u = check_url(url)?;
        let shown = u.to_string();
        let mut info = redis::IntoConnectionInfo::into_connection_info(u)
            .map_err(|e| format!("--store {shown}: {e}"))?;
        if let Some(p) = password {
            let settings = info.redis_settings().clone().set_password(p);
            info = info.set_redis_settings(settings);
        }
        let client = redis::Client::open(info).map_err(|e| format!("--store {shown}: {e}"))?;
        Ok(RedisStore {
            client,
            shown,
            prefix: "toolcage:default:".into(),
            conn: Mutex::new(None),
            rate: redis::Script::new(RATE_SCRIPT),
            cas: redis::Script::new(CAS_SCRIPT),
            fixed_now: false,
        })
    }

    /// Keep every key under `toolcage:NAME:` (checked by the caller:
    /// [`super::check_prefix`]).
    pub fn with_prefix(mut self, name: &str) -> RedisStore {
        self.prefix = format!("toolcage:{name}:");
        self
    }

    /// Count in the caller's time, not the server's (tests of the windows).
    pub fn with_caller_clock(mut self) -> RedisStore {
        self.fixed_now = true;
        self
    }

    fn connect(&self) -> redis::RedisResult<redis::Connection> {
        let c = self.client.get_connection_with_timeout(TIMEOUT)?;
        c.set_read_timeout(Some(TIMEOUT))?;
        c.set_write_timeout(Some(TIMEOUT))?;
        Ok(c)
    }

    /// Run `op` on the connection, opening it first when there is none; a
    /// failure drops it (the next operation reconnects) and is counted.
    fn with_conn<T>(
        &self,
        op: impl FnOnce(&mut redis::Connection) -> redis::RedisResult<T>,
    ) -> Result<T, String> {
        let mut guard = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        let result = match guard.as_mut() {
            Some(c) => op(c),
            None => match self.connect() {
                Ok(c) => op(guard.insert(c)),
                Err(e) => Err(e),
            },
        };
        if result.is_ok() {
            super::note_outcome(&self.shown, None);
        }
        result.map_err(|e| {
            *guard = None;
            count_error();
            super::note_outcome(&self.shown, Some(&e.to_string()));
            format!(
                "store {} did not answer: {e}; calls that need it are refused until it does \
                 (fix: check that Redis runs and is reachable from here)",
                self.shown
            )
        })
    }

    fn doc_key(&self, name: &str) -> String {
        format!("{}doc:{name}", self.prefix)
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl RateCheck for RedisStore {
    fn check(&self, limits: &[(String, RateLimit)], now: Duration) -> Result<(), RateRefusal> {
        // No limit: nothing to count, no round trip (an unlimited tool runs
        // while the store is away).
        if limits.is_empty() {
            return Ok(());
        }
        let mut inv = self.rate.prepare_invoke();
        for (key, _) in limits {
            inv.key(format!("{}rate:{key}", self.prefix));
        }
        inv.arg(if self.fixed_now {
            millis(now).to_string()
        } else {
            String::new()
        });
        for (_, l) in limits {
            // A zero window would make PEXPIRE fail: 1 ms is as short.
            inv.arg(l.requests).arg(millis(l.window).max(1));
        }
        let (index, wait): (i64, i64) = self
            .with_conn(|c| inv.invoke(c))
            .map_err(|e| RateRefusal::Unavailable(StateError(e)))?;
        match usize::try_from(index) {
            Err(_) => Ok(()),
            Ok(index) if index < limits.len() => Err(RateRefusal::Limited(Limited {
                index,
                retry_after: Duration::from_millis(u64::try_from(wait).unwrap_or(0)),
            })),
            Ok(index) => Err(RateRefusal::Unavailable(StateError(format!(
                "store {}: the rate script answered limit {index} of {}",
                self.shown,
                limits.len()
            )))),
        }
    }
}

impl Store for RedisStore {
    fn doc_location(&self, name: &str) -> String {
        format!("key {} in {}", self.doc_key(name), self.shown)
    }

    fn doc_reset(&self, name: &str) -> String {
        format!("redis-cli -u {} DEL {}", self.shown, self.doc_key(name))
    }

    fn read_doc(&self, name: &str) -> Result<Option<String>, DocError> {
        let key = self.doc_key(name);
        self.with_conn(|c| redis::cmd("GET").arg(&key).query::<Option<String>>(c))
            .map_err(DocError::Store)
    }

    fn update_doc(&self, name: &str, update: &mut Update<'_>) -> Result<(), DocError> {
        let key = self.doc_key(name);
        for _ in 0..CAS_TRIES {
            let now = self.read_doc(name)?;
            let Some(new) = update(now.as_deref()).map_err(DocError::Content)? else {
                return Ok(());
            };
            let mut inv = self.cas.key(&key);
            inv.arg(if now.is_some() { "1" } else { "0" })
                .arg(now.as_deref().unwrap_or(""))
                .arg(&new);
            let written: i64 = self.with_conn(|c| inv.invoke(c)).map_err(DocError::Store)?;
            if written == 1 {
                return Ok(());
            }
        }
        count_error();
        Err(DocError::Store(format!(
            "{} changed {CAS_TRIES} times while it was being updated; try again",
            self.doc_location(name)
        )))
    }

    fn ping(&self) -> Result<(), String> {
        self.with_conn(|c| redis::cmd("PING").query::<String>(c))
            .map(|_| ())
    }
}

impl StoreSpec {
    /// Check the URL and the namespace now (a bad one is the operator's
    /// error at startup, not a refusal at each call); the password is read
    /// now too. `project`: whose keys they are when no prefix is named.
    pub(crate) fn open(&self, project: &Path) -> Result<RedisStore, String> {
        let prefix = match &self.prefix {
            Some(p) => {
                check_prefix(self.prefix_from, p)?;
                p.clone()
            }
            None => default_prefix(project),
        };
        let password = match &self.password {
            None => None,
            Some(PasswordFrom::File(p)) => Some(read_password_file(p)?),
            Some(PasswordFrom::Env(name)) => Some(std::env::var(name).map_err(|_| {
                format!(
                    "--store-password-env {name}: the variable is not set or not UTF-8 (fix: \
                     export {name}, or name the variable that holds the store's password)"
                )
            })?),
        };
        Ok(RedisStore::new(&self.url, password)?.with_prefix(&prefix))
    }
}

fn read_password_file(p: &Path) -> Result<String, String> {
    let text = std::fs::read_to_string(p).map_err(|e| {
        format!(
            "--store-password-file {}: {e} (fix: name a readable file that holds the store's \
             password)",
            p.display()
        )
    })?;
    // A trailing newline is the editor's, not the password's.
    let pw = text.strip_suffix('\n').unwrap_or(&text);
    let pw = pw.strip_suffix('\r').unwrap_or(pw);
    if pw.is_empty() {
        return Err(format!(
            "--store-password-file {}: the file is empty (fix: write the password into it)",
            p.display()
        ));
    }
    Ok(pw.to_string())
}
