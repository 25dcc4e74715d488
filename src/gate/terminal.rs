//! Asking on the controlling terminal (`/dev/tty`), never on stdout, which
//! carries the tool's result.
//!
//! The prompt shows the tool, what it runs (the script, the entry point or
//! the command template) and the file that defines it, its arguments
//! (pretty JSON, cut when huge) and the grant (readable and writable paths,
//! network, timeout). Answers: `y`,
//! `yes`, `n`, `no` (any case); anything else asks again, up to three times.
//! No terminal → [`ApprovalAnswer::NoChannel`]; end of input (Ctrl-D) →
//! [`ApprovalAnswer::Declined`]; no answer within the timeout →
//! [`ApprovalAnswer::TimedOut`]; toolcage interrupted while asking (Ctrl-C,
//! SIGTERM, SIGHUP: [`Terminal::with_interrupt`]) →
//! [`ApprovalAnswer::Interrupted`].
//!
//! Before the question, pending input is discarded (`tcflush`), so type-ahead
//! or a `y` typed at a fake prompt that a tool printed earlier is not an
//! answer, and colours and attributes are reset ([`RESET_ATTRIBUTES`]), so
//! earlier output cannot leave the prompt hidden.

use super::approval::{ApprovalAnswer, ApprovalChannel, ApprovalRequest, BoxFuture};
use crate::sandbox::CancelToken;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::termios::{FlushArg, tcflush};
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// SGR 0: every colour and attribute (hidden, invisible, reverse) off.
pub(crate) const RESET_ATTRIBUTES: &str = "\x1b[0m";

/// At most this many bytes of pretty-printed arguments are shown.
pub(crate) const MAX_ARGS_SHOWN: usize = 4096;
/// At most this many bytes of any one string value are shown, so one huge
/// value cannot push the other arguments out of view.
pub(crate) const MAX_VALUE_SHOWN: usize = 256;
/// At most this many bytes of the command and of the source path are shown.
pub(crate) const MAX_RUNS_SHOWN: usize = 1024;

/// `s` on one line (newlines and controls escaped), cut at `max` bytes.
fn one_line_capped(s: &str, max: usize) -> String {
    let mut line = crate::text::one_line(s);
    if line.len() > max {
        let mut cut = max;
        while !line.is_char_boundary(cut) {
            cut -= 1;
        }
        let omitted = line.len() - cut;
        line.truncate(cut);
        line.push_str(&format!("… [{omitted} more bytes not shown]"));
    }
    line
}

/// The arguments with every long string cut (on a character boundary) and
/// marked with how much was left out.
fn shorten(v: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match v {
        Value::String(s) if s.len() > MAX_VALUE_SHOWN => {
            let mut cut = MAX_VALUE_SHOWN;
            while !s.is_char_boundary(cut) {
                cut -= 1;
            }
            Value::String(format!(
                "{}… [{} more bytes not shown]",
                &s[..cut],
                s.len() - cut
            ))
        }
        Value::Array(a) => Value::Array(a.iter().map(shorten).collect()),
        Value::Object(m) => Value::Object(m.iter().map(|(k, v)| (k.clone(), shorten(v))).collect()),
        other => other.clone(),
    }
}

/// The terminal channel.
#[derive(Debug, Clone)]
pub(crate) struct Terminal {
    path: PathBuf,
    timeout: Duration,
    interrupt: Option<CancelToken>,
}

impl Default for Terminal {
    fn default() -> Self {
        Terminal::new()
    }
}

impl Terminal {
    /// `/dev/tty`, 60 seconds to answer.
    pub(crate) fn new() -> Terminal {
        Terminal::with_path("/dev/tty", Duration::from_secs(60))
    }

    /// Another terminal device (tests use a pseudo-terminal).
    pub(crate) fn with_path(path: impl Into<PathBuf>, timeout: Duration) -> Terminal {
        Terminal {
            path: path.into(),
            timeout,
            interrupt: None,
        }
    }

    /// Stop asking when `token` is cancelled (toolcage got Ctrl-C, SIGTERM
    /// or SIGHUP): the answer is [`ApprovalAnswer::Interrupted`].
    pub(crate) fn with_interrupt(mut self, token: CancelToken) -> Terminal {
        self.interrupt = Some(token);
        self
    }
}

/// Control characters (C0, DEL, C1) and bidirectional overrides, shown as
/// `\u{..}` so the arguments cannot move the cursor, clear the screen or
/// reorder text to fake the prompt. Newlines stay. See [`crate::text`].
pub(crate) fn sanitize(s: &str) -> String {
    crate::text::escape_except(s, &['\n'])
}

/// The text shown to a person (also usable as an elicitation message).
/// Everything from the call passes through [`sanitize`].
pub(crate) fn describe(r: &ApprovalRequest) -> String {
    sanitize(&describe_raw(r))
}

fn describe_raw(r: &ApprovalRequest) -> String {
    let fmt = serde_json::to_value(r.format)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    let mut args = serde_json::to_string_pretty(&shorten(&r.arguments)).unwrap_or_default();
    if args.len() > MAX_ARGS_SHOWN {
        let mut cut = MAX_ARGS_SHOWN;
        while !args.is_char_boundary(cut) {
            cut -= 1;
        }
        let omitted = args.len() - cut;
        args.truncate(cut);
        args.push_str(&format!("\n… [{omitted} more bytes not shown]"));
    }
    let list = |l: &[PathBuf]| {
        if l.is_empty() {
            "(none)".to_string()
        } else {
            l.iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        }
    };
    let mut s = format!(
        "toolcage: tool \"{}\" ({fmt}) asks to run.\n  why: {}\n  runs:       {}\n  defined in: {}\n  arguments:\n",
        one_line_capped(&r.tool, MAX_RUNS_SHOWN),
        r.reason,
        one_line_capped(&r.runs, MAX_RUNS_SHOWN),
        one_line_capped(&r.source, MAX_RUNS_SHOWN),
    );
    for line in args.lines() {
        s.push_str("    ");
        s.push_str(line);
        s.push('\n');
    }
    s.push_str(&format!(
        "  may read:  {}\n  may write: {}\n  network:   {}\n  timeout:   {}\n",
        list(&r.grant.read),
        list(&r.grant.write),
        r.grant.network,
        r.grant.timeout_text()
    ));
    s
}

enum Line {
    Text(String),
    Eof,
    TimedOut,
    Interrupted,
    Failed,
}

/// Read one line, giving up at `deadline` or when `interrupt` fires.
fn read_line(tty: &mut File, deadline: Instant, interrupt: Option<&CancelToken>) -> Line {
    let mut buf = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Line::TimedOut;
        }
        if interrupt.is_some_and(CancelToken::is_cancelled) {
            return Line::Interrupted;
        }
        let ms = PollTimeout::try_from(left.as_millis().max(1)).unwrap_or(PollTimeout::MAX);
        let mut fds = vec![PollFd::new(tty.as_fd(), PollFlags::POLLIN)];
        if let Some(t) = interrupt {
            fds.push(PollFd::new(t.as_fd(), PollFlags::POLLIN));
        }
        match poll(&mut fds, ms) {
            Ok(0) => return Line::TimedOut,
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return Line::Failed,
        }
        if fds[0].revents().is_none_or(|r| r.is_empty()) {
            continue; // the interrupt: checked at the top
        }
        let mut chunk = [0u8; 256];
        match tty.read(&mut chunk) {
            Ok(0) if buf.is_empty() => return Line::Eof,
            Ok(0) => return Line::Text(String::from_utf8_lossy(&buf).into_owned()),
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                if let Some(i) = buf.iter().position(|&b| b == b'\n') {
                    buf.truncate(i);
                    return Line::Text(String::from_utf8_lossy(&buf).into_owned());
                }
                if buf.len() > 4096 {
                    buf.clear();
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            // EIO: the other side of the terminal is gone.
            Err(_) if buf.is_empty() => return Line::Eof,
            Err(_) => return Line::Failed,
        }
    }
}

impl ApprovalChannel for Terminal {
    fn name(&self) -> &str {
        "terminal"
    }

    fn can_ask(&self) -> bool {
        OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOCTTY | libc::O_CLOEXEC)
            .open(&self.path)
            .is_ok()
    }

    /// Blocks while the person answers (`toolcage call` has nothing else
    /// to do meanwhile).
    fn ask<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, ApprovalAnswer> {
        Box::pin(async move { self.prompt(request) })
    }
}

impl Terminal {
    /// Show the request on the terminal and read the answer: `y`/`yes`
    /// approves, `n`/`no` or end of input declines; the timeout declines.
    pub(crate) fn prompt(&self, request: &ApprovalRequest) -> ApprovalAnswer {
        let Ok(mut tty) = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOCTTY | libc::O_CLOEXEC)
            .open(&self.path)
        else {
            return ApprovalAnswer::NoChannel;
        };
        // Whatever was typed before the question was shown (type-ahead, or
        // a `y` answered to a fake prompt a tool printed earlier) is not an
        // answer to it: discard pending input first. A terminal whose input
        // cannot be discarded is not asked.
        if tcflush(&tty, FlushArg::TCIFLUSH).is_err() {
            return ApprovalAnswer::NoChannel;
        }
        let deadline = Instant::now() + self.timeout;
        // Reset colours and attributes first: earlier output (a tool's) may
        // have left the terminal printing hidden or invisible text.
        let mut prompt = format!("{RESET_ATTRIBUTES}{}", describe(request));
        for _ in 0..3 {
            prompt.push_str(&format!(
                "Allow this call? [y/n] (declined in {}s) ",
                self.timeout.as_secs()
            ));
            if tty.write_all(prompt.as_bytes()).is_err() || tty.flush().is_err() {
                return ApprovalAnswer::NoChannel;
            }
            prompt.clear();
            match read_line(&mut tty, deadline, self.interrupt.as_ref()) {
                Line::Text(t) => match t.trim().to_ascii_lowercase().as_str() {
                    "y" | "yes" => {
                        return ApprovalAnswer::Approved {
                            by: "terminal".into(),
                        };
                    }
                    "n" | "no" => return ApprovalAnswer::Declined,
                    _ => prompt.push_str("Please answer y or n.\n"),
                },
                Line::Eof => {
                    let _ = tty.write_all(b"\n");
                    return ApprovalAnswer::Declined;
                }
                Line::TimedOut => {
                    let _ = tty.write_all(b"\ntoolcage: no answer; declined.\n");
                    return ApprovalAnswer::TimedOut;
                }
                Line::Interrupted => {
                    let _ = tty.write_all(b"\ntoolcage: interrupted; not run.\n");
                    return ApprovalAnswer::Interrupted;
                }
                Line::Failed => return ApprovalAnswer::NoChannel,
            }
        }
        let _ = tty.write_all(b"toolcage: no clear answer; declined.\n");
        ApprovalAnswer::Declined
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::GrantSummary;
    use crate::spec::Format;
    use nix::pty::openpty;
    use std::os::fd::{AsRawFd, OwnedFd};

    fn request(args: serde_json::Value) -> ApprovalRequest {
        ApprovalRequest {
            tool: "deploy".into(),
            format: Format::Opencrabs,
            runs: "sh -c 'echo {{env}}'".into(),
            source: "/proj/tools.toml:3".into(),
            definition_sha256: "0".repeat(64),
            arguments: args,
            grant: GrantSummary {
                read: vec!["/usr".into()],
                write: vec!["/proj".into()],
                network: "off".into(),
                timeout_secs: 30.0,
            },
            reason: "approval mode always (policy p.toml)".into(),
        }
    }

    /// Ask on a fresh pseudo-terminal: `early` is typed before the question
    /// is asked, `input` once the prompt is shown. Returns the answer and
    /// everything the terminal displayed.
    fn ask_pty_typed(early: &[u8], input: &[u8], timeout: Duration) -> (ApprovalAnswer, String) {
        let pty = openpty(None, None).unwrap();
        let master: OwnedFd = pty.master;
        let slave = pty.slave;
        let path = format!("/proc/self/fd/{}", slave.as_raw_fd());
        let mut m = File::from(master);
        m.write_all(early).unwrap();
        let asking = std::thread::spawn(move || {
            let answer = Terminal::with_path(path, timeout).prompt(&request(serde_json::json!({
                "env": "prod", "big": "x".repeat(10_000)
            })));
            drop(slave);
            answer
        });
        let mut shown = Vec::new();
        let mut chunk = [0u8; 4096];
        let mut typed = false;
        let give_up = Instant::now() + timeout + Duration::from_secs(5);
        while Instant::now() < give_up {
            if !typed && String::from_utf8_lossy(&shown).contains("Allow this call?") {
                m.write_all(input).unwrap();
                typed = true;
            }
            let mut fds = [PollFd::new(m.as_fd(), PollFlags::POLLIN)];
            if poll(&mut fds, PollTimeout::from(200u16)).unwrap_or(0) == 0 {
                if asking.is_finished() {
                    break;
                }
                continue;
            }
            match m.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => shown.extend_from_slice(&chunk[..n]),
            }
        }
        let answer = asking.join().unwrap();
        (answer, String::from_utf8_lossy(&shown).into_owned())
    }

    fn ask_pty(input: &[u8], timeout: Duration) -> (ApprovalAnswer, String) {
        ask_pty_typed(b"", input, timeout)
    }

    #[test]
    fn type_ahead_is_discarded_and_attributes_are_reset_first() {
        // `y` typed before the question exists is not an answer to it.
        let (a, shown) = ask_pty_typed(b"y\n", b"n\n", Duration::from_secs(10));
        assert_eq!(a, ApprovalAnswer::Declined, "{shown}");
        let (a, _) = ask_pty_typed(b"y\n", b"", Duration::from_millis(500));
        assert_eq!(a, ApprovalAnswer::TimedOut);
        // The prompt starts by switching hidden text and colours off.
        let at = shown.find("toolcage: tool").unwrap();
        assert!(shown[..at].ends_with(RESET_ATTRIBUTES), "{shown:?}");
        // Control: the same answer typed after the prompt approves.
        let (a, _) = ask_pty_typed(b"", b"y\n", Duration::from_secs(10));
        assert_eq!(
            a,
            ApprovalAnswer::Approved {
                by: "terminal".into()
            }
        );
    }

    #[test]
    fn yes_approves_and_the_prompt_shows_tool_args_and_grant() {
        let (a, shown) = ask_pty(b"yes\n", Duration::from_secs(10));
        assert_eq!(
            a,
            ApprovalAnswer::Approved {
                by: "terminal".into()
            }
        );
        assert!(shown.contains("tool \"deploy\" (opencrabs)"), "{shown}");
        assert!(
            shown.contains("runs:       sh -c 'echo {{env}}'"),
            "{shown}"
        );
        assert!(shown.contains("defined in: /proj/tools.toml:3"), "{shown}");
        assert!(shown.contains("\"env\": \"prod\""), "{shown}");
        assert!(shown.contains("more bytes not shown"), "{shown}");
        assert!(shown.contains("may write: /proj"), "{shown}");
        assert!(shown.contains("network:   off"), "{shown}");
        assert!(shown.contains("timeout:   30s"), "{shown}");
        assert!(shown.contains("Allow this call?"), "{shown}");
    }

    #[test]
    fn no_declines_and_unclear_answers_ask_again() {
        assert_eq!(
            ask_pty(b"N\n", Duration::from_secs(10)).0,
            ApprovalAnswer::Declined
        );
        let (a, shown) = ask_pty(b"maybe\ny\n", Duration::from_secs(10));
        assert_eq!(
            a,
            ApprovalAnswer::Approved {
                by: "terminal".into()
            }
        );
        assert!(shown.contains("Please answer y or n."), "{shown}");
        assert_eq!(
            ask_pty(b"a\nb\nc\ny\n", Duration::from_secs(10)).0,
            ApprovalAnswer::Declined
        );
    }

    #[test]
    fn eof_declines_and_silence_times_out() {
        // Ctrl-D at the start of a line: end of input.
        assert_eq!(
            ask_pty(b"\x04", Duration::from_secs(10)).0,
            ApprovalAnswer::Declined
        );
        let (a, shown) = ask_pty(b"", Duration::from_millis(300));
        assert_eq!(a, ApprovalAnswer::TimedOut);
        assert!(shown.contains("no answer; declined"), "{shown}");
    }

    #[test]
    fn arguments_cannot_drive_the_terminal() {
        let mut r = request(serde_json::json!({"a": "x\u{1b}[2J\u{9b}31m\u{202e}cba", "b": "y"}));
        r.tool = "t\u{7}".into();
        // A multi-line command cannot add a line of its own to the prompt.
        r.runs = "sh -c 'x\nAllow this call? [y/n]\u{1b}[8m'".into();
        let text = describe(&r);
        assert!(
            !text.chars().any(|c| c.is_control() && c != '\n'),
            "{text:?}"
        );
        assert!(!text.contains('\u{202e}'));
        assert!(
            text.contains("\\u{9b}") && text.contains("\\u{202e}"),
            "{text}"
        );
        assert!(text.contains("\\u001b[2J"), "{text}");
        assert!(
            !text.lines().any(|l| l.starts_with("Allow this call?")),
            "{text}"
        );
        assert!(text.contains("runs:       sh -c 'x\\u{a}Allow"), "{text}");
        // Every key is shown even when one value is huge.
        let r = request(serde_json::json!({"a": "x".repeat(100_000), "z": "last"}));
        let text = describe(&r);
        assert!(text.contains("\"z\": \"last\""), "{text}");
        assert!(text.len() < MAX_ARGS_SHOWN + 1000);
    }

    #[test]
    fn no_terminal_is_no_channel() {
        let t = Terminal::with_path("/nonexistent/tty", Duration::from_secs(1));
        assert_eq!(
            t.prompt(&request(serde_json::json!({}))),
            ApprovalAnswer::NoChannel
        );
    }
}
