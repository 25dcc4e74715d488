//! Durations and sizes as written in policy files and on the command line.
//!
//! Durations: `"30s"`, `"500ms"`, `"5m"`, `"1h"`, or a bare integer (seconds).
//! Sizes: `"64KiB"`, `"4GiB"`, `"1MB"`, `"512"`, or a bare integer (bytes).
//! Binary suffixes (`KiB`, `MiB`, `GiB`, `TiB`) are powers of 1024, decimal
//! ones (`KB`, `MB`, `GB`, `TB`) powers of 1000; `B` is bytes. Suffixes are
//! case-insensitive; whitespace between number and unit is allowed.

use std::time::Duration;

/// The hint appended to every duration error.
pub const DURATION_HINT: &str = "use e.g. \"30s\", \"500ms\", \"5m\"";
/// The hint appended to every size error.
pub const SIZE_HINT: &str = "use e.g. \"64KiB\", \"4GiB\", \"1MB\" or a number of bytes";

fn split_number(s: &str) -> Option<(u64, &str)> {
    let s = s.trim();
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    if end == 0 {
        return None;
    }
    let n = s[..end].parse::<u64>().ok()?;
    Some((n, s[end..].trim()))
}

/// Parse a duration; the error is the full human message.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let bad = || format!("invalid duration \"{s}\" ({DURATION_HINT})");
    let (n, unit) = split_number(s).ok_or_else(bad)?;
    let d = match unit.to_ascii_lowercase().as_str() {
        "" | "s" | "sec" | "secs" => Duration::from_secs(n),
        "ms" => Duration::from_millis(n),
        "m" | "min" | "mins" => Duration::from_secs(n.checked_mul(60).ok_or_else(bad)?),
        "h" => Duration::from_secs(n.checked_mul(3600).ok_or_else(bad)?),
        _ => return Err(bad()),
    };
    Ok(d)
}

/// Parse a size in bytes; the error is the full human message.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let bad = || format!("invalid size \"{s}\" ({SIZE_HINT})");
    let (n, unit) = split_number(s).ok_or_else(bad)?;
    let mult: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kib" | "k" => 1 << 10,
        "mib" | "m" => 1 << 20,
        "gib" | "g" => 1 << 30,
        "tib" | "t" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        _ => return Err(bad()),
    };
    n.checked_mul(mult).ok_or_else(bad)
}

/// The shortest exact spelling of a duration: `500ms`, `30s`, `5m`, `1h`.
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if !ms.is_multiple_of(1000) || ms == 0 {
        if !d.subsec_nanos().is_multiple_of(1_000_000) {
            return format!("{}s", d.as_secs_f64());
        }
        return format!("{ms}ms");
    }
    let s = d.as_secs();
    if s.is_multiple_of(3600) {
        format!("{}h", s / 3600)
    } else if s.is_multiple_of(60) {
        format!("{}m", s / 60)
    } else {
        format!("{s}s")
    }
}

/// The shortest exact binary spelling of a size: `64KiB`, `4GiB`, `1000000B`.
pub fn format_size(n: u64) -> String {
    const UNITS: [(u64, &str); 4] = [
        (1 << 40, "TiB"),
        (1 << 30, "GiB"),
        (1 << 20, "MiB"),
        (1 << 10, "KiB"),
    ];
    for (m, u) in UNITS {
        if n != 0 && n.is_multiple_of(m) {
            return format!("{}{u}", n / m);
        }
    }
    format!("{n}B")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("45"), Ok(Duration::from_secs(45)));
        assert_eq!(parse_duration(" 2 m "), Ok(Duration::from_secs(120)));
        let e = parse_duration("3x").unwrap_err();
        assert_eq!(
            e,
            "invalid duration \"3x\" (use e.g. \"30s\", \"500ms\", \"5m\")"
        );
        assert!(parse_duration("").is_err());
        assert!(parse_duration("s").is_err());
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("1.5s").is_err());
        assert!(parse_duration("99999999999999999999h").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("64KiB"), Ok(65536));
        assert_eq!(parse_size("4GiB"), Ok(4 << 30));
        assert_eq!(parse_size("1MB"), Ok(1_000_000));
        assert_eq!(parse_size("512"), Ok(512));
        assert_eq!(parse_size("16 kib"), Ok(16384));
        assert!(
            parse_size("12 parsecs")
                .unwrap_err()
                .contains("invalid size")
        );
        assert!(parse_size("99999999999TiB").is_err());
    }

    #[test]
    fn formatting() {
        assert_eq!(format_duration(Duration::from_millis(500)), "500ms");
        assert_eq!(format_duration(Duration::from_secs(30)), "30s");
        assert_eq!(format_duration(Duration::from_secs(300)), "5m");
        assert_eq!(format_duration(Duration::from_secs(7200)), "2h");
        assert_eq!(format_duration(Duration::ZERO), "0ms");
        assert_eq!(format_size(65536), "64KiB");
        assert_eq!(format_size(1000), "1000B");
        assert_eq!(format_size(0), "0B");
    }

    proptest! {
        #[test]
        fn duration_round_trips(ms in 0u64..10_000_000_000) {
            let d = Duration::from_millis(ms);
            prop_assert_eq!(parse_duration(&format_duration(d)), Ok(d));
        }

        #[test]
        fn size_round_trips(n in 0u64..(1u64 << 50)) {
            prop_assert_eq!(parse_size(&format_size(n)), Ok(n));
        }

        #[test]
        fn parsers_never_panic(s in ".{0,24}") {
            let _ = parse_duration(&s);
            let _ = parse_size(&s);
        }
    }
}
