//! The two pieces of the script child (`toolcage __script-runner`,
//! `call::script::child` in the top crate) that need `unsafe` or raw
//! seccomp: loading QuickJS bytecode, and the stricter filter the child
//! puts on itself once its script is compiled.
//!
//! A script is compiled in a full QuickJS context and run in one without
//! the `Eval` intrinsic: every string-to-code path (`eval`, `Function`,
//! the async and generator constructors) then throws by construction.
//! Moving the compiled module from one context to the other goes through
//! bytecode, which only [`compile`] can produce.

use rquickjs::module::{Declared, WriteOptions};
use rquickjs::{Ctx, Module};
use seccompiler::{BpfProgram, SeccompAction, SeccompFilter, TargetArch};
use std::collections::BTreeMap;

/// A module's bytecode, written by this process's QuickJS.
pub struct Bytecode(Vec<u8>);

/// Compile `source` as the module `name` (in a context with `Eval`).
pub fn compile(ctx: &Ctx<'_>, name: &str, source: &str) -> rquickjs::Result<Bytecode> {
    let module = Module::declare(ctx.clone(), name, source)?;
    Ok(Bytecode(module.write(WriteOptions::default())?))
}

/// Load bytecode from [`compile`] into `ctx` (which may lack `Eval`).
pub fn load<'js>(ctx: Ctx<'js>, code: &Bytecode) -> rquickjs::Result<Module<'js, Declared>> {
    // SAFETY: `Bytecode` is only made by `compile`, from `Module::write` of
    // the same QuickJS build in this process, so it is valid bytecode.
    unsafe { Module::load(ctx, &code.0) }
}

/// Syscalls a running script never needs: no new program, process,
/// socket, file or namespace. Denied with EPERM on top of the sandbox's
/// own filter (filters stack; this one only takes away).
const SCRIPT_DENIED: &[i64] = &[
    libc::SYS_execve,
    libc::SYS_execveat,
    libc::SYS_clone,
    libc::SYS_clone3,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_fork,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_vfork,
    libc::SYS_socket,
    libc::SYS_socketpair,
    libc::SYS_connect,
    libc::SYS_bind,
    libc::SYS_listen,
    libc::SYS_accept4,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_accept,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_open,
    libc::SYS_openat,
    libc::SYS_openat2,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_creat,
    libc::SYS_kill,
    libc::SYS_tkill,
    libc::SYS_tgkill,
    libc::SYS_ptrace,
    libc::SYS_memfd_create,
];

/// seccompiler's name for the architecture toolcage is built for.
pub(crate) fn host_arch() -> TargetArch {
    #[cfg(target_arch = "x86_64")]
    let target = TargetArch::x86_64;
    #[cfg(target_arch = "aarch64")]
    let target = TargetArch::aarch64;
    #[cfg(target_arch = "riscv64")]
    let target = TargetArch::riscv64;
    target
}

/// Put the script child's stricter filter on the calling (single) thread: after
/// it, the process can still compute, allocate and use the descriptors it
/// has (its protocol pipes), nothing more.
pub fn lock_down_script() -> Result<(), String> {
    let rules: BTreeMap<i64, Vec<_>> = SCRIPT_DENIED.iter().map(|&n| (n, vec![])).collect();
    let program: BpfProgram = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        host_arch(),
    )
    .and_then(TryInto::try_into)
    .map_err(|e| format!("runner seccomp filter: {e}"))?;
    seccompiler::apply_filter(&program).map_err(|e| format!("runner seccomp filter: {e}"))
}
