//! TLS for http tools: rustls (ring), verified against the system's root
//! certificates, loaded once.

use crate::policy::Host;
use rustls::pki_types::{IpAddr as PkiIp, ServerName};
use std::net::TcpStream;
use std::sync::{Arc, OnceLock};

fn config() -> Result<Arc<rustls::ClientConfig>, String> {
    static CONFIG: OnceLock<Result<Arc<rustls::ClientConfig>, String>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let mut roots = rustls::RootCertStore::empty();
            let found = rustls_native_certs::load_native_certs();
            for cert in found.certs {
                let _ = roots.add(cert);
            }
            if roots.is_empty() {
                return Err("no system root certificates found (install ca-certificates)".into());
            }
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let config = rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .map_err(|e| e.to_string())?
                .with_root_certificates(roots)
                .with_no_client_auth();
            Ok(Arc::new(config))
        })
        .clone()
}

/// A TLS session to `host` over `tcp` (the handshake happens on first use).
pub(crate) fn connect(
    host: &Host,
    tcp: TcpStream,
) -> Result<rustls::StreamOwned<rustls::ClientConnection, TcpStream>, String> {
    let name = match host {
        Host::Name(n) => ServerName::try_from(n.clone()).map_err(|e| e.to_string())?,
        Host::Ip(ip) => ServerName::IpAddress(PkiIp::from(*ip)),
    };
    let conn = rustls::ClientConnection::new(config()?, name).map_err(|e| e.to_string())?;
    Ok(rustls::StreamOwned::new(conn, tcp))
}
