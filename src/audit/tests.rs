use super::GrantSummary;
use super::log::AuditLog;
use super::read::{parse, read};
use super::record::{AuditRecord, RecordedDecision};
use std::io::Write;

fn rec(tool: &str) -> AuditRecord {
    AuditRecord {
        time: "2026-01-01T00:00:00.000Z".into(),
        phase: None,
        call_id: None,
        session: "s".into(),
        tool: tool.into(),
        format: "octomind".into(),
        source: "/p/.agents/tools/t".into(),
        upstream: None,
        definition_sha256: None,
        args_sha256: "0".repeat(64),
        args: Some(serde_json::json!({"a": "line\nbreak"})),
        args_cut: None,
        decision: RecordedDecision::Allowed,
        approval_mode: Some("never".into()),
        grant: Some(GrantSummary {
            read: vec!["/usr".into()],
            write: vec![],
            network: "off".into(),
            timeout_secs: 30.0,
        }),
        enforcement: None,
        exit: None,
        exit_status: Some(0),
        is_error: Some(false),
        error: None,
        stopped_by: None,
        duration_ms: Some(1),
        stdout: None,
        stderr: None,
        denials: None,
        change: None,
        content: None,
    }
}

#[test]
fn records_round_trip_one_per_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sub/audit.jsonl");
    let log = AuditLog::open(&path).unwrap();
    log.append(&rec("a")).unwrap();
    log.append(&rec("b")).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text.lines().count(), 2, "{text}");
    let p = read(&path).unwrap().unwrap();
    assert!(p.bad.is_empty());
    let tools: Vec<&str> = p.records.iter().map(|(_, r)| r.tool.as_str()).collect();
    assert_eq!(tools, ["a", "b"]);
    assert_eq!(p.records[0].1, rec("a"));
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    assert!(read(&dir.path().join("none")).unwrap().is_none());
}

#[test]
fn a_torn_last_line_is_reported_and_the_next_record_starts_clean() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let log = AuditLog::open(&path).unwrap();
    log.append(&rec("a")).unwrap();
    log.append(&rec("b")).unwrap();
    // A crash mid-write: half of a third line, no newline.
    let line = rec("c").to_line().unwrap();
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    f.write_all(&line.as_bytes()[..line.len() / 2]).unwrap();
    drop(f);
    let p = read(&path).unwrap().unwrap();
    assert_eq!(p.records.len(), 2, "every earlier line parses");
    assert_eq!(p.bad.len(), 1);
    assert_eq!(p.bad[0].line, 3);
    assert!(p.bad[0].torn);
    // The next record does not glue onto the torn line.
    log.append(&rec("d")).unwrap();
    let p = read(&path).unwrap().unwrap();
    let tools: Vec<&str> = p.records.iter().map(|(_, r)| r.tool.as_str()).collect();
    assert_eq!(tools, ["a", "b", "d"]);
    assert_eq!(p.bad.len(), 1);
    assert!(!p.bad[0].torn, "now a middle line");
    // Control: the same bytes glued without the fix-up newline lose "d".
    let glued = format!("{}{}", &line[..line.len() / 2], rec("d").to_line().unwrap());
    assert!(parse(glued.as_bytes()).records.is_empty());
}

#[test]
fn parse_handles_blank_lines_and_a_complete_line_without_newline() {
    let one = rec("a").to_line().unwrap();
    let text = format!("{one}\n{}", one.trim_end());
    let p = parse(text.as_bytes());
    assert_eq!(p.records.len(), 2);
    assert!(p.bad.is_empty());
    assert_eq!(p.records[1].0, 3);
    assert!(parse(b"").records.is_empty());
}

#[test]
fn long_names_arguments_and_messages_are_stored_as_prefix_and_hash() {
    use super::record::{MAX_ARGS_TEXT, MAX_TOOL_NAME};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let log = AuditLog::open(&path).unwrap();
    let name = "n".repeat(2 << 20);
    let mut r = rec(&name);
    r.args = Some(serde_json::json!({"big": "v".repeat(1 << 20)}));
    r.decision = RecordedDecision::Denied {
        reason: "unknown_tool".into(),
        message: format!("unknown tool '{name}'"),
    };
    log.append(&r).unwrap();
    // Control: fields at the limits are stored whole.
    let mut small = rec(&"m".repeat(MAX_TOOL_NAME));
    let at_limit = "a".repeat(MAX_ARGS_TEXT - r#"{"k":""}"#.len());
    small.args = Some(serde_json::json!({ "k": at_limit }));
    log.append(&small).unwrap();
    let size = std::fs::metadata(&path).unwrap().len();
    assert!(size < 16 * 1024, "log grew by {size} bytes");
    let p = read(&path).unwrap().unwrap();
    let (big, kept) = (&p.records[0].1, &p.records[1].1);
    assert!(big.tool.starts_with(&"n".repeat(64)), "{}", &big.tool[..80]);
    use sha2::{Digest, Sha256};
    let hash: String = Sha256::digest(name.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(
        big.tool,
        format!("{}… [{} bytes, sha256 {hash}]", "n".repeat(64), 2 << 20)
    );
    assert_eq!(big.args, None);
    let cut = big.args_cut.as_ref().unwrap();
    assert_eq!(cut.bytes, (1 << 20) + r#"{"big":""}"#.len() as u64);
    assert!(cut.prefix.starts_with(r#"{"big":"vvv"#), "{}", cut.prefix);
    match &big.decision {
        RecordedDecision::Denied { message, .. } => assert!(message.len() < 300, "{message}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(kept.tool, "m".repeat(MAX_TOOL_NAME));
    assert_eq!(kept.args, small.args);
    assert_eq!(kept.args_cut, None);
}

/// The line a record becomes is the capped record's, whether it was
/// encoded once (nothing to cap) or capped first: at the arguments' limit,
/// just past it, with long arguments, and with a long tool name.
#[test]
fn to_line_is_the_capped_record_on_every_path() {
    use super::record::MAX_ARGS_TEXT;
    let capped_line = |r: &AuditRecord| {
        let mut s = serde_json::to_string(&r.clone().capped()).unwrap();
        s.push('\n');
        s
    };
    let base = rec("t").to_line().unwrap().len();
    for extra in [
        0,
        MAX_ARGS_TEXT - base - 20,
        MAX_ARGS_TEXT - base + 50,
        2 * MAX_ARGS_TEXT,
    ] {
        let mut r = rec("t");
        r.args = Some(serde_json::json!({"a": "x".repeat(extra)}));
        assert_eq!(
            r.to_line().unwrap(),
            capped_line(&r),
            "args of {extra} bytes"
        );
    }
    let mut long = rec(&"n".repeat(300));
    assert_eq!(long.to_line().unwrap(), capped_line(&long));
    long.args = Some(serde_json::json!({"a": "x".repeat(2 * MAX_ARGS_TEXT)}));
    let line = long.to_line().unwrap();
    assert_eq!(line, capped_line(&long));
    assert!(
        line.contains("args_cut") && !line.contains("\"args\":"),
        "{line}"
    );
}
