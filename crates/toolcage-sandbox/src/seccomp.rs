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
    // Act on a process through a pidfd, whose owner the filter cannot see:
    // another process's memory (process_madvise; it also needs
    // CAP_SYS_NICE, never held), or reaping a dying one (process_mrelease,
    // which checks no permission at all). Nothing a tool does needs them.
    (libc::SYS_process_madvise, "process_madvise"),
    (libc::SYS_process_mrelease, "process_mrelease"),
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

/// `sizeof(struct sockaddr_in)` and `sizeof(struct sockaddr_in6)`: the
/// lengths a TCP bind passes.
const INET_ADDR_LEN: u64 = std::mem::size_of::<libc::sockaddr_in>() as u64;
const INET6_ADDR_LEN: u64 = std::mem::size_of::<libc::sockaddr_in6>() as u64;

/// The deny-list rules of one call: system call → the argument patterns
/// it is refused with (empty: always refused).
type Rules = BTreeMap<i64, Vec<SeccompRule>>;

/// Build the deny-list rules for a network mode: what every call is
/// refused, then what its network mode adds. Public for tests.
pub(crate) fn rules(network: &Network) -> Rules {
    let mut rules = Rules::new();
    always_denied(&mut rules);
    no_setid_modes(&mut rules);
    match network {
        Network::On => {}
        Network::Off => network_off(&mut rules),
        Network::Tcp { bind, .. } => network_tcp(&mut rules, !bind.is_empty()),
        Network::Domains(_) => network_domains(&mut rules),
    }
    rules
}

/// The system calls no call may make, the terminal ioctls, and clone
/// with a namespace flag.
fn always_denied(rules: &mut Rules) {
    for (nr, _) in ALWAYS_DENIED {
        rules.insert(*nr, vec![]);
    }
    // Terminal injection (TIOCSTI, TIOCLINUX) and a terminal left without
    // its line discipline after the call (TIOCSETD): compare the low 32
    // bits of the request.
    rules.insert(
        libc::SYS_ioctl,
        [libc::TIOCSTI, libc::TIOCLINUX, libc::TIOCSETD]
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
}

/// No setuid or setgid bits, ever: in a mode given to chmod, or in the
/// mode of a file or directory being created (a setuid shell planted in
/// a project would run as its owner for any local user). `openat2`'s mode
/// is inside a struct the filter cannot read: it gets ENOSYS (guard
/// program) so libc falls back to `openat`.
fn no_setid_modes(rules: &mut Rules) {
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
}

/// AF_UNIX sockets only as connected pairs (stream or seqpacket).
fn unix_pairs_only() -> Vec<SeccompRule> {
    let unix = libc::AF_UNIX as u64;
    let (stream, seqpacket) = (libc::SOCK_STREAM as u64, libc::SOCK_SEQPACKET as u64);
    let mut pair = vec![rule(vec![cond(0, Len::Dword, Op::Ne, unix)])];
    pair.extend(deny_types_except(&[stream, seqpacket]));
    pair
}

/// Network off: AF_UNIX stream/seqpacket only, and no connect().
fn network_off(rules: &mut Rules) {
    let unix = libc::AF_UNIX as u64;
    let (stream, seqpacket) = (libc::SOCK_STREAM as u64, libc::SOCK_SEQPACKET as u64);
    // AF_UNIX stream/seqpacket only, and no connect(): without
    // Landlock ABI 9 nothing else stops a connect to a host socket
    // such as the docker or dbus socket, or an abstract one.
    let mut socket = vec![rule(vec![cond(0, Len::Dword, Op::Ne, unix)])];
    socket.extend(deny_types_except(&[stream, seqpacket]));
    rules.insert(libc::SYS_socket, socket);
    rules.insert(libc::SYS_socketpair, unix_pairs_only());
    rules.insert(libc::SYS_connect, vec![]);
}

/// Network mode "tcp": TCP only, no Fast Open, and binds only where the
/// grant has bind ports.
fn network_tcp(rules: &mut Rules, bind_ports: bool) {
    let stream = libc::SOCK_STREAM as u64;
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
    rules.insert(libc::SYS_socketpair, unix_pairs_only());
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
    if !bind_ports {
        rules.insert(libc::SYS_listen, vec![]);
    }
    // The call shares the host's network namespace, so an abstract
    // name bound by an end of a socketpair is the host's (a squat
    // on `@/tmp/.X11-unix/X0`). The filter cannot read the address:
    // with no bind port, no bind at all (a TCP client needs none);
    // with bind ports, only an address the size of a sockaddr_in or
    // sockaddr_in6 (an abstract name of exactly 13 or 25 bytes is
    // the one left; Landlock checks the port).
    let bind_rules = if !bind_ports {
        vec![]
    } else {
        vec![rule(vec![
            cond(2, Len::Dword, Op::Ne, INET_ADDR_LEN),
            cond(2, Len::Dword, Op::Ne, INET6_ADDR_LEN),
        ])]
    };
    rules.insert(libc::SYS_bind, bind_rules);
}

/// Domain mode: TCP and UDP in the call's own network namespace.
fn network_domains(rules: &mut Rules) {
    let stream = libc::SOCK_STREAM as u64;
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
    rules.insert(libc::SYS_socketpair, unix_pairs_only());
}

/// The program for `network`.
pub(crate) fn compile(network: &Network) -> Result<Vec<libc::sock_filter>, String> {
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

/// Syscalls namespace-free mode turns into no-ops (they return 0 and do
/// nothing): leaving the call's process group, which the sweep kills when
/// the call ends. A daemon that detaches (git's background gc, a build
/// server) keeps working and still dies with the call.
const NAMESPACE_FREE_NOOPS: &[i64] = &[libc::SYS_setsid, libc::SYS_setpgid];

/// Syscalls namespace-free mode refuses with EPERM: host IPC (no IPC
/// namespace), and with the network off `listen` and `bind`: without a
/// network namespace an abstract socket name the tool binds is the host's
/// (squatting `@/tmp/.X11-unix/X0` keeps the real server from starting),
/// and the filter cannot read the address to tell an abstract name from a
/// path. With `connect` and `listen` refused and only AF_UNIX stream and
/// seqpacket sockets allowed, a bound socket could do nothing else.
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
        nrs.extend([libc::SYS_listen, libc::SYS_bind]);
    }
    nrs
}

/// Syscalls that change another process named by a pid in argument 0,
/// where 0 means the caller. Namespace-free the host's pids are visible,
/// and the kernel lets a process change any process of the same user
/// (toolcage itself, the operator's shell): an affinity of one CPU or
/// SCHED_IDLE starves it, moving its pages or reading its robust-futex
/// list (an address) reaches into it. Landlock does not hook the
/// scheduler calls.
const OTHER_PROCESS_PID0: &[(i64, &str)] = &[
    (libc::SYS_sched_setaffinity, "sched_setaffinity"),
    (libc::SYS_sched_setscheduler, "sched_setscheduler"),
    (libc::SYS_sched_setparam, "sched_setparam"),
    (libc::SYS_sched_setattr, "sched_setattr"),
    (libc::SYS_migrate_pages, "migrate_pages"),
    (libc::SYS_move_pages, "move_pages"),
    (libc::SYS_get_robust_list, "get_robust_list"),
];

/// `setpriority`'s and `ioprio_set`'s `which` for every process of a user
/// (`PRIO_USER`, `IOPRIO_WHO_USER`): with `who` 0 that is the caller's
/// own user, so the host's processes too.
const PRIO_USER: u64 = 2;
const IOPRIO_WHO_USER: u64 = 3;

/// The rules of the namespace-free program: each syscall gets EPERM when
/// one of its rules matches (always, with none). Public for tests.
pub(crate) fn namespace_free_rules(network: &Network) -> BTreeMap<i64, Vec<SeccompRule>> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for nr in namespace_free_denied(*network == Network::Off) {
        rules.insert(nr, vec![]);
    }
    // The kernel reads a pid as 32 bits: compare the low half.
    let not_self = |arg: u8| cond(arg, Len::Dword, Op::Ne, 0);
    for (nr, _) in OTHER_PROCESS_PID0 {
        rules.insert(*nr, vec![rule(vec![not_self(0)])]);
    }
    // prlimit64(pid, resource, new, old): setting another process's limit
    // (lowering toolcage's RLIMIT_FSIZE kills it with SIGXFSZ). Reading
    // one (new == NULL) shows what /proc/PID/limits shows anyone.
    rules.insert(
        libc::SYS_prlimit64,
        vec![rule(vec![not_self(0), cond(2, Len::Qword, Op::Ne, 0)])],
    );
    // setpriority(which, who, prio) and ioprio_set(which, who, prio):
    // `who` 0 is the caller, its process group (the call's own) or, for
    // the user variant, every process of the user.
    for (nr, user) in [
        (libc::SYS_setpriority, PRIO_USER),
        (libc::SYS_ioprio_set, IOPRIO_WHO_USER),
    ] {
        rules.insert(
            nr,
            vec![
                rule(vec![not_self(1)]),
                rule(vec![cond(0, Len::Dword, Op::Eq, user)]),
            ],
        );
    }
    rules
}

/// The extra program for namespace-free mode: [`NAMESPACE_FREE_NOOPS`]
/// return 0, the syscalls of [`namespace_free_rules`] get EPERM when a
/// rule matches, everything else is left to the main program.
pub(crate) fn namespace_free_program(network: &Network) -> Result<Vec<libc::sock_filter>, String> {
    let mut table = bpf::Table::new(libc::SECCOMP_RET_ALLOW, bpf::errno(libc::EPERM));
    for nr in NAMESPACE_FREE_NOOPS {
        // SECCOMP_RET_ERRNO with 0: the syscall is skipped and returns 0.
        table.ret(*nr, bpf::errno(0))?;
    }
    for (nr, rules) in namespace_free_rules(network) {
        table.rules(nr, rules)?;
    }
    table.compile()
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
    fn namespace_free_refuses_other_processes_and_keeps_the_callers_own() {
        use crate::bpf::{audit_arch, errno, run};
        let allow = libc::SECCOMP_RET_ALLOW;
        let eperm = errno(libc::EPERM);
        let prog = namespace_free_program(&Network::On).unwrap();
        crate::bpf::check(&prog).unwrap();
        let verdict = |nr: i64, args: [u64; 6]| run(&prog, nr as u32, audit_arch(), &args);
        let ptr = 0x7fff_0000u64;
        // prlimit64(pid, resource, new, old): setting is the caller's only.
        assert_eq!(verdict(libc::SYS_prlimit64, [0, 7, ptr, 0, 0, 0]), allow);
        assert_eq!(verdict(libc::SYS_prlimit64, [4242, 7, ptr, 0, 0, 0]), eperm);
        assert_eq!(verdict(libc::SYS_prlimit64, [4242, 7, 0, ptr, 0, 0]), allow);
        // The kernel reads the low 32 bits of a pid.
        let high = 1u64 << 32;
        assert_eq!(verdict(libc::SYS_prlimit64, [high, 7, ptr, 0, 0, 0]), allow);
        assert_eq!(
            verdict(libc::SYS_prlimit64, [high | 5, 7, ptr, 0, 0, 0]),
            eperm
        );
        for (nr, _) in OTHER_PROCESS_PID0 {
            assert_eq!(verdict(*nr, [0, 8, ptr, 0, 0, 0]), allow, "{nr}");
            assert_eq!(verdict(*nr, [4242, 8, ptr, 0, 0, 0]), eperm, "{nr}");
        }
        for (nr, user) in [(libc::SYS_setpriority, 2), (libc::SYS_ioprio_set, 3)] {
            assert_eq!(verdict(nr, [1, 0, 10, 0, 0, 0]), allow, "{nr}");
            assert_eq!(verdict(nr, [1, 4242, 10, 0, 0, 0]), eperm, "{nr}");
            assert_eq!(verdict(nr, [user, 0, 10, 0, 0, 0]), eperm, "{nr}");
        }
        assert_eq!(verdict(libc::SYS_setsid, [0; 6]), errno(0));
        assert_eq!(verdict(libc::SYS_shmget, [0; 6]), eperm);
        assert_eq!(verdict(libc::SYS_getpid, [0; 6]), allow);
        assert_eq!(verdict(libc::SYS_bind, [3, ptr, 110, 0, 0, 0]), allow);
    }

    #[test]
    fn namespace_free_with_the_network_off_refuses_bind() {
        use crate::bpf::{audit_arch, errno, run};
        let prog = namespace_free_program(&Network::Off).unwrap();
        for nr in [libc::SYS_bind, libc::SYS_listen] {
            assert_eq!(
                run(
                    &prog,
                    nr as u32,
                    audit_arch(),
                    &[3, 0x7fff_0000, 2, 0, 0, 0]
                ),
                errno(libc::EPERM)
            );
        }
        // With a namespace the name is the call's own: only the main
        // program applies, and it leaves bind alone.
        assert!(!rules(&Network::Off).contains_key(&libc::SYS_bind));
    }

    #[test]
    fn tcp_mode_binds_only_inet_addresses_to_bind_ports() {
        use crate::bpf::{audit_arch, errno, run};
        let eperm = errno(libc::EPERM);
        let verdict = |net: &Network, len: u64| {
            let prog = compile(net).unwrap();
            run(
                &prog,
                libc::SYS_bind as u32,
                audit_arch(),
                &[3, 0x7fff_0000, len, 0, 0, 0],
            )
        };
        let client = Network::Tcp {
            connect: vec![443],
            bind: vec![],
        };
        let server = Network::Tcp {
            connect: vec![],
            bind: vec![8080],
        };
        // An abstract name (`\0` and 18 bytes: 21) never; no bind at all
        // without bind ports.
        for len in [16, 21, 28] {
            assert_eq!(verdict(&client, len), eperm, "{len}");
        }
        assert_eq!(verdict(&server, 21), eperm);
        assert_eq!(verdict(&server, 110), eperm);
        // Controls: a TCP bind of IPv4 or IPv6 with bind ports; any bind
        // with the network on.
        assert_eq!(verdict(&server, 16), libc::SECCOMP_RET_ALLOW);
        assert_eq!(verdict(&server, 28), libc::SECCOMP_RET_ALLOW);
        assert_eq!(verdict(&Network::On, 21), libc::SECCOMP_RET_ALLOW);
    }

    #[test]
    fn network_off_denies_connect_and_on_does_not() {
        assert!(rules(&Network::Off).contains_key(&libc::SYS_connect));
        assert!(!rules(&Network::On).contains_key(&libc::SYS_connect));
        assert!(!rules(&Network::On).contains_key(&libc::SYS_socket));
    }
}
