//! An http tool's request from its templates: the URL with every value
//! percent-encoded (a value can add no `/`, `?`, `#`, `@` or `:` and so
//! cannot change the host, the path's shape or the query's keys), headers
//! with values that may hold no line break or other control character,
//! and for POST, PUT and PATCH the arguments as a JSON body.

use crate::discover::opencrabs::template;
use crate::policy::Host;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::{Map, Value};

/// Everything but RFC 3986's unreserved characters.
const VALUE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Where a request goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    pub(crate) url: url::Url,
    pub(crate) host: Host,
    pub(crate) port: u16,
    pub(crate) tls: bool,
}

impl Target {
    /// Check a URL (rendered, or a redirect's): http or https, a host, no
    /// user information.
    pub(crate) fn new(url: url::Url) -> Result<Target, String> {
        let tls = match url.scheme() {
            "http" => false,
            "https" => true,
            other => return Err(format!("{url}: scheme {other} (only http and https)")),
        };
        if !url.username().is_empty() || url.password().is_some() {
            return Err(format!("{url}: user information in a URL is not sent"));
        }
        let host = match url.host() {
            Some(url::Host::Domain(d)) => Host::parse(d)?,
            Some(url::Host::Ipv4(ip)) => Host::Ip(ip.into()),
            Some(url::Host::Ipv6(ip)) => Host::Ip(crate::policy::hostname::canonical(ip.into())),
            None => return Err(format!("{url}: no host")),
        };
        let port = url
            .port_or_known_default()
            .ok_or_else(|| format!("{url}: no port"))?;
        Ok(Target {
            url,
            host,
            port,
            tls,
        })
    }

    /// `host[:port]` for the Host header (the port only when not the default).
    pub(crate) fn authority(&self) -> String {
        let default = if self.tls { 443 } else { 80 };
        match self.url.port().filter(|p| *p != default) {
            Some(p) => format!("{}:{p}", self.host),
            None => self.host.to_string(),
        }
    }

    /// The request target: path and query.
    pub(crate) fn path(&self) -> String {
        match self.url.query() {
            Some(q) => format!("{}?{q}", self.url.path()),
            None => self.url.path().to_string(),
        }
    }
}

/// The URL template rendered with `args`, each value percent-encoded.
pub(crate) fn url(template: &str, args: &Map<String, Value>) -> Result<Target, String> {
    let t = template::parse(template).map_err(|e| format!("url template: {e}"))?;
    let encode = |v: &str| utf8_percent_encode(v, VALUE).to_string();
    let text = t.render_encoded(args, &encode);
    let url = url::Url::parse(&text).map_err(|e| format!("url {text}: {e}"))?;
    Target::new(url)
}

/// The header templates rendered with `args`; a value that would put a
/// control character (CR, LF, NUL, ...) into a header is an error.
pub(crate) fn headers(
    templates: &[(String, String)],
    args: &Map<String, Value>,
) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    for (name, value) in templates {
        let t = template::parse(value).map_err(|e| format!("header {name}: {e}"))?;
        let v = t.render_plain(args);
        if v.chars().any(|c| c.is_control() && c != '\t') {
            return Err(format!(
                "header {name}: a value would put a control character (a line break?) into it"
            ));
        }
        out.push((name.clone(), v));
    }
    Ok(out)
}

/// The body for methods that carry one: the arguments as JSON.
pub(crate) fn body(method: &str, args: &Map<String, Value>) -> Option<Vec<u8>> {
    matches!(method, "POST" | "PUT" | "PATCH")
        .then(|| serde_json::to_vec(args).unwrap_or_else(|_| b"{}".to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn values_cannot_change_where_the_request_goes() {
        let a = args(json!({"q": "x/../../admin?evil=1#frag", "id": "a@b:c", "n": 5}));
        let t = url("http://api.test:8080/items/{{id}}?q={{q}}&n={{n}}", &a).unwrap();
        assert_eq!(t.host, Host::Name("api.test".into()));
        assert_eq!(t.port, 8080);
        assert_eq!(
            t.path(),
            "/items/a%40b%3Ac?q=x%2F..%2F..%2Fadmin%3Fevil%3D1%23frag&n=5"
        );
        let t = url(
            "https://api.test/{{#id}}by-id/{{id}}{{/id}}",
            &args(json!({})),
        )
        .unwrap();
        assert_eq!((t.path(), t.port, t.tls), ("/".to_string(), 443, true));
    }

    #[test]
    fn headers_refuse_line_breaks() {
        let h = vec![("Authorization".to_string(), "Bearer {{key}}".to_string())];
        assert_eq!(
            headers(&h, &args(json!({"key": "abc"}))).unwrap(),
            vec![("Authorization".to_string(), "Bearer abc".to_string())]
        );
        for bad in ["abc\r\nX-Injected: 1", "abc\nHost: evil.test", "a\0b"] {
            assert!(
                headers(&h, &args(json!({ "key": bad }))).is_err(),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn targets_are_http_without_user_information() {
        assert!(Target::new("ftp://a.test/".parse().unwrap()).is_err());
        assert!(Target::new("http://u:p@a.test/".parse().unwrap()).is_err());
    }

    #[test]
    fn bodies_for_methods_that_carry_one() {
        let a = args(json!({"x": 1}));
        assert_eq!(body("POST", &a), Some(br#"{"x":1}"#.to_vec()));
        assert_eq!(body("GET", &a), None);
    }
}
