//! Hot reload: watch the tool dirs, wait for a quiet period (debounce), ask
//! the host to rediscover, and send `notifications/tools/list_changed` to
//! every client when the definitions changed.
//!
//! A half-written file is never served: discovery turns an unparsable file
//! into a diagnostic (no tool), and the debounce waits for writes to settle.

use super::McpServer;
use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use tokio::sync::mpsc;

/// Keeps the watch alive; dropping it stops hot reload.
pub struct Reloader {
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Reloader {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Start watching `server`'s tool paths. Must be called inside a tokio runtime.
pub fn start(server: McpServer) -> notify::Result<Reloader> {
    let (tx, rx) = mpsc::unbounded_channel::<PathBuf>();
    let watcher = notify::recommended_watcher(move |ev: notify::Result<notify::Event>| match ev {
        Ok(ev) if !matches!(ev.kind, EventKind::Access(_)) => {
            for p in ev.paths {
                let _ = tx.send(p);
            }
        }
        Ok(_) => {}
        Err(e) => tracing::warn!("file watch error: {e}"),
    })?;
    let targets = server.shared.host.watch_paths();
    let mut watch = Watch {
        watcher,
        watched: BTreeSet::new(),
        targets,
    };
    watch.sync();
    let task = tokio::spawn(watch_loop(server, watch, rx));
    Ok(Reloader { task })
}

struct Watch {
    watcher: RecommendedWatcher,
    /// (path, recursive) pairs currently registered.
    watched: BTreeSet<(PathBuf, bool)>,
    targets: Vec<PathBuf>,
}

impl Watch {
    /// Watch every existing target recursively, and each target's existing
    /// ancestors non-recursively so a tool dir created later is noticed.
    fn sync(&mut self) {
        let mut want = BTreeSet::new();
        for t in &self.targets {
            if t.exists() {
                want.insert((t.clone(), true));
            }
            let mut a = t.parent();
            while let Some(dir) = a {
                if dir.is_dir() {
                    want.insert((dir.to_path_buf(), false));
                    break;
                }
                a = dir.parent();
            }
        }
        for (p, rec) in self.watched.difference(&want).cloned().collect::<Vec<_>>() {
            let _ = self.watcher.unwatch(&p);
            self.watched.remove(&(p, rec));
        }
        for (p, rec) in want {
            if self.watched.contains(&(p.clone(), rec)) {
                continue;
            }
            let mode = if rec {
                RecursiveMode::Recursive
            } else {
                RecursiveMode::NonRecursive
            };
            match self.watcher.watch(&p, mode) {
                Ok(()) => {
                    self.watched.insert((p, rec));
                }
                Err(e) => tracing::debug!("cannot watch {}: {e}", p.display()),
            }
        }
    }

    fn relevant(&self, changed: &Path) -> bool {
        self.targets.iter().any(|t| changed.starts_with(t))
    }
}

async fn watch_loop(server: McpServer, mut watch: Watch, mut rx: mpsc::UnboundedReceiver<PathBuf>) {
    let debounce = server.shared.config.reload_debounce;
    while let Some(first) = rx.recv().await {
        if !watch.relevant(&first) {
            continue;
        }
        // Quiet period: restart the timer on every further event.
        loop {
            match tokio::time::timeout(debounce, rx.recv()).await {
                Ok(Some(_)) => continue,
                Ok(None) => return,
                Err(_) => break,
            }
        }
        watch.sync();
        let host = server.shared.host.clone();
        let changed = match tokio::task::spawn_blocking(move || {
            // A tool's grant may change: its prepared sandboxes go (and
            // again after, those a call prepared meanwhile).
            crate::sandbox::pool::clear();
            let changed = host.reload();
            crate::sandbox::pool::clear();
            changed
        })
        .await
        {
            Ok(c) => c,
            Err(e) => {
                tracing::error!("rediscovery failed: {e}");
                continue;
            }
        };
        tracing::info!("tool files changed; rediscovered (definitions changed: {changed})");
        if changed {
            server.notify_tools_changed().await;
        }
    }
}
