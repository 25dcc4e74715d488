//! The one way out: decide on the name, then resolve it (a pin, or the
//! system resolver), keep only the addresses the policy lets this name
//! reach, and connect to one of those. Every entry path (CONNECT, plain
//! HTTP, transparent capture) calls [`open`]; the DNS stub only decides.

use super::shared::{Resolver, Shared};
use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;
use toolcage_policy::hostname::target;
use toolcage_policy::{DomainPolicy, DomainRefusal, Host, RefusalKind};

/// How long a connection to a server may take to establish.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// getaddrinfo, in toolcage's own network namespace.
pub(super) fn system_resolver(name: &str, port: u16) -> std::io::Result<Vec<IpAddr>> {
    Ok((name, port).to_socket_addrs()?.map(|a| a.ip()).collect())
}

/// Why no connection was made.
#[derive(Debug)]
pub enum OpenError {
    /// The policy refused it (recorded as a denial).
    Refused(DomainRefusal),
    /// Allowed, but the server could not be reached.
    Failed(String),
}

/// A name's synthetic address stands for the name.
pub(super) fn unsynthesize(shared: &Shared, host: Host) -> Host {
    if let Host::Ip(IpAddr::V4(a)) = host
        && let Some(name) = shared.synth.lock().unwrap().name(a)
    {
        return Host::Name(name.to_string());
    }
    host
}

/// Decide, resolve, check, connect. `op` names the entry path for the
/// denial record.
pub(super) fn open(
    shared: &Shared,
    host: Host,
    port: u16,
    op: &'static str,
) -> Result<TcpStream, OpenError> {
    let host = unsynthesize(shared, host);
    let r = connect_with(&shared.policy, shared.resolve, &host, port);
    if let Err(OpenError::Refused(r)) = &r {
        shared.deny("proxy", op, target(&host, Some(port)), r);
    }
    r
}

/// The one way out, for everything toolcage itself connects to under a
/// domain policy (the proxy, the http executor): decide on `host`, then
/// resolve it, keep the addresses the policy lets it reach, connect.
pub fn connect(policy: &DomainPolicy, host: &Host, port: u16) -> Result<TcpStream, OpenError> {
    connect_with(policy, system_resolver, host, port)
}

fn connect_with(
    policy: &DomainPolicy,
    resolve: Resolver,
    host: &Host,
    port: u16,
) -> Result<TcpStream, OpenError> {
    policy
        .decide(host, Some(port))
        .map_err(OpenError::Refused)?;
    let addrs = match (host, policy.pinned(host)) {
        (Host::Ip(ip), _) => vec![*ip],
        (_, Some(pin)) => vec![pin],
        (Host::Name(n), None) => match resolve(n, port) {
            Ok(a) if !a.is_empty() => a,
            _ => {
                return Err(OpenError::Refused(DomainRefusal {
                    kind: RefusalKind::Unresolvable,
                    rule: None,
                    reason: "the name does not resolve".into(),
                }));
            }
        },
    };
    let mut last = None;
    let mut usable = Vec::new();
    for a in addrs {
        match policy.check_address(host, a, port) {
            Ok(()) => usable.push(a),
            Err(r) => last = Some(r),
        }
    }
    if usable.is_empty() {
        return Err(OpenError::Refused(
            last.expect("at least one address was checked"),
        ));
    }
    let mut error = String::new();
    for a in usable {
        match TcpStream::connect_timeout(&SocketAddr::new(a, port), CONNECT_TIMEOUT) {
            Ok(s) => return Ok(s),
            Err(e) => error = format!("{a}: {e}"),
        }
    }
    Err(OpenError::Failed(error))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    static LOOKUPS: AtomicUsize = AtomicUsize::new(0);

    fn counting(_: &str, _: u16) -> std::io::Result<Vec<IpAddr>> {
        LOOKUPS.fetch_add(1, Ordering::SeqCst);
        Ok(vec!["127.0.0.1".parse().unwrap()])
    }

    #[test]
    fn denied_names_are_never_resolved_and_private_answers_are_refused() {
        let policy = DomainPolicy::new(&["rebind.test"], &[], &[]).unwrap();
        let shared = Shared::new(policy, counting);
        let r = open(&shared, Host::Name("denied.test".into()), 80, "http");
        assert!(matches!(r, Err(OpenError::Refused(ref x)) if x.kind == RefusalKind::NotAllowed));
        assert_eq!(
            LOOKUPS.load(Ordering::SeqCst),
            0,
            "resolved before deciding"
        );
        let r = open(&shared, Host::Name("rebind.test".into()), 80, "http");
        assert!(
            matches!(r, Err(OpenError::Refused(ref x)) if x.kind == RefusalKind::PrivateAddress)
        );
        assert_eq!(LOOKUPS.load(Ordering::SeqCst), 1);
        let log = shared.denials.lock().unwrap();
        assert_eq!(log.kept.len(), 2);
        assert_eq!(
            log.kept[0].line(),
            "blocked: denied.test:80 (not in the allow list)"
        );
    }
}
