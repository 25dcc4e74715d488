mod common;
use common::*;

#[test]
fn echo_runs() {
    let p = Project::new("smoke");
    let g = default_grant(&p.dir);
    let o = sh(&g, "echo hello; echo err >&2; pwd; exit 3");
    println!("{o:#?}");
    assert_eq!(o.stdout.text, format!("hello\n{}\n", p.dir.display()));
}
