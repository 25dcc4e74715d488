//! Property tests: whatever a value holds, a rendered template run by
//! `sh -c` prints exactly that value.

use super::template::run_sh;
use crate::discover::opencrabs::shellctx::render;
use proptest::prelude::*;
use serde_json::{Map, Value};

/// Strings biased towards shell metacharacters (no NUL: an argument
/// cannot hold one, and [`render`] refuses it).
fn nasty() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("$(touch pwned)".to_string()),
        Just("`id`".to_string()),
        Just("'".to_string()),
        Just("\"".to_string()),
        Just("\\".to_string()),
        Just("\n".to_string()),
        Just(";".to_string()),
        Just("$".to_string()),
        Just("${x}".to_string()),
        Just("*".to_string()),
        Just(" ".to_string()),
        Just("-e".to_string()),
        Just("%s".to_string()),
        Just("}}".to_string()),
        "[^\u{0}]{0,4}",
    ];
    prop::collection::vec(piece, 0..8).prop_map(|v| v.concat())
}

fn one(name: &str, v: &str) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert(name.into(), Value::String(v.into()));
    m
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 64,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn printf_prints_exactly_the_value(v in nasty()) {
        let c = render("printf '%s\\n' {{x}}", &one("x", &v)).unwrap();
        prop_assert_eq!(run_sh("/bin/sh", &c), format!("{v}\n"));
    }

    #[test]
    fn every_context_prints_exactly_the_value(v in nasty()) {
        let t = r#"printf '<%s>' {{x}} "d{{x}}" 's{{x}}' "$(printf %s "{{x}}")"{{#x}} {{x}}{{/x}}"#;
        let c = render(t, &one("x", &v)).unwrap();
        let tail = if v.is_empty() { String::new() } else { format!("<{v}>") };
        // `$(…)` drops trailing newlines: shell semantics, not quoting.
        let sub = v.trim_end_matches('\n');
        prop_assert_eq!(
            run_sh("/bin/sh", &c),
            format!("<{v}><d{v}><s{v}><{sub}>{tail}")
        );
    }
}
