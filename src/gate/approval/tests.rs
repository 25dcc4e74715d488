//! Approval modes, memory and answers.

use super::*;
use serde_json::json;

#[test]
fn canonical_json_sorts_keys_at_every_level() {
    let a = json!({"b": 1, "a": {"y": [1, {"d": 2, "c": "x"}], "x": null}});
    assert_eq!(
        canonical_json(&a),
        r#"{"a":{"x":null,"y":[1,{"c":"x","d":2}]},"b":1}"#
    );
    let b = json!({"a": {"x": null, "y": [1, {"c": "x", "d": 2}]}, "b": 1});
    assert_eq!(args_digest(&a), args_digest(&b));
    assert_ne!(args_digest(&a), args_digest(&json!({"b": 2})));
    assert_eq!(args_digest(&a).len(), 64);
    // Known value: sha256("{}").
    assert_eq!(
        args_digest(&json!({})),
        "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
    );
    // Escapes are JSON's own.
    assert_eq!(canonical_json(&json!({"k\"": "a\nb"})), r#"{"k\"":"a\nb"}"#);
}

/// The one-encoding path gives the bytes the key-sorting writer gives:
/// escapes, non-ASCII keys, numbers of every kind, nesting.
#[test]
fn canonical_json_fast_path_matches_the_sorting_writer() {
    let v = json!({
        "zeta": [1, -2, 3.5, 1e300, u64::MAX, i64::MIN, true, null],
        "Äpfel": {"\u{1}ctl": "tab\there", "é": "\u{2028}", "": ""},
        "a\"q": [{"y": {"b": [], "a": {}}, "x": "\\"}],
        "10": "ten", "9": "nine", "A": "upper", "_": "under"
    });
    assert!(keys_sorted(&v));
    let mut slow = String::new();
    write_canonical(&v, &mut slow);
    assert_eq!(canonical_json(&v), slow);
}

const T: Bound<'static> = Bound {
    name: "t",
    definition: "def1",
};

#[test]
fn memory_keys_by_mode() {
    assert_eq!(Memory::key(ApprovalMode::Never, "s", &T, "d"), None);
    assert_eq!(Memory::key(ApprovalMode::Always, "s", &T, "d"), None);
    let key = |args: Option<&str>| MemKey {
        session: "s".into(),
        tool: "t".into(),
        definition: "def1".into(),
        args: args.map(str::to_string),
    };
    assert_eq!(
        Memory::key(ApprovalMode::Once, "s", &T, "d"),
        Some(key(None))
    );
    assert_eq!(
        Memory::key(ApprovalMode::OncePerArgs, "s", &T, "d"),
        Some(key(Some("d")))
    );
}

#[test]
fn a_changed_definition_is_asked_again() {
    let mem = Memory::default();
    let ch = Scripted::new(vec![yes(), yes()]);
    for m in [ApprovalMode::Once, ApprovalMode::OncePerArgs] {
        let Need::Ask { key } = need(m, &mem, "s", &T, "a") else {
            panic!("asks first")
        };
        settle(|| ch.ask(), false, true, &mem, key).unwrap();
        // Control: the same definition is remembered.
        assert!(matches!(
            need(m, &mem, "s", &T, "a"),
            Need::Remembered { .. }
        ));
        let edited = Bound {
            name: "t",
            definition: "def2",
        };
        assert!(matches!(
            need(m, &mem, "s", &edited, "a"),
            Need::Ask { key: Some(_) }
        ));
    }
    assert_eq!(ch.asked(), 2);
}

/// A channel that answers from a script and counts the questions.
struct Scripted {
    answers: Mutex<Vec<ApprovalAnswer>>,
    asked: Mutex<u32>,
}

impl Scripted {
    fn new(answers: Vec<ApprovalAnswer>) -> Scripted {
        Scripted {
            answers: Mutex::new(answers),
            asked: Mutex::new(0),
        }
    }
    fn ask(&self) -> ApprovalAnswer {
        *self.asked.lock().unwrap() += 1;
        self.answers.lock().unwrap().remove(0)
    }
    fn asked(&self) -> u32 {
        *self.asked.lock().unwrap()
    }
}

fn yes() -> ApprovalAnswer {
    ApprovalAnswer::Approved {
        by: "terminal".into(),
    }
}

/// One call through need + settle; `Ok(None)` when nobody was asked.
fn call(
    mode: ApprovalMode,
    mem: &Memory,
    ch: &Scripted,
    session: &str,
    digest: &str,
) -> Result<Option<String>, Refusal> {
    match need(mode, mem, session, &T, digest) {
        Need::Nothing => Ok(None),
        Need::Remembered { by } => Ok(Some(format!("remembered {by}"))),
        Need::Ask { key } => settle(|| ch.ask(), false, true, mem, key).map(Some),
    }
}

#[test]
fn never_asks_nobody() {
    let (mem, ch) = (Memory::default(), Scripted::new(vec![]));
    for _ in 0..3 {
        assert_eq!(call(ApprovalMode::Never, &mem, &ch, "s", "d"), Ok(None));
    }
    assert_eq!(ch.asked(), 0);
}

#[test]
fn always_asks_every_time_and_remembers_nothing() {
    let mem = Memory::default();
    let ch = Scripted::new(vec![yes(), yes(), ApprovalAnswer::Declined]);
    let m = ApprovalMode::Always;
    assert_eq!(call(m, &mem, &ch, "s", "d"), Ok(Some("terminal".into())));
    assert_eq!(call(m, &mem, &ch, "s", "d"), Ok(Some("terminal".into())));
    assert_eq!(call(m, &mem, &ch, "s", "d"), Err(Refusal::Declined));
    assert_eq!(ch.asked(), 3);
}

#[test]
fn once_asks_once_per_session_and_tool() {
    let mem = Memory::default();
    let ch = Scripted::new(vec![ApprovalAnswer::Declined, yes(), yes()]);
    let m = ApprovalMode::Once;
    // A no is not remembered: the next call asks again.
    assert_eq!(call(m, &mem, &ch, "s1", "a"), Err(Refusal::Declined));
    assert_eq!(call(m, &mem, &ch, "s1", "a"), Ok(Some("terminal".into())));
    // Other arguments, same session: covered.
    assert_eq!(
        call(m, &mem, &ch, "s1", "b"),
        Ok(Some("remembered terminal".into()))
    );
    assert_eq!(ch.asked(), 2);
    // Another session asks again.
    assert_eq!(call(m, &mem, &ch, "s2", "a"), Ok(Some("terminal".into())));
    assert_eq!(ch.asked(), 3);
    // Another tool in s1 is not covered.
    let other = Bound {
        name: "other",
        definition: "def1",
    };
    assert!(matches!(
        need(m, &mem, "s1", &other, "a"),
        Need::Ask { key: Some(_) }
    ));
}

#[test]
fn once_per_args_asks_per_distinct_arguments() {
    let mem = Memory::default();
    let ch = Scripted::new(vec![yes(), yes()]);
    let m = ApprovalMode::OncePerArgs;
    let a = args_digest(&json!({"x": 1, "y": 2}));
    let a2 = args_digest(&json!({"y": 2, "x": 1}));
    let b = args_digest(&json!({"x": 2}));
    assert_eq!(call(m, &mem, &ch, "s", &a), Ok(Some("terminal".into())));
    assert_eq!(
        call(m, &mem, &ch, "s", &a2),
        Ok(Some("remembered terminal".into()))
    );
    assert_eq!(ch.asked(), 1);
    assert_eq!(call(m, &mem, &ch, "s", &b), Ok(Some("terminal".into())));
    assert_eq!(ch.asked(), 2);
}

#[test]
fn anything_but_yes_refuses_and_pre_approval_needs_allow_yes() {
    let mem = Memory::default();
    for (answer, want) in [
        (ApprovalAnswer::Declined, Refusal::Declined),
        (ApprovalAnswer::Cancelled, Refusal::Cancelled),
        (ApprovalAnswer::TimedOut, Refusal::TimedOut),
        (ApprovalAnswer::NoChannel, Refusal::NoChannel),
        (ApprovalAnswer::Interrupted, Refusal::Interrupted),
    ] {
        assert_eq!(settle(|| answer, false, true, &mem, None), Err(want));
    }
    // --yes without allow_yes: refused without asking.
    let mut asked = false;
    let r = settle(
        || {
            asked = true;
            yes()
        },
        true,
        false,
        &mem,
        None,
    );
    assert_eq!(r, Err(Refusal::PreApprovalNotAllowed));
    assert!(!asked);
    // Control: --yes with allow_yes approves.
    let pre = PreApproved;
    let req_answer = || ApprovalAnswer::Approved {
        by: ApprovalChannel::name(&pre).into(),
    };
    assert_eq!(
        settle(req_answer, true, true, &mem, None),
        Ok("--yes".into())
    );
}

#[test]
fn refusal_messages_say_how_to_approve() {
    let m = refusal_message(
        Refusal::NoChannel,
        "deploy",
        ApprovalMode::Always,
        "policy p.toml",
    );
    assert!(m.contains("no one could be asked"), "{m}");
    assert!(m.contains("--yes") && m.contains("allow_yes = true"), "{m}");
    assert!(m.contains("policy p.toml"), "{m}");
    let m = refusal_message(
        Refusal::PreApprovalNotAllowed,
        "deploy",
        ApprovalMode::Always,
        "x",
    );
    assert!(m.contains("--yes is not permitted"), "{m}");
}
