//! `[upstreams.NAME]`: a server's grant starts from `untrusted` (or its
//! section's `profile`), never from the operator's general policy, and its
//! own requests cannot widen it.

use super::*;

fn upstream(
    env: &Env,
    text: Option<&str>,
    name: &str,
    req: &Requests,
) -> Result<Resolved, PolicyError> {
    let stack = env.load(None, text)?;
    let tool = ToolInput {
        name,
        requests: req,
        extra_read: Vec::new(),
    };
    stack
        .upstream_stack(name)?
        .resolve(&env.ctx, &Overrides::default(), Some(&tool))
}

#[test]
fn a_server_starts_from_untrusted_and_its_section_widens_it() {
    let env = Env::new();
    std::fs::create_dir_all(env.p("project/data")).unwrap();
    let project = env.p("project");
    // The operator's general policy gives the network: not to servers.
    let text = "[network]\nmode = \"on\"\n[upstreams.mem.fs]\nadd_write = [\"{project}/data\"]\n";
    let r = upstream(&env, Some(text), "other", &Requests::default()).unwrap();
    assert!(!r.grant.write.contains(&project), "{:?}", r.grant.write);
    assert_eq!(r.grant.network, Network::Off);
    let r = upstream(&env, Some(text), "mem", &Requests::default()).unwrap();
    assert!(
        r.grant.write.contains(&env.p("project/data")),
        "{:?}",
        r.grant.write
    );
    assert!(!r.grant.write.contains(&project));
    // Control: a tool under the same file gets the general policy.
    let t = env.tool(Some(text), "t", &Requests::default());
    assert_eq!(t.grant.network, Network::On);
}

#[test]
fn a_servers_request_for_network_is_not_a_grant() {
    let env = Env::new();
    let req = Requests {
        network: Some(true),
        ..Requests::default()
    };
    let r = upstream(&env, None, "web", &req).unwrap();
    assert_eq!(r.grant.network, Network::Off);
    // The operator's section decides.
    let r = upstream(
        &env,
        Some("[upstreams.web]\nprofile = \"network\"\n"),
        "web",
        &req,
    )
    .unwrap();
    assert_ne!(r.grant.network, Network::Off);
}

#[test]
fn settings_and_errors_name_the_section() {
    let env = Env::new();
    let stack = env
        .load(
            None,
            Some("[upstreams.s]\nexpose = \"deferred\"\nidle_timeout = \"0s\"\n"),
        )
        .unwrap();
    let s = stack.upstream_settings("s");
    assert_eq!(s.expose, Expose::Deferred);
    assert_eq!(s.idle_timeout, None);
    assert_eq!(stack.upstream_settings("other").expose, Expose::Flat);
    let e = env.err("[upstreams.s.fs]\nadd_write = [\"{project}/missing\"]\n");
    assert!(e.contains("p.toml:2: upstreams.s.fs.add_write"), "{e}");
    let e = env.err("[upstreams.s]\nexpose = \"sideways\"\n");
    assert!(e.contains("flat, deferred"), "{e}");
    // resources: allow unless the operator says otherwise; a bad value
    // names the file, the line and the values it takes.
    assert_eq!(stack.upstream_settings("other").resources, Resources::Allow);
    let e = env.err("[upstreams.s]\nenabled = true\nresources = \"maybe\"\n");
    assert!(e.contains("p.toml:3"), "{e}");
    assert!(e.contains("allow, approve, deny"), "{e}");
    assert!(stack.upstream_settings("other").prefix);
    let e = env.err("[upstreams.s]\nprefix = \"no\"\n");
    assert!(e.contains("p.toml:2"), "{e}");
}
