//! SIGTERM, SIGINT and SIGHUP for the commands that run tools (`call`,
//! `serve`, `exec`): instead of dying with a tool half-run and no audit
//! record (for `exec`: the terminal as the command left it), toolcage
//! cancels what is running (the call's process tree is killed), writes the
//! records, and exits with 128 + the signal's number.
//!
//! The handlers are tokio's (no `unsafe` here): a handled signal does not
//! survive `execve`, so the tools still start with the default actions
//! (the sandbox's child resets them too). SIGKILL cannot be handled: the
//! `started` record written before each run is what is left then.

use crate::sandbox::CancelToken;
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};
use tokio::signal::unix::{Signal, SignalKind, signal};

/// The three signals, listened to together. Create inside a tokio runtime.
pub(crate) struct Signals {
    term: Signal,
    int: Signal,
    hup: Signal,
}

impl Signals {
    /// Install the handlers (from now on these signals no longer kill
    /// toolcage).
    pub(crate) fn listen() -> std::io::Result<Signals> {
        Ok(Signals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
            hup: signal(SignalKind::hangup())?,
        })
    }

    /// The number of the next signal received.
    pub(crate) async fn recv(&mut self) -> i32 {
        tokio::select! {
            _ = self.term.recv() => libc::SIGTERM,
            _ = self.int.recv() => libc::SIGINT,
            _ = self.hup.recv() => libc::SIGHUP,
        }
    }
}

/// `SIGTERM`, `SIGINT`, `SIGHUP`, or `signal N`.
pub(crate) fn name(sig: i32) -> String {
    match sig {
        libc::SIGTERM => "SIGTERM".into(),
        libc::SIGINT => "SIGINT".into(),
        libc::SIGHUP => "SIGHUP".into(),
        n => format!("signal {n}"),
    }
}

/// What the audit record's `stopped_by` says.
pub(crate) fn stopped_by(sig: i32, command: &str) -> String {
    format!("{} to toolcage {command}", name(sig))
}

/// The exit status after signal `sig`: 128 + its number, as the shell
/// reports a process killed by it.
pub(crate) fn exit_status(sig: i32) -> u8 {
    u8::try_from(128 + sig).unwrap_or(255)
}

/// For a blocking command (`toolcage call`): a thread that waits for the
/// first signal, remembers it and cancels [`Interrupts::token`]; later ones
/// are ignored while the records are written.
pub(crate) struct Interrupts {
    token: CancelToken,
    got: Arc<AtomicI32>,
}

impl Interrupts {
    /// Start watching; returns once the handlers are installed.
    pub(crate) fn watch() -> std::io::Result<Interrupts> {
        let token = CancelToken::new()?;
        let got = Arc::new(AtomicI32::new(0));
        let (ready, installed) = std::sync::mpsc::channel::<std::io::Result<()>>();
        let (cancel, seen) = (token.clone(), got.clone());
        std::thread::Builder::new()
            .name("toolcage-signals".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_io()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready.send(Err(e));
                        return;
                    }
                };
                rt.block_on(async move {
                    let mut signals = match Signals::listen() {
                        Ok(s) => s,
                        Err(e) => {
                            let _ = ready.send(Err(e));
                            return;
                        }
                    };
                    let _ = ready.send(Ok(()));
                    let sig = signals.recv().await;
                    seen.store(sig, Ordering::SeqCst);
                    cancel.cancel();
                    loop {
                        signals.recv().await;
                    }
                });
            })?;
        installed
            .recv()
            .map_err(|_| std::io::Error::other("the signal thread ended early"))??;
        Ok(Interrupts { token, got })
    }

    /// Cancelled when the first signal arrives.
    pub(crate) fn token(&self) -> &CancelToken {
        &self.token
    }

    /// The first signal received, if any.
    pub(crate) fn received(&self) -> Option<i32> {
        match self.got.load(Ordering::SeqCst) {
            0 => None,
            n => Some(n),
        }
    }
}
