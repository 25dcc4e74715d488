//! The seccomp filter, compiled to BPF in the parent before fork.
//!
//! One program (see [`super::bpf`]): any process of a foreign architecture
//! is killed; the deny list below gets EPERM; `clone3` and `openat2` return
//! ENOSYS (so libc falls back to `clone` and `openat`, whose arguments we can
//! inspect); and the x32 syscall ABI is refused, which would otherwise
//! bypass a filter keyed on x86_64 syscall numbers.

use super::bpf;
use seccompiler::{SeccompCmpArgLen as Len, SeccompCmpOp as Op, SeccompCondition, SeccompRule};
use std::collections::BTreeMap;
use toolcage_policy::Network;

/// Syscalls denied with EPERM whatever the grant says.
const ALWAYS_DENIED: &[(i64, &str)] = &[
    (libc::SYS_ptrace, "ptrace"),
    (libc::SYS_process_vm_readv, "process_vm_readv"),
    (libc::SYS_process_vm_writev, "process_vm_writev"),
    (libc::SYS_io_uring_setup, "io_uring_setup"),
    (libc::SYS_io_uring_enter, "io_uring_enter"),
    (libc::SYS_io_uring_register, "io_uring_register"),
    (libc::SYS_unshare, "unshare"),
    (libc::SYS_setns, "setns"),
    (libc::SYS_mount, "mount"),
    (libc::SYS_umount2, "umount2"),
    (libc::SYS_pivot_root, "pivot_root"),
    (libc::SYS_chroot, "chroot"),
    (libc::SYS_move_mount, "move_mount"),
    (libc::SYS_open_tree, "open_tree"),
    (libc::SYS_fsopen, "fsopen"),
    (libc::SYS_fsconfig, "fsconfig"),
    (libc::SYS_fsmount, "fsmount"),
    (libc::SYS_fspick, "fspick"),
    (libc::SYS_mount_setattr, "mount_setattr"),
    (libc::SYS_bpf, "bpf"),
    (libc::SYS_perf_event_open, "perf_event_open"),
    (libc::SYS_keyctl, "keyctl"),
    (libc::SYS_add_key, "add_key"),
    (libc::SYS_request_key, "request_key"),
    (libc::SYS_userfaultfd, "userfaultfd"),
    (libc::SYS_kexec_load, "kexec_load"),
    (libc::SYS_kexec_file_load, "kexec_file_load"),
    (libc::SYS_init_module, "init_module"),
    (libc::SYS_finit_module, "finit_module"),
    (libc::SYS_delete_module, "delete_module"),
    (libc::SYS_acct, "acct"),
    (libc::SYS_swapon, "swapon"),
    (libc::SYS_swapoff, "swapoff"),
    (libc::SYS_reboot, "reboot"),
    (libc::SYS_open_by_handle_at, "open_by_handle_at"),
    (libc::SYS_quotactl, "quotactl"),
    (libc::SYS_syslog, "syslog"),
    (libc::SYS_pidfd_getfd, "pidfd_getfd"),
    (libc::SYS_fanotify_init, "fanotify_init"),
    (libc::SYS_vhangup, "vhangup"),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_iopl, "iopl"),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_ioperm, "ioperm"),
];

/// Syscalls that take a file mode, with the index of the mode argument.
const MODE_SYSCALLS: &[(i64, u8)] = &[
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_chmod, 1),
    (libc::SYS_fchmod, 1),
    (libc::SYS_fchmodat, 2),
    (libc::SYS_fchmodat2, 2),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_creat, 1),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_mkdir, 1),
    (libc::SYS_mkdirat, 2),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_mknod, 1),
    (libc::SYS_mknodat, 2),
];

/// Opening syscalls: (number, flags argument, mode argument).
const OPEN_SYSCALLS: &[(i64, u8, u8)] = &[
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_open, 1, 2),
    (libc::SYS_openat, 2, 3),
];

/// Namespace-creating clone flags (all fit in the low 32 bits).
const NAMESPACE_FLAGS: &[u64] = &[
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWCGROUP as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
];

fn cond(arg: u8, len: Len, op: Op, value: u64) -> SeccompCondition {
    SeccompCondition::new(arg, len, op, value).expect("valid seccomp condition")
}

fn rule(conds: Vec<SeccompCondition>) -> SeccompRule {
    SeccompRule::new(conds).expect("non-empty seccomp rule")
}

/// Socket types (the low 4 bits of `type`) other than the allowed ones.
fn deny_types_except(allowed: &[u64]) -> Vec<SeccompRule> {
    (0..16u64)
        .filter(|t| !allowed.contains(t))
        .map(|t| rule(vec![cond(1, Len::Dword, Op::MaskedEq(0xf), t)]))
        .collect()
}

/// Build the deny-list rules for a network mode. Public for tests.
pub fn rules(network: &Network) -> BTreeMap<i64, Vec<SeccompRule>> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for (nr, _) in ALWAYS_DENIED {
        rules.insert(*nr, vec![]);
    }
    // Terminal injection: compare the low 32 bits of the request.
    rules.insert(
        libc::SYS_ioctl,
        [libc::TIOCSTI, libc::TIOCLINUX]
            .iter()
            .map(|req| rule(vec![cond(1, Len::Dword, Op::Eq, *req)]))
            .collect(),
    );
    rules.insert(
        libc::SYS_clone,
        NAMESPACE_FLAGS
            .iter()
            .map(|f| rule(vec![cond(0, Len::Dword, Op::MaskedEq(*f), *f)]))
            .collect(),
    );
    // No setuid or setgid bits, ever: in a mode given to chmod, or in the
    // mode of a file or directory being created (a setuid shell planted in
    // a project would run as its owner for any local user). `openat2`'s mode
    // is inside a struct the filter cannot read: it gets ENOSYS (guard
    // program) so libc falls back to `openat`.
    let mode_has_setid = |arg: u8| -> Vec<SeccompRule> {
        [libc::S_ISUID as u64, libc::S_ISGID as u64]
            .iter()
            .map(|bit| rule(vec![cond(arg, Len::Dword, Op::MaskedEq(*bit), *bit)]))
            .collect()
    };
    for (nr, mode_arg) in MODE_SYSCALLS {
        rules.insert(*nr, mode_has_setid(*mode_arg));
    }
    // open/openat: the mode counts only with O_CREAT or O_TMPFILE (otherwise
    // the register holds whatever the caller left there).
    let creating = [
        libc::O_CREAT as u64,
        libc::O_TMPFILE as u64 & !(libc::O_DIRECTORY as u64),
    ];
    for (nr, flags_arg, mode_arg) in OPEN_SYSCALLS {
        let mut r = Vec::new();
        for create in creating {
            for bit in [libc::S_ISUID as u64, libc::S_ISGID as u64] {
                r.push(rule(vec![
                    cond(*flags_arg, Len::Dword, Op::MaskedEq(create), create),
                    cond(*mode_arg, Len::Dword, Op::MaskedEq(bit), bit),
                ]));
            }
        }
        rules.insert(*nr, r);
    }
    let stream = libc::SOCK_STREAM as u64;
    let seqpacket = libc::SOCK_SEQPACKET as u64;
    let unix = libc::AF_UNIX as u64;
    match network {
        Network::On => {}
        Network::Off => {
            // AF_UNIX stream/seqpacket only, and no connect(): without
            // Landlock ABI 9 nothing else stops a connect to a host socket
            // such as the docker or dbus socket, or an abstract one.
            let mut socket = vec![rule(vec![cond(0, Len::Dword, Op::Ne, unix)])];
            socket.extend(deny_types_except(&[stream, seqpacket]));
            rules.insert(libc::SYS_socket, socket);
            let mut pair = vec![rule(vec![cond(0, Len::Dword, Op::Ne, unix)])];
            pair.extend(deny_types_except(&[stream, seqpacket]));
            rules.insert(libc::SYS_socketpair, pair);
            rules.insert(libc::SYS_connect, vec![]);
        }
        Network::Tcp { bind, .. } => {
            // TCP over IPv4/IPv6 only (ports are Landlock's job); no UDP, no
            // raw, no MPTCP, and no AF_UNIX sockets except connected pairs.
            let inet = libc::AF_INET as u64;
            let inet6 = libc::AF_INET6 as u64;
            let mut socket = vec![rule(vec![
                cond(0, Len::Dword, Op::Ne, inet),
                cond(0, Len::Dword, Op::Ne, inet6),
            ])];
            socket.extend(deny_types_except(&[stream]));
            socket.push(rule(vec![
                cond(2, Len::Dword, Op::Ne, 0),
                cond(2, Len::Dword, Op::Ne, libc::IPPROTO_TCP as u64),
            ]));
            rules.insert(libc::SYS_socket, socket);
            let mut pair = vec![rule(vec![cond(0, Len::Dword, Op::Ne, unix)])];
            pair.extend(deny_types_except(&[stream, seqpacket]));
            rules.insert(libc::SYS_socketpair, pair);
            // TCP Fast Open connects from sendto/sendmsg without going
            // through connect(2), and Landlock's port rules only hook
            // connect(2): MSG_FASTOPEN would reach any port.
            let fastopen = libc::MSG_FASTOPEN as u64;
            let tfo = |arg: u8| {
                vec![rule(vec![cond(
                    arg,
                    Len::Dword,
                    Op::MaskedEq(fastopen),
                    fastopen,
                )])]
            };
            rules.insert(libc::SYS_sendto, tfo(3));
            rules.insert(libc::SYS_sendmsg, tfo(2));
            rules.insert(libc::SYS_sendmmsg, tfo(3));
            // listen() on an unbound socket binds an ephemeral port itself,
            // which Landlock's bind rules never see: with no port to bind,
            // no listening at all.
            if bind.is_empty() {
                rules.insert(libc::SYS_listen, vec![]);
            }
        }
        Network::Domains(_) => {
            // TCP and UDP over IPv4/IPv6, in the call's own network
            // namespace where only loopback exists (the proxy, the DNS stub
            // and the capture listeners are toolcage's). No raw, ICMP,
            // SCTP or MPTCP sockets; no netlink (nothing to configure), no
            // vsock (not namespaced); AF_UNIX only as connected pairs, so no
            // host socket in a granted directory can be reached by path.
            let inet = libc::AF_INET as u64;
            let inet6 = libc::AF_INET6 as u64;
            let dgram = libc::SOCK_DGRAM as u64;
            let mut socket = vec![rule(vec![
                cond(0, Len::Dword, Op::Ne, inet),
                cond(0, Len::Dword, Op::Ne, inet6),
            ])];
            socket.extend(deny_types_except(&[stream, dgram]));
            socket.push(rule(vec![
                cond(2, Len::Dword, Op::Ne, 0),
                cond(2, Len::Dword, Op::Ne, libc::IPPROTO_TCP as u64),
                cond(2, Len::Dword, Op::Ne, libc::IPPROTO_UDP as u64),
            ]));
            rules.insert(libc::SYS_socket, socket);
            let mut pair = vec![rule(vec![cond(0, Len::Dword, Op::Ne, unix)])];
            pair.extend(deny_types_except(&[stream, seqpacket]));
            rules.insert(libc::SYS_socketpair, pair);
        }
    }
    rules
}

/// The program for `network`.
pub fn compile(network: &Network) -> Result<Vec<libc::sock_filter>, String> {
    let mut table = bpf::Table::new(libc::SECCOMP_RET_ALLOW, bpf::errno(libc::EPERM));
    for (nr, rules) in rules(network) {
        table.rules(nr, rules)?;
    }
    table.ret(libc::SYS_clone3, bpf::errno(libc::ENOSYS))?;
    table.ret(libc::SYS_openat2, bpf::errno(libc::ENOSYS))?;
    let x32_bit: u32 = if cfg!(target_arch = "x86_64") {
        0x4000_0000
    } else {
        u32::MAX
    };
    table.at_or_above(x32_bit, bpf::errno(libc::EPERM));
    table.compile()
}

fn stmt(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// Syscalls namespace-free mode turns into no-ops (they return 0 and do
/// nothing): leaving the call's process group, which the sweep kills when
/// the call ends. A daemon that detaches (git's background gc, a build
/// server) keeps working and still dies with the call.
const NAMESPACE_FREE_NOOPS: &[i64] = &[libc::SYS_setsid, libc::SYS_setpgid];

/// Syscalls namespace-free mode refuses with EPERM: host IPC (no IPC
/// namespace), and `listen` with the network off: without a network
/// namespace an abstract socket the tool listens on is reachable from the
/// host (squatting a name such as `@/tmp/.X11-unix/X0`).
fn namespace_free_denied(network_off: bool) -> Vec<i64> {
    let mut nrs = vec![
        libc::SYS_shmget,
        libc::SYS_shmat,
        libc::SYS_shmctl,
        libc::SYS_msgget,
        libc::SYS_msgsnd,
        libc::SYS_msgrcv,
        libc::SYS_msgctl,
        libc::SYS_semget,
        libc::SYS_semop,
        libc::SYS_semtimedop,
        libc::SYS_semctl,
        libc::SYS_mq_open,
        libc::SYS_mq_unlink,
        libc::SYS_mq_timedsend,
        libc::SYS_mq_timedreceive,
        libc::SYS_mq_notify,
        libc::SYS_mq_getsetattr,
    ];
    if network_off {
        nrs.push(libc::SYS_listen);
    }
    nrs
}

/// The extra program for namespace-free mode: [`NAMESPACE_FREE_NOOPS`]
/// return 0, each syscall of [`namespace_free_denied`] gets EPERM,
/// everything else is left to the other programs (the main one also checks
/// the architecture).
pub fn namespace_free_program(network: &Network) -> Vec<libc::sock_filter> {
    const LD_W_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
    const JEQ: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
    const RET: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
    let denied = namespace_free_denied(*network == Network::Off);
    let checks: Vec<(i64, bool)> = NAMESPACE_FREE_NOOPS
        .iter()
        .map(|nr| (*nr, true))
        .chain(denied.iter().map(|nr| (*nr, false)))
        .collect();
    // Layout: load; one jump per check; ALLOW; EPERM; RETURN-0. The check
    // at position p (1-based) jumps `n - p + 1` ahead to EPERM, or one
    // further to RETURN-0.
    let n = checks.len();
    let mut prog = vec![stmt(LD_W_ABS, 0)];
    for (i, (nr, noop)) in checks.iter().enumerate() {
        let to_eperm = n - i;
        prog.push(jump(
            JEQ,
            *nr as u32,
            (to_eperm + usize::from(*noop)) as u8,
            0,
        ));
    }
    prog.push(stmt(RET, libc::SECCOMP_RET_ALLOW));
    prog.push(stmt(
        RET,
        libc::SECCOMP_RET_ERRNO | (libc::EPERM as u32 & libc::SECCOMP_RET_DATA),
    ));
    // SECCOMP_RET_ERRNO with 0: the syscall is skipped and returns 0.
    prog.push(stmt(RET, libc::SECCOMP_RET_ERRNO));
    prog
}

/// The names of the always-denied syscalls, for the enforcement report.
pub fn denied_names() -> impl Iterator<Item = &'static str> {
    ALWAYS_DENIED.iter().map(|(_, n)| *n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compiles_for_every_network_mode() {
        for net in [
            Network::Off,
            Network::On,
            Network::Tcp {
                connect: vec![443],
                bind: vec![],
            },
        ] {
            assert!(compile(&net).unwrap().len() > 10);
        }
    }

    #[test]
    fn tcp_mode_denies_fast_open() {
        let tcp = Network::Tcp {
            connect: vec![443],
            bind: vec![],
        };
        for nr in [libc::SYS_sendto, libc::SYS_sendmsg, libc::SYS_sendmmsg] {
            assert!(rules(&tcp).contains_key(&nr));
        }
    }

    #[test]
    fn network_off_denies_connect_and_on_does_not() {
        assert!(rules(&Network::Off).contains_key(&libc::SYS_connect));
        assert!(!rules(&Network::On).contains_key(&libc::SYS_connect));
        assert!(!rules(&Network::On).contains_key(&libc::SYS_socket));
    }
}
