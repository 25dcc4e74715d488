//! One seccomp program from a table of syscall numbers: a binary search
//! over the numbers, each leaf a return or a jump to that syscall's rules.
//!
//! The kernel's cost of a filter is set when it is installed: besides the
//! JIT, it runs the program once per syscall number (and per architecture)
//! to find the numbers it always allows, and skips the filter for them from
//! then on. A linear chain of ~65 syscall checks (what seccompiler emits)
//! made that ~0.3 ms per call; a search takes about seven comparisons per
//! number. Each rule keeps seccompiler's own BPF: a rule block falls through
//! when all its conditions hold and jumps one instruction past its end
//! otherwise, wherever it is placed.

use seccompiler::{BpfProgram, SeccompRule};
use std::collections::BTreeMap;

const LD_W_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
const JA: u16 = (libc::BPF_JMP | libc::BPF_JA) as u16;
const JEQ: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
const JGE: u16 = (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16;
const RET: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
/// Offsets in `struct seccomp_data`.
const NR: u32 = 0;
const ARCH: u32 = 4;
/// The kernel's limit on a program's length.
const MAX_LEN: usize = 4096;
/// The longest rule block seccompiler emits without helper jumps.
const MAX_RULE: usize = 200;
/// Leaves compared one by one; larger ranges are split.
const LINEAR: usize = 3;

/// `AUDIT_ARCH_*` of the architecture toolcage is built for.
pub(crate) const fn audit_arch() -> u32 {
    const BITS64_LE: u32 = 0x8000_0000 | 0x4000_0000;
    if cfg!(target_arch = "x86_64") {
        62 | BITS64_LE
    } else if cfg!(target_arch = "aarch64") {
        183 | BITS64_LE
    } else {
        243 | BITS64_LE // riscv64
    }
}

/// The `SECCOMP_RET_ERRNO` action for `errno`.
pub(crate) const fn errno(errno: i32) -> u32 {
    libc::SECCOMP_RET_ERRNO | (errno as u32 & libc::SECCOMP_RET_DATA)
}

enum Entry {
    Ret(u32),
    /// Rule blocks; the first that matches returns the table's `matched`.
    Rules(Vec<BpfProgram>),
}

/// What each syscall number gets. Any other architecture is killed.
pub(crate) struct Table {
    /// For numbers without an entry.
    default: u32,
    /// When one of a syscall's rules matches.
    matched: u32,
    entries: BTreeMap<u32, Entry>,
    /// Numbers at or above this get the value (a foreign syscall ABI).
    above: Option<(u32, u32)>,
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

/// A leaf of the search: a return, or a jump to rule chain `n`.
#[derive(Clone, Copy)]
enum Leaf {
    Ret(u32),
    Chain(usize),
}

/// An instruction before the chains are placed.
enum Ins {
    Plain(libc::sock_filter),
    ToChain(usize),
}

impl Table {
    pub(crate) fn new(default: u32, matched: u32) -> Table {
        Table {
            default,
            matched,
            entries: BTreeMap::new(),
            above: None,
        }
    }

    fn insert(&mut self, nr: i64, entry: Entry) -> Result<(), String> {
        let nr = u32::try_from(nr).map_err(|_| format!("syscall number {nr} out of range"))?;
        if self.entries.insert(nr, entry).is_some() {
            return Err(format!("syscall {nr} listed twice"));
        }
        Ok(())
    }

    /// `nr` returns `matched` when any rule matches (always, with none).
    pub(crate) fn rules(&mut self, nr: i64, rules: Vec<SeccompRule>) -> Result<(), String> {
        let entry = if rules.is_empty() {
            Entry::Ret(self.matched)
        } else {
            let blocks: Vec<BpfProgram> = rules.into_iter().map(BpfProgram::from).collect();
            // Longer blocks get seccompiler's helper jumps, which assume its
            // own layout of the chains.
            if blocks.iter().any(|b| b.len() > MAX_RULE) {
                return Err(format!("syscall {nr}: a rule with too many conditions"));
            }
            Entry::Rules(blocks)
        };
        self.insert(nr, entry)
    }

    /// `nr` always returns `value`.
    pub(crate) fn ret(&mut self, nr: i64, value: u32) -> Result<(), String> {
        self.insert(nr, Entry::Ret(value))
    }

    /// Every number at or above `bound` returns `value`.
    pub(crate) fn at_or_above(&mut self, bound: u32, value: u32) {
        self.above = Some((bound, value));
    }

    /// The program: architecture check, the bound, the search, the chains.
    pub(crate) fn compile(&self) -> Result<Vec<libc::sock_filter>, String> {
        let mut chains: Vec<&Vec<BpfProgram>> = Vec::new();
        let keys: Vec<(u32, Leaf)> = self
            .entries
            .iter()
            .filter(|(nr, _)| self.above.is_none_or(|(b, _)| **nr < b))
            .map(|(nr, e)| match e {
                Entry::Ret(v) => (*nr, Leaf::Ret(*v)),
                // Syscalls with the same rules (chmod and mkdir check the
                // same argument) share one chain.
                Entry::Rules(r) => match chains.iter().position(|c| *c == r) {
                    Some(n) => (*nr, Leaf::Chain(n)),
                    None => {
                        chains.push(r);
                        (*nr, Leaf::Chain(chains.len() - 1))
                    }
                },
            })
            .collect();
        let mut head = vec![
            Ins::Plain(stmt(LD_W_ABS, ARCH)),
            Ins::Plain(jump(JEQ, audit_arch(), 1, 0)),
            Ins::Plain(stmt(RET, libc::SECCOMP_RET_KILL_PROCESS)),
            Ins::Plain(stmt(LD_W_ABS, NR)),
        ];
        if let Some((bound, value)) = self.above {
            head.push(Ins::Plain(jump(JGE, bound, 0, 1)));
            head.push(Ins::Plain(stmt(RET, value)));
        }
        head.extend(self.search(&keys)?);

        // Each chain: rule blocks, each followed by `matched`; then `default`.
        let mut starts = Vec::with_capacity(chains.len());
        let mut tail = Vec::new();
        for rules in chains {
            starts.push(head.len() + tail.len());
            for block in rules {
                tail.extend(block.iter().map(|f| jump(f.code, f.k, f.jt, f.jf)));
                tail.push(stmt(RET, self.matched));
            }
            tail.push(stmt(RET, self.default));
        }
        // A rule block's second instruction (never run: the first jumps over
        // it) points one past the chain; the kernel checks every jump.
        tail.push(stmt(RET, self.default));
        let mut out = Vec::with_capacity(head.len() + tail.len());
        for (pc, ins) in head.into_iter().enumerate() {
            out.push(match ins {
                Ins::Plain(f) => f,
                Ins::ToChain(n) => stmt(JA, (starts[n] - pc - 1) as u32),
            });
        }
        out.extend(tail);
        if out.len() > MAX_LEN {
            return Err(format!(
                "seccomp program of {} instructions (the kernel's limit is {MAX_LEN})",
                out.len()
            ));
        }
        Ok(out)
    }

    /// Code that finds the number in the accumulator among `keys` (sorted)
    /// and runs its leaf; `default` when it is not there.
    fn search(&self, keys: &[(u32, Leaf)]) -> Result<Vec<Ins>, String> {
        let leaf = |l: Leaf| match l {
            Leaf::Ret(v) => Ins::Plain(stmt(RET, v)),
            Leaf::Chain(n) => Ins::ToChain(n),
        };
        if keys.len() <= LINEAR {
            // JEQ k0; JEQ k1; ...; RET default; leaf0; leaf1; ...: every
            // comparison is `len` instructions before its leaf.
            let n = keys.len() as u8;
            let mut code: Vec<Ins> = keys
                .iter()
                .map(|(k, _)| Ins::Plain(jump(JEQ, *k, n, 0)))
                .collect();
            code.push(Ins::Plain(stmt(RET, self.default)));
            code.extend(keys.iter().map(|(_, l)| leaf(*l)));
            return Ok(code);
        }
        let (low, high) = keys.split_at(keys.len() / 2);
        let low = self.search(low)?;
        let high_code = self.search(high)?;
        let mut code = Vec::with_capacity(low.len() + high_code.len() + 2);
        match u8::try_from(low.len()) {
            Ok(skip) => code.push(Ins::Plain(jump(JGE, high[0].0, skip, 0))),
            Err(_) => {
                // Too far for a conditional jump: go through a JA.
                code.push(Ins::Plain(jump(JGE, high[0].0, 0, 1)));
                code.push(Ins::Plain(stmt(JA, low.len() as u32)));
            }
        }
        code.extend(low);
        code.extend(high_code);
        Ok(code)
    }
}

/// The kernel's static checks that concern us: every jump lands inside
/// the program, and the last instruction returns.
#[cfg(test)]
pub fn check(prog: &[libc::sock_filter]) -> Result<(), String> {
    let n = prog.len();
    for (pc, f) in prog.iter().enumerate() {
        let ok = match f.code {
            JA => (f.k as usize) < n - pc - 1,
            c if c & 0x07 == libc::BPF_JMP as u16 => {
                pc + usize::from(f.jt) + 1 < n && pc + usize::from(f.jf) + 1 < n
            }
            _ => true,
        };
        if !ok {
            return Err(format!("instruction {pc} jumps past the end"));
        }
    }
    match prog.last() {
        Some(f) if f.code == RET => Ok(()),
        _ => Err("the program does not end in a return".into()),
    }
}

/// Classic BPF as the kernel runs it for seccomp, for tests: the return
/// value for `data` (`nr`, `arch`, `args`).
#[cfg(test)]
pub fn run(prog: &[libc::sock_filter], nr: u32, arch: u32, args: &[u64; 6]) -> u32 {
    let word = |off: u32| -> u32 {
        match off {
            0 => nr,
            4 => arch,
            8 | 12 => 0, // instruction pointer
            o if (16..64).contains(&o) => {
                let a = args[((o - 16) / 8) as usize];
                if o % 8 == 0 {
                    a as u32
                } else {
                    (a >> 32) as u32
                }
            }
            o => panic!("load from offset {o}"),
        }
    };
    let (mut pc, mut acc) = (0usize, 0u32);
    loop {
        let f = prog[pc];
        pc += 1;
        match f.code {
            LD_W_ABS => acc = word(f.k),
            c if c == (libc::BPF_ALU | libc::BPF_AND | libc::BPF_K) as u16 => acc &= f.k,
            JA => pc += f.k as usize,
            JEQ | JGE => {
                let hit = if f.code == JEQ {
                    acc == f.k
                } else {
                    acc >= f.k
                };
                pc += usize::from(if hit { f.jt } else { f.jf });
            }
            c if c == (libc::BPF_JMP | libc::BPF_JGT | libc::BPF_K) as u16 => {
                pc += usize::from(if acc > f.k { f.jt } else { f.jf });
            }
            RET => return f.k,
            c => panic!("instruction {c:#x} at {}", pc - 1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use seccompiler::{SeccompCmpArgLen as Len, SeccompCmpOp as Op, SeccompCondition};

    fn masked(arg: u8, bit: u64) -> SeccompRule {
        SeccompRule::new(vec![
            SeccompCondition::new(arg, Len::Dword, Op::MaskedEq(bit), bit).unwrap(),
        ])
        .unwrap()
    }

    #[test]
    fn search_finds_every_entry_and_nothing_else() {
        let allow = libc::SECCOMP_RET_ALLOW;
        let mut t = Table::new(allow, errno(libc::EPERM));
        // Enough entries that the search needs a far jump.
        for nr in (0..600).step_by(3) {
            t.ret(nr, errno(nr as i32 % 100)).unwrap();
        }
        t.rules(1000, vec![masked(1, 4)]).unwrap();
        t.at_or_above(0x4000_0000, errno(libc::ENOSYS));
        let prog = t.compile().unwrap();
        check(&prog).unwrap();
        let arch = audit_arch();
        for nr in 0..700u32 {
            let want = if nr < 600 && nr % 3 == 0 {
                errno(nr as i32 % 100)
            } else {
                allow
            };
            assert_eq!(run(&prog, nr, arch, &[0; 6]), want, "nr {nr}");
        }
        assert_eq!(
            run(&prog, 1000, arch, &[0, 4, 0, 0, 0, 0]),
            errno(libc::EPERM)
        );
        assert_eq!(run(&prog, 1000, arch, &[0, 3, 0, 0, 0, 0]), allow);
        assert_eq!(run(&prog, 0x4000_0001, arch, &[0; 6]), errno(libc::ENOSYS));
        assert_eq!(
            run(&prog, 1, arch ^ 1, &[0; 6]),
            libc::SECCOMP_RET_KILL_PROCESS
        );
    }

    /// The two programs toolcage installed before this module: seccompiler's
    /// linear filter and a guard; the kernel keeps the lowest action
    /// (evaluating the newer, the main one, first).
    fn old_verdict(main: &[libc::sock_filter], nr: u32, arch: u32, args: &[u64; 6]) -> u32 {
        let x32_bit: u32 = if cfg!(target_arch = "x86_64") {
            0x4000_0000
        } else {
            u32::MAX
        };
        let guard = [
            stmt(LD_W_ABS, 0),
            jump(JEQ, libc::SYS_clone3 as u32, 1, 0),
            jump(JEQ, libc::SYS_openat2 as u32, 0, 1),
            stmt(RET, errno(libc::ENOSYS)),
            jump(JGE, x32_bit, 0, 1),
            stmt(RET, errno(libc::EPERM)),
            stmt(RET, libc::SECCOMP_RET_ALLOW),
        ];
        let action = |r: u32| (r & libc::SECCOMP_RET_ACTION_FULL) as i32;
        let first = run(main, nr, arch, args);
        let second = run(&guard, nr, arch, args);
        if action(second) < action(first) {
            second
        } else {
            first
        }
    }

    /// Values the rules compare against, and their neighbours.
    fn probe_values() -> Vec<u64> {
        [
            0u64,
            1,
            2,
            3,
            5,
            10,
            15,
            libc::AF_UNIX as u64,
            libc::AF_INET as u64,
            libc::AF_INET6 as u64,
            libc::SOCK_STREAM as u64 | libc::SOCK_CLOEXEC as u64,
            libc::SOCK_DGRAM as u64,
            libc::SOCK_SEQPACKET as u64,
            libc::SOCK_RAW as u64,
            libc::IPPROTO_TCP as u64,
            libc::IPPROTO_UDP as u64,
            libc::TIOCSTI,
            libc::TIOCLINUX,
            libc::TIOCSETD,
            libc::TIOCSTI | 0xffff_ffff_0000_0000,
            libc::S_ISUID as u64 | 0o755,
            libc::S_ISGID as u64 | 0o644,
            0o755,
            libc::O_CREAT as u64 | libc::O_WRONLY as u64,
            libc::O_TMPFILE as u64,
            libc::MSG_FASTOPEN as u64,
            libc::CLONE_NEWUSER as u64 | libc::SIGCHLD as u64,
            libc::CLONE_NEWNS as u64,
            libc::CLONE_NEWNET as u64,
            libc::CLONE_VM as u64 | libc::CLONE_THREAD as u64,
            u32::MAX as u64,
            u64::MAX,
        ]
        .to_vec()
    }

    /// seccompiler's linear filter for `net`, as plain instructions.
    fn seccompiler_program(net: &toolcage_policy::Network) -> Vec<libc::sock_filter> {
        use seccompiler::{SeccompAction, SeccompFilter};
        let old: BpfProgram = SeccompFilter::new(
            crate::seccomp::rules(net),
            SeccompAction::Allow,
            SeccompAction::Errno(libc::EPERM as u32),
            crate::script::host_arch(),
        )
        .unwrap()
        .try_into()
        .unwrap();
        old.iter().map(|f| jump(f.code, f.k, f.jt, f.jf)).collect()
    }

    #[test]
    fn same_verdicts_as_the_programs_it_replaces() {
        use crate::seccomp;
        use toolcage_policy::Network;
        let values = probe_values();
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let nets = [
            Network::Off,
            Network::On,
            Network::Tcp {
                connect: vec![443],
                bind: vec![],
            },
            Network::Tcp {
                connect: vec![],
                bind: vec![8080],
            },
        ];
        for net in nets {
            let old = seccompiler_program(&net);
            let new = seccomp::compile(&net).unwrap();
            check(&new).unwrap();
            assert!(new.len() < old.len(), "{} vs {}", new.len(), old.len());
            let listed = seccomp::rules(&net);
            let nrs = (0..600u32).chain([
                0x4000_0000,
                0x4000_0001,
                0x4000_0101,
                u32::MAX - 1,
                u32::MAX,
            ]);
            for nr in nrs {
                for arch in [audit_arch(), 0x4000_0003, 0] {
                    let rounds = if listed.contains_key(&(nr as i64)) {
                        3000
                    } else {
                        2
                    };
                    for _ in 0..rounds {
                        let mut args = [0u64; 6];
                        for a in &mut args {
                            *a = values[(next() % values.len() as u64) as usize];
                        }
                        assert_eq!(
                            run(&new, nr, arch, &args),
                            old_verdict(&old, nr, arch, &args),
                            "{net:?}: syscall {nr} arch {arch:#x} args {args:x?}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn a_syscall_is_listed_once() {
        let mut t = Table::new(libc::SECCOMP_RET_ALLOW, errno(libc::EPERM));
        t.ret(5, errno(libc::ENOSYS)).unwrap();
        assert!(t.rules(5, vec![]).is_err());
    }
}
