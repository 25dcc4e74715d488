//! Which isolation a call gets: namespaces (a constructed root in its own
//! mount, PID, IPC, UTS and network namespaces) or, where the kernel or a
//! container runtime refuses namespaces, the namespace-free mode (Landlock,
//! seccomp, rlimits, dropped capabilities and a process-group sweep).
//!
//! [`decide`] says, for one grant, what namespace-free mode would lack and
//! what compensates each part, and whether the grant's policy accepts it.

pub use super::isolation::{IsolationMode, Lack};
use serde::Serialize;
use toolcage_policy::{Enforcement, Grant, NamespaceFree, Network};

/// The mode a grant will run in on this host, and what it lacks there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModeDecision {
    pub mode: IsolationMode,
    pub lacking: Vec<Lack>,
    /// Why the grant will not run here (its policy refuses what it lacks).
    pub refusal: Option<String>,
}

/// What the host offers that the decision depends on.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HostFeatures {
    /// The sandbox's namespaces can be created.
    pub namespaces: bool,
    /// Landlock ABI (0: none).
    pub landlock_abi: i32,
}

/// What namespace-free mode lacks for `grant`, each with its compensation.
pub(crate) fn lacks(grant: &Grant, landlock_abi: i32) -> Vec<Lack> {
    let scoped = landlock_abi >= 6;
    let mut out = vec![Lack {
        id: "pid",
        part: "PID namespace (processes the call starts could outlive it)".into(),
        compensated_by: scoped.then(|| {
            "seccomp pins the process group (setsid and setpgid are no-ops); toolcage kills the \
             group and a subreaper reaps every descendant before the call returns; Landlock \
             scoping stops signals to processes outside the sandbox; seccomp refuses changing \
             another process's limits, scheduling and priorities (a pid other than 0)"
                .into()
        }),
    }];
    out.push(Lack {
        id: "ipc",
        part: "IPC namespace (host SysV IPC and POSIX message queues)".into(),
        compensated_by: Some(
            "seccomp refuses SysV shared memory, semaphores, message queues and POSIX mqueues"
                .into(),
        ),
    });
    match grant.network {
        Network::Off => out.push(Lack {
            id: "network",
            part: "network namespace (the host's loopback and unix sockets)".into(),
            compensated_by: Some(
                "seccomp: AF_UNIX stream sockets only, connect(), listen() and bind() refused"
                    .into(),
            ),
        }),
        Network::On => out.push(Lack {
            id: "unix-sockets",
            part: "constructed root (host unix sockets reachable by path, e.g. the docker or \
                   dbus socket)"
                .into(),
            compensated_by: (landlock_abi >= 9)
                .then(|| "Landlock resolves unix socket paths (ABI 9)".into()),
        }),
        Network::Tcp { .. } => out.push(Lack {
            id: "unix-sockets",
            part: "constructed root (host unix sockets reachable by path)".into(),
            compensated_by: Some("seccomp allows AF_UNIX only as connected pairs".into()),
        }),
        Network::Domains(_) => out.push(Lack {
            id: "network",
            part: "network namespace (domain mode needs the call's own: without it the call \
                   would reach the host's network directly)"
                .into(),
            compensated_by: None,
        }),
    }
    if grant
        .denied
        .iter()
        .any(|p| grant.write.iter().any(|w| p.starts_with(w) && p != w))
    {
        out.push(Lack {
            id: "denied",
            part: "denied paths inside write roots are readable (Landlock cannot take read \
                   rights back beneath a granted directory; they are restored after the call)"
                .into(),
            compensated_by: None,
        });
    }
    if !protected_inside_write_roots(grant).is_empty() {
        out.push(Lack {
            id: "protected",
            part: "read-only protected paths inside write roots (Landlock cannot take rights \
                   back beneath a granted directory)"
                .into(),
            compensated_by: Some(
                "saved before the call and restored after it: first what decides what runs \
                 later (agent, editor and tool config; a .git's config, hooks and info), \
                 with a copy budget of its own (64 MiB), then the rest of a .git (objects, \
                 refs: 32 MiB, 100000 entries); files up to 4 MiB each are copied; what the \
                 call adds there is removed; a change toolcage cannot undo fails the call \
                 (exit 125)"
                    .into(),
            ),
        });
    }
    out.push(Lack {
        id: "metadata",
        part: "constructed root (paths outside the grant are visible to stat, and chmod, \
               utimes and xattrs work on files the user owns that the grant does not let it \
               write: Landlock does not hook them)"
            .into(),
        compensated_by: None,
    });
    out.push(Lack {
        id: "proc",
        part: "private /proc (the host's /proc is readable: other processes' command lines; \
               their environment and memory stay guarded by Landlock's ptrace scope; a \
               write grant on /proc is read-only)"
            .into(),
        compensated_by: None,
    });
    out
}

/// Protected paths that lie beneath a write root.
pub(crate) fn protected_inside_write_roots(grant: &Grant) -> Vec<std::path::PathBuf> {
    grant
        .protected
        .iter()
        .filter(|p| grant.write.iter().any(|w| p.starts_with(w) && *p != w))
        .cloned()
        .collect()
}

/// The mode `grant` runs in on a host with `host`'s features.
pub(crate) fn decide(grant: &Grant, host: HostFeatures, why_no_namespaces: &str) -> ModeDecision {
    if host.namespaces {
        return ModeDecision {
            mode: IsolationMode::Namespaces,
            lacking: Vec::new(),
            refusal: None,
        };
    }
    let lacking = lacks(grant, host.landlock_abi);
    let policy = &grant.namespace_free;
    // Strict enforcement (`ci`) fails closed on any degradation it did not
    // accept by name: "allow" cannot widen that (as `--allow-degraded`
    // cannot), so it counts as "compensated" with the accepted gaps.
    let strict = grant.enforcement == Enforcement::Strict;
    let mode = match policy.mode {
        NamespaceFree::Allow if strict => NamespaceFree::Compensated,
        m => m,
    };
    let refusal = match mode {
        // Never the host's network instead: nothing could filter it.
        _ if matches!(grant.network, Network::Domains(_)) => Some(format!(
            "{why_no_namespaces}; network mode \"domains\" needs the call's own network \
             namespace (its proxy and DNS stub listen there), and toolcage never falls back to \
             the host's network: use network mode \"on\" or \"off\" here, or run where \
             namespaces are available (toolcage doctor)"
        )),
        NamespaceFree::Allow => None,
        NamespaceFree::Refuse => Some(format!(
            "{why_no_namespaces}; this policy refuses namespace-free mode ([sandbox] \
             namespace_free = \"refuse\"), which here would leave {}: pass --allow-degraded to \
             run with those gaps, or use a policy that accepts them (e.g. --profile default)",
            lacking.iter().map(|l| l.id).collect::<Vec<_>>().join(", ")
        )),
        NamespaceFree::Compensated => {
            let open: Vec<&str> = lacking
                .iter()
                .filter(|l| l.compensated_by.is_none() && !policy.accepts.iter().any(|a| a == l.id))
                .map(|l| l.id)
                .collect();
            (!open.is_empty()).then(|| {
                let setting = match policy.mode {
                    NamespaceFree::Allow => "namespace_free = \"allow\" under enforcement = \"strict\", which accepts only",
                    _ => "namespace_free = \"compensated\",",
                };
                format!(
                    "{why_no_namespaces}; namespace-free mode would leave {} uncompensated \
                     (see toolcage doctor), which this policy does not accept ([sandbox] \
                     {setting} namespace_free_accepts = [{}])",
                    open.join(", "),
                    policy
                        .accepts
                        .iter()
                        .map(|a| format!("\"{a}\""))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })
        }
    };
    ModeDecision {
        mode: IsolationMode::NamespaceFree,
        lacking,
        refusal,
    }
}

/// [`decide`] for this host as [`super::probe`] found it.
pub fn decide_here(grant: &Grant, host: &super::probe::HostSupport) -> ModeDecision {
    let why = match &host.namespaces {
        Ok(()) => String::new(),
        Err(block) => block.message(),
    };
    decide(
        grant,
        HostFeatures {
            namespaces: host.namespaces.is_ok(),
            landlock_abi: host.landlock_abi,
        },
        &why,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;
    use toolcage_policy::NamespaceFreePolicy;

    fn grant(mode: NamespaceFree, accepts: &[&str]) -> Grant {
        let mut g = Grant::closed(PathBuf::from("/p"));
        g.write = vec![PathBuf::from("/p")];
        g.protected = vec![PathBuf::from("/p/.git")];
        g.namespace_free = NamespaceFreePolicy {
            mode,
            accepts: accepts.iter().map(|s| s.to_string()).collect(),
        };
        g
    }

    const NO_NS: HostFeatures = HostFeatures {
        namespaces: false,
        landlock_abi: 7,
    };

    #[test]
    fn namespaces_available_lack_nothing() {
        let d = decide(
            &grant(NamespaceFree::Refuse, &[]),
            HostFeatures {
                namespaces: true,
                landlock_abi: 7,
            },
            "",
        );
        assert_eq!(d.mode, IsolationMode::Namespaces);
        assert!(d.lacking.is_empty() && d.refusal.is_none());
    }

    #[test]
    fn compensated_accepts_only_listed_gaps() {
        let d = decide(
            &grant(NamespaceFree::Compensated, &["metadata", "proc"]),
            NO_NS,
            "x",
        );
        assert_eq!(d.refusal, None);
        assert!(d.lacking.iter().any(|l| l.id == "protected"));
        let d = decide(&grant(NamespaceFree::Compensated, &["proc"]), NO_NS, "x");
        let r = d.refusal.expect("metadata is not accepted");
        assert!(r.contains("metadata") && !r.contains("proc,"), "{r}");
    }

    #[test]
    fn old_landlock_leaves_the_process_tree_uncompensated() {
        let old = HostFeatures {
            namespaces: false,
            landlock_abi: 5,
        };
        let d = decide(
            &grant(NamespaceFree::Compensated, &["metadata", "proc"]),
            old,
            "x",
        );
        assert!(d.refusal.expect("refused").contains("pid"));
    }

    #[test]
    fn host_network_lacks_unix_socket_confinement_before_abi_9() {
        let mut g = grant(NamespaceFree::Compensated, &["metadata", "proc"]);
        g.network = Network::On;
        let d = decide(&g, NO_NS, "x");
        assert!(d.refusal.expect("refused").contains("unix-sockets"));
    }

    #[test]
    fn strict_enforcement_keeps_allow_to_the_accepted_gaps() {
        let mut g = grant(NamespaceFree::Allow, &["metadata", "proc"]);
        g.enforcement = Enforcement::Strict;
        let d = decide(&g, NO_NS, "why");
        let open: Vec<&str> = lacks(&g, NO_NS.landlock_abi)
            .iter()
            .filter(|l| l.compensated_by.is_none() && !["metadata", "proc"].contains(&l.id))
            .map(|l| l.id)
            .collect();
        // Whatever is left open beyond the accepted gaps refuses the call.
        assert_eq!(
            d.refusal.is_some(),
            !open.is_empty(),
            "{:?} {open:?}",
            d.refusal
        );
        if let Some(r) = d.refusal {
            assert!(r.contains("under enforcement = \"strict\""), "{r}");
        }
        // Accepting nothing under strict: refused, where plain allow runs.
        let mut g = grant(NamespaceFree::Allow, &[]);
        assert!(decide(&g, NO_NS, "why").refusal.is_none());
        g.enforcement = Enforcement::Strict;
        assert!(decide(&g, NO_NS, "why").refusal.is_some());
    }

    #[test]
    fn refuse_and_allow() {
        let refusal = decide(&grant(NamespaceFree::Refuse, &[]), NO_NS, "why")
            .refusal
            .expect("refused");
        // It names the gaps and both ways to run anyway.
        assert!(
            refusal.contains("would leave") && refusal.contains("metadata"),
            "{refusal}"
        );
        assert!(
            refusal.contains("--allow-degraded") && refusal.contains("--profile default"),
            "{refusal}"
        );
        assert!(
            decide(&grant(NamespaceFree::Allow, &[]), NO_NS, "why")
                .refusal
                .is_none()
        );
    }
}
