//! `toolcage policy` shows the safety floor with its origins: a `--policy`
//! file inside a write root is protected, toolcage's state and the `/etc`
//! secrets are denied.

use crate::common;

use common::Project;
use std::path::Path;
use std::process::{Command, Output};

fn policy(project: &Project, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_toolcage"))
        .arg("-C")
        .arg(&project.dir)
        .arg("policy")
        .args(args)
        .current_dir(&project.dir)
        .env("XDG_STATE_HOME", project.state_dir())
        .output()
        .unwrap()
}

/// The line of `out` for `key` and `value`, if any.
fn line<'a>(out: &'a str, key: &str, value: &Path) -> Option<&'a str> {
    let value = value.display().to_string();
    out.lines().find(|l| {
        let mut words = l.split_whitespace();
        words.next() == Some(key) && words.next() == Some(value.as_str())
    })
}

#[test]
fn a_policy_file_inside_the_project_is_shown_protected_with_its_origin() {
    let p = Project::new("policy-floor");
    let file = p.write("build.toml", "[limits]\ntimeout = \"1m\"\n");
    let o = policy(&p, &["--policy", "build.toml"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let l = line(&out, "protected", &file).unwrap_or_else(|| panic!("{out}"));
    assert!(l.ends_with("(--policy file inside a write root)"), "{l}");

    let state = p.state_dir().join("toolcage");
    let l = line(&out, "denied", &state).unwrap_or_else(|| panic!("{out}"));
    assert!(
        l.ends_with("(toolcage state (audit log, rate limits))"),
        "{l}"
    );
    if Path::new("/etc/shadow").exists() {
        let l = line(&out, "denied", Path::new("/etc/shadow")).unwrap();
        assert!(l.ends_with("(built-in secret (always denied))"), "{l}");
    }

    // Control: the same file outside every write root is not added.
    let outside = p.state_dir().with_extension("policy.toml");
    std::fs::write(&outside, "[limits]\ntimeout = \"1m\"\n").unwrap();
    let o = policy(&p, &["--policy", outside.to_str().unwrap()]);
    let _ = std::fs::remove_file(&outside);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(line(&out, "protected", &outside).is_none(), "{out}");
    assert!(!out.contains("--policy file inside a write root"), "{out}");

    // The JSON grant holds it too.
    let o = policy(&p, &["--json", "--policy", "build.toml"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let protected = v["grant"]["protected"].as_array().unwrap();
    assert!(protected.iter().any(|x| x == file.to_str().unwrap()));
}

#[test]
fn domain_patterns_and_pins_are_shown_with_their_origin() {
    let p = Project::new("policy-domains");
    let outside = p.state_dir().with_extension("domains.toml");
    std::fs::write(
        &outside,
        "[network]\nmode = \"domains\"\nallow = [\"API.github.com.\", \"*.pypi.org\"]\ndeny = [\"evil.pypi.org\"]\n[network.hosts]\n\"allowed.test\" = \"127.0.0.1\"\n",
    )
    .unwrap();
    let o = policy(&p, &["--policy", outside.to_str().unwrap()]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let source = format!("(policy {})", outside.display());
    for (key, value) in [
        ("network", "domains"),
        ("network.allow", "api.github.com"),
        ("network.allow", "*.pypi.org"),
        ("network.deny", "evil.pypi.org"),
        ("network.hosts", "allowed.test = 127.0.0.1"),
    ] {
        let found = out.lines().any(|l| {
            let l = l.trim_start();
            l.starts_with(key)
                && l[key.len()..].trim_start().starts_with(value)
                && l.ends_with(&source)
        });
        assert!(found, "{key} {value} {source}\n{out}");
    }
    // A bad pattern: one line naming the file, line and key (exit 125).
    std::fs::write(
        &outside,
        "[network]\nmode = \"domains\"\nallow = [\"a*.test\"]\n",
    )
    .unwrap();
    let o = policy(&p, &["--policy", outside.to_str().unwrap()]);
    let _ = std::fs::remove_file(&outside);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(125), "{err}");
    assert_eq!(
        err.trim_end(),
        format!(
            "toolcage: policy {}:3: network.allow: \"a*.test\": '*' only as the whole first label (*.example.com) or alone",
            outside.display()
        )
    );
}

#[test]
fn session_wide_settings_are_shown_too() {
    let p = Project::new("policy-session");
    let file = p.write(
        "grl.toml",
        "[global_rate_limit]\nrequests = 2\nwindow = \"1h\"\n",
    );
    let o = policy(&p, &["--policy", file.to_str().unwrap()]);
    let out = String::from_utf8_lossy(&o.stdout);
    let grl = out
        .lines()
        .find(|l| l.trim_start().starts_with("global_rate_limit"));
    assert!(
        grl.is_some_and(|l| l.contains("2 per 1h") && l.contains("[global_rate_limit]")),
        "{out}"
    );
    assert!(out.contains("audit.path"), "{out}");
    let o = policy(&p, &["--json", "--policy", file.to_str().unwrap()]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["session"]["global_rate_limit"]["requests"], 2, "{v}");
    // Control: without the file, no global limit.
    let o = policy(&p, &[]);
    let out = String::from_utf8_lossy(&o.stdout);
    let grl = out
        .lines()
        .find(|l| l.trim_start().starts_with("global_rate_limit"));
    assert!(grl.is_some_and(|l| l.contains("none")), "{out}");
}

/// The line of `out` whose first word is `key`.
fn keyed<'a>(out: &'a str, key: &str) -> Option<&'a str> {
    out.lines()
        .find(|l| l.split_whitespace().next() == Some(key))
}

#[test]
fn the_tmp_bound_is_shown_with_its_origin_and_a_bad_one_is_refused() {
    let p = Project::new("policy-tmp");
    // The default: 2GiB from the default profile, in text and JSON.
    let o = policy(&p, &[]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let l = keyed(&out, "tmp").unwrap_or_else(|| panic!("no tmp line:\n{out}"));
    assert!(l.contains("2GiB") && l.contains("profile default"), "{l}");
    let o = policy(&p, &["--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["grant"]["limits"]["tmp"], 2u64 << 30, "{v}");
    // A profile's own, and a policy file's, with their origins.
    let o = policy(&p, &["--profile", "untrusted"]);
    let out = String::from_utf8_lossy(&o.stdout);
    let l = keyed(&out, "tmp").unwrap_or_else(|| panic!("{out}"));
    assert!(l.contains("512MiB") && l.contains("untrusted"), "{l}");
    let file = p.write("small.toml", "[limits]\ntmp = \"64MiB\"\n");
    let o = policy(&p, &["--policy", file.to_str().unwrap()]);
    let out = String::from_utf8_lossy(&o.stdout);
    let l = keyed(&out, "tmp").unwrap_or_else(|| panic!("{out}"));
    assert!(l.contains("64MiB") && l.contains("small.toml"), "{l}");
    // Below the floor, or not a size: refused, naming the key and the fix.
    for (value, says) in [
        ("\"100KiB\"", "at least 1MiB"),
        ("\"plenty\"", "invalid size"),
    ] {
        let bad = p.write("bad.toml", &format!("[limits]\ntmp = {value}\n"));
        let o = policy(&p, &["--policy", bad.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{value} accepted");
        assert!(err.contains("limits.tmp") && err.contains(says), "{err}");
    }
}

#[test]
fn a_root_through_a_symlink_shows_both_paths_and_a_planted_one_is_refused() {
    let p = Project::new("policy-links");
    // The operator's own link, outside every write root.
    let data = p.state_dir().with_extension("data");
    std::fs::create_dir_all(&data).unwrap();
    let link = p.state_dir().with_extension("link");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&data, &link).unwrap();
    p.write(
        "tc.toml",
        &format!("[fs]\nadd_read = [{:?}]\n", link.display().to_string()),
    );
    let o = policy(&p, &["--policy", "tc.toml"]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let l = line(&out, "read", &data).map(str::to_string);
    let j = policy(&p, &["--json", "--policy", "tc.toml"]);
    let v: serde_json::Value = serde_json::from_slice(&j.stdout).unwrap_or_default();
    // The same root through a link inside the project: refused, with the
    // link, its target and the fix.
    std::fs::create_dir(p.path("real")).unwrap();
    std::os::unix::fs::symlink(p.path("real"), p.path("docs")).unwrap();
    p.write("in.toml", "[fs]\nadd_read = [\"{project}/docs\"]\n");
    let refused = policy(&p, &["--policy", "in.toml"]);
    let _ = std::fs::remove_dir_all(&data);
    let _ = std::fs::remove_file(&link);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let l = l.unwrap_or_else(|| panic!("{out}"));
    assert!(
        l.ends_with(&format!(
            "(policy {}; written {})",
            p.path("tc.toml").display(),
            link.display()
        )),
        "{l}"
    );
    let shown = v["provenance"]
        .as_array()
        .and_then(|a| {
            a.iter()
                .find(|e| e["key"] == "read" && e["value"] == data.to_str().unwrap())
        })
        .unwrap_or_else(|| panic!("{v}"));
    assert_eq!(shown["written"], link.to_str().unwrap(), "{shown}");
    // Roots as written are not repeated.
    assert!(v["provenance"][0].get("written").is_none(), "{v}");
    assert_eq!(refused.status.code(), Some(125));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        err.contains(&format!(
            "resolves through the symlink {} -> {}, which lies inside the write root {}",
            p.path("docs").display(),
            p.path("real").display(),
            p.dir.display()
        )) && err.contains(&format!(
            "name the directory itself ({})",
            p.path("real").display()
        )),
        "{err}"
    );
}
