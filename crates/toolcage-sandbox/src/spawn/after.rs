//! Phases 5 and 6: supervising the running call, then what toolcage does
//! after it (denials, protected paths, the outcome).

use super::super::command::Command;
use super::super::mode::IsolationMode;
use super::super::outcome::{Exit, Outcome};
use super::super::supervise::{self, CancelToken, Finished, Running};
use super::prepare::Aftercare;
use super::start::Started;
use crate::{proxy, quarantine, rootfs};
use std::time::Instant;
use toolcage_broker::{Denial, inferred};
use toolcage_policy::Grant;

/// Phase 5: tell the caller what the call runs under, then feed its stdin,
/// capture its output and enforce its timeout and cancellation until the
/// init reports the tool's status.
pub(in crate::spawn) fn supervise(
    grant: &Grant,
    cmd: &Command,
    cancel: Option<&CancelToken>,
    started: &mut Started,
) -> Finished {
    if let Some(tx) = &cmd.report_to {
        let _ = tx.try_send(started.aftercare.report.clone());
    }
    supervise::supervise(
        Running {
            init: &mut started.init,
            stdio: started.stdio.take(),
            status: &started.status,
        },
        &cmd.stdin,
        grant.output,
        grant.timeout,
        grant.kill_grace,
        cancel,
    )
}

/// Phase 6: the call's denials; namespace-free, its private tmp removed
/// and the protected and denied paths put back; what it created among the
/// protected paths moved aside; the outcome. `start` is when the call
/// began.
pub(in crate::spawn) fn after_call(
    grant: &Grant,
    mut started: Started,
    finished: Finished,
    start: Instant,
) -> Outcome {
    let denials = denials(grant, &mut started, &finished);
    let Aftercare {
        report,
        host_tmp,
        root,
        ..
    } = started.aftercare;
    drop(host_tmp);
    let mut after = quarantine::AfterCall::default();
    let mut restored = Vec::new();
    let mut unchecked = Vec::new();
    // The trees first: what the call left inside them is removed, so a
    // missing protected path inside one is gone before the quarantine.
    if let Some(snapshot) = root.snapshot {
        let r = snapshot.restore();
        restored = r.restored;
        after.removed = r.removed;
        after.failed = r.unrestorable;
        unchecked = snapshot.incomplete;
    }
    quarantine::after_call(root.missing_protected, root.protected_links, &mut after);
    after.created.extend(quarantine::reachable(
        rootfs::replaced(&root.watched),
        &grant.write,
    ));
    Outcome {
        exit: finished.exit,
        stdout: finished.stdout,
        stderr: finished.stderr,
        duration: start.elapsed(),
        enforcement: report,
        created_protected: after.created,
        quarantined: after.quarantined,
        restored,
        removed: after.removed,
        unrestorable: after.failed,
        unchecked,
        denials,
    }
}

/// What the call was refused: the proxy's record, the audit log's exact
/// records, and what its output says (inferred where no exact record
/// names the same target).
fn denials(grant: &Grant, started: &mut Started, finished: &Finished) -> Vec<Denial> {
    let mut denials = started
        .proxy
        .take()
        .map_or_else(Vec::new, proxy::Proxy::finish);
    // The tool's own error messages, when toolcage has them (not under
    // `exec`, whose output goes straight to the terminal).
    let teed = started
        .teed
        .take()
        .and_then(|t| t.join().ok())
        .unwrap_or_default();
    let text = format!("{}\n{}\n{teed}", finished.stderr.text, finished.stdout.text);
    let signal = match finished.exit {
        Exit::Signal(s) => Some(s),
        _ => None,
    };
    denials.extend(inferred::cpu_limit(grant, signal, &text));
    let care = &started.aftercare;
    if care.report.mode == IsolationMode::NamespaceFree {
        let own = care.host_tmp.as_ref().map(|t| t.0.as_path());
        denials.extend(inferred::host_tmp(grant, own, &text));
    }
    let exact = match (started.audit_tap.take(), &started.call_pids) {
        (Some(t), Some(pids)) => t.finish(grant, pids),
        _ => Vec::new(),
    };
    denials.extend(
        inferred::from_output(
            grant,
            care.report.mode == IsolationMode::NamespaceFree,
            &care.cwd,
            &text,
        )
        .into_iter()
        .filter(|d| !exact.iter().any(|e| e.target == d.target)),
    );
    denials.extend(exact);
    denials
}
