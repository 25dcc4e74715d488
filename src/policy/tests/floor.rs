//! The default denied and protected paths: wildcards.

use super::*;

fn sources_of(r: &Resolved, key: &str, value: &Path) -> Vec<String> {
    let value = value.display().to_string();
    r.provenance
        .iter()
        .filter(|p| p.key == key && p.value == value)
        .map(|p| p.source.clone())
        .collect()
}

#[test]
fn a_wildcard_in_the_last_component_is_expanded_against_what_exists() {
    let e = Env::new();
    for f in ["keys/a.pem", "keys/.b.pem", "keys/c.txt", "keys/pem"] {
        std::fs::create_dir_all(e.p("project/keys")).unwrap();
        std::fs::write(e.p("project").join(f), "x").unwrap();
    }
    let text = "[fs]\nadd_denied = [\"keys/*.pem\", \"none/*.pem\", \"keys/*.zzz\"]\n\
                add_protected = [\"{project}/keys/*.txt\"]\n";
    let r = e.resolve(None, Some(text), &Overrides::default()).unwrap();
    let from_file: Vec<&PathBuf> = r
        .grant
        .denied
        .iter()
        .filter(|p| p.starts_with(e.p("project")))
        .collect();
    assert_eq!(
        from_file,
        [&e.p("project/keys/.b.pem"), &e.p("project/keys/a.pem")],
        "matching names only (a leading dot included); no match gives nothing"
    );
    assert!(r.grant.protected.contains(&e.p("project/keys/c.txt")));
    assert!(!r.grant.protected.contains(&e.p("project/keys/*.txt")));
    let label = format!("policy {}", e.p("p.toml").display());
    assert_eq!(
        sources_of(&r, "denied", &e.p("project/keys/a.pem")),
        [label]
    );
    // A file created later is covered by the next resolution.
    std::fs::write(e.p("project/keys/d.pem"), "x").unwrap();
    let r = e.resolve(None, Some(text), &Overrides::default()).unwrap();
    assert!(r.grant.denied.contains(&e.p("project/keys/d.pem")));
}

#[test]
fn a_wildcard_elsewhere_is_an_error_with_the_line() {
    let e = Env::new();
    assert_eq!(
        e.err("[fs]\nadd_denied = [\n  \"{home}\",\n  \"{home}/*/.ssh\",\n]\n"),
        "policy $T/p.toml:4: fs.add_denied: \"{home}/*/.ssh\": a * wildcard may only appear \
         in the last path component (list each directory instead)"
    );
    assert_eq!(
        e.err("[fs]\nadd_read = [\"src/*.rs\"]\n"),
        "policy $T/p.toml:2: fs.add_read: $T/project/src/*.rs does not exist (create it or \
         remove it from fs.add_read) (a * wildcard is expanded only in protected and denied paths)"
    );
}
