//! OpenCrabs http tools at load time: the url's host part must be fixed
//! (it is what the tool asks to reach, and a value must never choose the
//! host), and header names must be plain HTTP tokens (no `{{param}}`).

/// A header name is an HTTP token (checked when the tool is loaded).
pub(crate) fn valid_header_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// The host part of a URL template (`scheme://HOST[:PORT]`), as a host
/// pattern with its port (the scheme's default when none is written):
/// what the tool asks to reach. `Err` when the host part holds a
/// `{{param}}`, user information, or is not a host.
pub(crate) fn host_pattern(template: &str) -> Result<String, String> {
    let (scheme, rest) = template
        .split_once("://")
        .ok_or("the url must start with http:// or https://")?;
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    if authority.contains("{{") {
        return Err("a {{param}} in the url's host; put parameters in the path or query".into());
    }
    if authority.contains('@') {
        return Err("user information in the url".into());
    }
    let (host, port) = crate::policy::hostname::parse_authority(authority)?;
    let port = port.unwrap_or(if scheme.eq_ignore_ascii_case("https") {
        443
    } else {
        80
    });
    Ok(crate::policy::hostname::target(&host, Some(port)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_part_is_fixed() {
        assert_eq!(
            host_pattern("https://api.test/x/{{id}}").unwrap(),
            "api.test:443"
        );
        assert_eq!(
            host_pattern("http://API.test:8080?q={{q}}").unwrap(),
            "api.test:8080"
        );
        assert_eq!(host_pattern("http://[::1]:9/").unwrap(), "[::1]:9");
        for bad in [
            "https://{{host}}/x",
            "https://api.{{tld}}/",
            "http://u@api.test/",
            "api.test/x",
        ] {
            assert!(host_pattern(bad).is_err(), "{bad}");
        }
    }
}
