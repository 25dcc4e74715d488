//! What the kernel must enforce before a call may start: the grant's
//! rlimits (clamped to what toolcage inherited) and the check of the
//! enforcement report against the grant's `enforcement` level.

use super::error::SandboxError;
use super::report::{EnforcementReport, LandlockStatus};
use toolcage_policy::{Enforcement, Grant};

/// Seconds of CPU time between SIGXCPU at the grant's CPU limit and the
/// kernel's SIGKILL.
const CPU_GRACE: u64 = 5;

/// The grant's rlimits, each clamped to the current hard limit (a lower
/// limit set by the operator, say `ulimit -n 512` in a CI container, is
/// kept rather than failing the call or, with CAP_SYS_RESOURCE, raised).
/// Returns the limits and a note for each clamp.
pub(super) fn rlimits(
    grant: &Grant,
) -> (Vec<(libc::__rlimit_resource_t, libc::rlimit)>, Vec<String>) {
    let l = &grant.limits;
    let mut out = vec![(
        libc::RLIMIT_CORE,
        libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        },
    )];
    let mut notes = Vec::new();
    for (res, name, val) in [
        (libc::RLIMIT_AS, "address_space", l.address_space),
        (libc::RLIMIT_CPU, "cpu", l.cpu_seconds),
        (libc::RLIMIT_NPROC, "processes", l.processes),
        (libc::RLIMIT_FSIZE, "file_size", l.file_size),
        (libc::RLIMIT_NOFILE, "open_files", l.open_files),
    ] {
        let Some(want) = val else { continue };
        let mut cur = libc::rlimit {
            rlim_cur: 0,
            rlim_max: libc::RLIM_INFINITY,
        };
        // SAFETY: getrlimit writes into our stack struct.
        unsafe { libc::getrlimit(res, &mut cur) };
        let v = if cur.rlim_max != libc::RLIM_INFINITY && want > cur.rlim_max {
            notes.push(format!(
                "limits.{name}: {want} lowered to the inherited hard limit {}",
                cur.rlim_max
            ));
            cur.rlim_max
        } else {
            want
        };
        // CPU: SIGXCPU at the limit (a program may stop cleanly, and the
        // call can say what ended it), SIGKILL a few seconds later.
        let max = match res {
            libc::RLIMIT_CPU if cur.rlim_max == libc::RLIM_INFINITY => v.saturating_add(CPU_GRACE),
            libc::RLIMIT_CPU => v.saturating_add(CPU_GRACE).min(cur.rlim_max),
            _ => v,
        };
        out.push((
            res,
            libc::rlimit {
                rlim_cur: v,
                rlim_max: max,
            },
        ));
    }
    (out, notes)
}

/// Decide whether the enforcement we can get is enough for the grant.
pub(super) fn check_enforcement(
    grant: &Grant,
    report: &EnforcementReport,
) -> Result<(), SandboxError> {
    match grant.enforcement {
        Enforcement::Degraded => Ok(()),
        Enforcement::Standard => {
            if report.landlock.status == LandlockStatus::NotEnforced {
                Err(SandboxError::NotEnforceable(
                    "Landlock is not available on this kernel".into(),
                ))
            } else if report.degraded.iter().any(|d| d.contains("TCP port rules")) {
                Err(SandboxError::NotEnforceable(report.degraded.join("; ")))
            } else {
                Ok(())
            }
        }
        Enforcement::Strict => {
            if report.degraded.is_empty() && report.landlock.status != LandlockStatus::NotEnforced {
                Ok(())
            } else if report.landlock.status == LandlockStatus::NotEnforced {
                Err(SandboxError::NotEnforceable(
                    "Landlock is not available on this kernel (strict enforcement)".into(),
                ))
            } else {
                Err(SandboxError::NotEnforceable(format!(
                    "strict enforcement refuses degraded features: {}",
                    report.degraded.join("; ")
                )))
            }
        }
    }
}
