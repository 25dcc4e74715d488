//! The cause of a namespace failure and its fix, in one line: a pure
//! function of the sysctls, this process's state and the errno.

use super::ProcStatus;
use serde::Serialize;

/// Why the sandbox's namespaces cannot be created, and the errno seen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NamespaceBlock {
    pub cause: BlockCause,
    pub errno: i32,
}

/// The cause of a namespace failure, each with its own fix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BlockCause {
    /// `user.max_user_namespaces = 0`.
    MaxUserNamespaces,
    /// Debian's `kernel.unprivileged_userns_clone = 0`.
    DebianSysctl,
    /// Ubuntu's `kernel.apparmor_restrict_unprivileged_userns = 1`.
    #[serde(rename = "apparmor")]
    AppArmor,
    /// A seccomp filter refuses `unshare`/`clone` with namespace flags, as
    /// the default profiles of Docker, Podman and Kubernetes do.
    ContainerSeccomp,
    /// Root without CAP_SYS_ADMIN (a container's default capability set).
    NoCapSysAdmin,
    /// The kernel was built without (some of) the namespaces (EINVAL).
    NotSupported,
    /// A namespace limit is reached in this or an enclosing namespace
    /// (ENOSPC with a non-zero limit, EUSERS on old kernels).
    Exhausted,
    /// None of the above could be told apart.
    Other,
}

/// Errors of `clone`/`unshare` that say "no namespaces here" rather than a
/// shortage of this one call (EAGAIN, ENOMEM).
pub(crate) fn blocks_namespaces(errno: i32) -> bool {
    matches!(
        errno,
        libc::EPERM | libc::EACCES | libc::ENOSPC | libc::EUSERS | libc::EINVAL | libc::ENOSYS
    )
}

/// The cause of a namespace failure with `errno`, from the sysctls and this
/// process's state (no fork: safe to call right after a failed `clone`).
pub(crate) fn classify(errno: i32) -> NamespaceBlock {
    NamespaceBlock {
        cause: cause(&Facts::gather(), errno),
        errno,
    }
}

impl NamespaceBlock {
    /// One line: the cause and the fix.
    pub fn message(&self) -> String {
        let e = errno_text(self.errno);
        let or_free = "or run namespace-free (see toolcage doctor)";
        match self.cause {
            BlockCause::MaxUserNamespaces => format!(
                "user namespaces are disabled (user.max_user_namespaces = 0; {e}): ask the admin \
                 for sysctl -w user.max_user_namespaces=15000, {or_free}"
            ),
            BlockCause::DebianSysctl => format!(
                "unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone = 0; \
                 {e}): ask the admin for sysctl -w kernel.unprivileged_userns_clone=1, {or_free}"
            ),
            BlockCause::AppArmor => format!(
                "AppArmor restricts unprivileged user namespaces \
                 (kernel.apparmor_restrict_unprivileged_userns = 1; {e}): ask the admin for an \
                 AppArmor profile for the toolcage binary that allows `userns,` (in \
                 /etc/apparmor.d/) or for sysctl -w kernel.apparmor_restrict_unprivileged_userns=0, \
                 {or_free}"
            ),
            BlockCause::ContainerSeccomp => format!(
                "the container's seccomp profile refuses namespaces ({e} from unshare/clone, as \
                 the Docker and Kubernetes defaults do): run the container with --security-opt \
                 seccomp=PROFILE.json allowing unshare, setns and clone with CLONE_NEW* flags \
                 (Kubernetes: securityContext.seccompProfile with type Localhost), {or_free}"
            ),
            BlockCause::NoCapSysAdmin => format!(
                "running as root without CAP_SYS_ADMIN ({e}), which the sandbox's namespaces \
                 need as root (a container's default capability set): run the container with \
                 --cap-add SYS_ADMIN (Kubernetes: securityContext.capabilities.add: \
                 [\"SYS_ADMIN\"]), {or_free}"
            ),
            BlockCause::NotSupported => format!(
                "this kernel cannot create the sandbox's namespaces ({e}: built without \
                 CONFIG_USER_NS or another CONFIG_*_NS): use a kernel with them, {or_free}"
            ),
            BlockCause::Exhausted => format!(
                "no more namespaces may be created here ({e}: a user.max_*_namespaces limit is \
                 reached in this or an enclosing namespace, as inside bwrap --disable-userns): \
                 raise the limit where it is set, {or_free}"
            ),
            BlockCause::Other => format!(
                "creating the sandbox's namespaces failed ({e}; no sysctl, seccomp filter or \
                 missing capability explains it: an LSM policy or a chroot may): {or_free}"
            ),
        }
    }
}

/// `EPERM (Operation not permitted)`.
fn errno_text(errno: i32) -> String {
    let name = match errno {
        libc::EPERM => "EPERM",
        libc::EACCES => "EACCES",
        libc::ENOSPC => "ENOSPC",
        libc::EUSERS => "EUSERS",
        libc::EINVAL => "EINVAL",
        libc::ENOSYS => "ENOSYS",
        libc::ENOMEM => "ENOMEM",
        _ => {
            return format!(
                "errno {errno}: {}",
                std::io::Error::from_raw_os_error(errno)
            );
        }
    };
    // The io::Error text ends in "(os error N)"; keep the description only.
    let text = std::io::Error::from_raw_os_error(errno).to_string();
    let text = text.split(" (os error").next().unwrap_or(&text);
    format!("{name}, {text}")
}

/// The sysctls that decide whether a user namespace may be created (`None`:
/// the file does not exist on this kernel or cannot be read).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Sysctls {
    /// `/proc/sys/user/max_user_namespaces`
    pub max_user_namespaces: Option<u64>,
    /// `/proc/sys/kernel/unprivileged_userns_clone` (Debian)
    pub unprivileged_userns_clone: Option<u64>,
    /// `/proc/sys/kernel/apparmor_restrict_unprivileged_userns` (Ubuntu)
    pub apparmor_restrict_unprivileged_userns: Option<u64>,
}

impl Sysctls {
    pub fn read() -> Sysctls {
        let num = |path: &str| {
            std::fs::read_to_string(path)
                .ok()
                .and_then(|s| s.trim().parse().ok())
        };
        Sysctls {
            max_user_namespaces: num("/proc/sys/user/max_user_namespaces"),
            unprivileged_userns_clone: num("/proc/sys/kernel/unprivileged_userns_clone"),
            apparmor_restrict_unprivileged_userns: num(
                "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
            ),
        }
    }
}

/// Everything the cause of a failure depends on; [`cause`] is a pure
/// function of it, so every combination can be tested on any kernel.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Facts {
    /// Not root: the sandbox adds a user namespace.
    pub rootless: bool,
    pub cap_sys_admin: bool,
    /// This process runs under a seccomp filter.
    pub seccomp_filtered: bool,
    /// `unshare(0)`, which changes nothing, is refused: a filter blocks the
    /// syscall outright, as container runtimes' default profiles do.
    pub unshare_refused: bool,
    pub sysctls: Sysctls,
}

impl Facts {
    /// This process's facts, read now.
    pub fn gather() -> Facts {
        let status = ProcStatus::read();
        // SAFETY: geteuid cannot fail; unshare with no flags changes nothing
        // (the kernel returns before touching any namespace or table), so it
        // only tells whether something refuses the syscall itself.
        let (euid, unshare_refused) =
            unsafe { (libc::geteuid(), libc::syscall(libc::SYS_unshare, 0) != 0) };
        Facts {
            rootless: euid != 0,
            cap_sys_admin: status.cap_sys_admin(),
            seccomp_filtered: status.seccomp_mode == 2,
            unshare_refused,
            sysctls: Sysctls::read(),
        }
    }
}

/// The cause of a namespace failure with `errno`, given `f`.
pub(crate) fn cause(f: &Facts, errno: i32) -> BlockCause {
    let s = &f.sysctls;
    match errno {
        libc::ENOSPC if f.rootless && s.max_user_namespaces == Some(0) => {
            BlockCause::MaxUserNamespaces
        }
        libc::ENOSPC | libc::EUSERS => BlockCause::Exhausted,
        // clone3 refused the way runtimes' profiles refuse it.
        libc::ENOSYS if f.seccomp_filtered => BlockCause::ContainerSeccomp,
        libc::EINVAL | libc::ENOSYS => BlockCause::NotSupported,
        libc::EPERM | libc::EACCES => {
            if !f.rootless && !f.cap_sys_admin {
                BlockCause::NoCapSysAdmin
            } else if f.seccomp_filtered && f.unshare_refused {
                BlockCause::ContainerSeccomp
            } else if f.rootless && s.unprivileged_userns_clone == Some(0) {
                BlockCause::DebianSysctl
            } else if f.rootless && s.apparmor_restrict_unprivileged_userns == Some(1) {
                BlockCause::AppArmor
            } else if f.seccomp_filtered {
                // A filter that refuses only the namespace flags.
                BlockCause::ContainerSeccomp
            } else {
                BlockCause::Other
            }
        }
        _ => BlockCause::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(sysctls: Sysctls) -> Facts {
        Facts {
            rootless: true,
            sysctls,
            ..Facts::default()
        }
    }

    const OPEN: Sysctls = Sysctls {
        max_user_namespaces: Some(15000),
        unprivileged_userns_clone: None,
        apparmor_restrict_unprivileged_userns: None,
    };

    #[test]
    fn sysctls_times_errno() {
        let debian = Sysctls {
            unprivileged_userns_clone: Some(0),
            ..OPEN
        };
        let debian_on = Sysctls {
            unprivileged_userns_clone: Some(1),
            ..OPEN
        };
        let ubuntu = Sysctls {
            apparmor_restrict_unprivileged_userns: Some(1),
            ..OPEN
        };
        let ubuntu_off = Sysctls {
            apparmor_restrict_unprivileged_userns: Some(0),
            ..OPEN
        };
        let zero = Sysctls {
            max_user_namespaces: Some(0),
            ..OPEN
        };
        use BlockCause::*;
        let table = [
            (zero, libc::ENOSPC, MaxUserNamespaces),
            (OPEN, libc::ENOSPC, Exhausted),
            (ubuntu, libc::ENOSPC, Exhausted),
            (OPEN, libc::EUSERS, Exhausted),
            (debian, libc::EPERM, DebianSysctl),
            (debian_on, libc::EPERM, Other),
            (ubuntu, libc::EPERM, AppArmor),
            (ubuntu, libc::EACCES, AppArmor),
            (ubuntu_off, libc::EPERM, Other),
            (OPEN, libc::EINVAL, NotSupported),
            (zero, libc::EINVAL, NotSupported),
            (OPEN, libc::ENOSYS, NotSupported),
            (OPEN, libc::ENOMEM, Other),
            (Sysctls::default(), libc::EPERM, Other),
        ];
        for (sysctls, errno, want) in table {
            assert_eq!(
                cause(&user(sysctls), errno),
                want,
                "{sysctls:?} errno {errno}"
            );
        }
    }

    #[test]
    fn container_seccomp_wins_over_sysctls_when_unshare_itself_is_refused() {
        // Docker on an Ubuntu host: the AppArmor sysctl is visible, but the
        // runtime's filter refuses first.
        let ubuntu = Sysctls {
            apparmor_restrict_unprivileged_userns: Some(1),
            ..OPEN
        };
        let docker = Facts {
            seccomp_filtered: true,
            unshare_refused: true,
            ..user(ubuntu)
        };
        assert_eq!(cause(&docker, libc::EPERM), BlockCause::ContainerSeccomp);
        assert_eq!(cause(&docker, libc::ENOSYS), BlockCause::ContainerSeccomp);
        // A filter that refuses only namespace flags, under the sysctl:
        // the sysctl is the surer cause.
        let partial = Facts {
            unshare_refused: false,
            ..docker
        };
        assert_eq!(cause(&partial, libc::EPERM), BlockCause::AppArmor);
        let partial = Facts {
            sysctls: OPEN,
            ..partial
        };
        assert_eq!(cause(&partial, libc::EPERM), BlockCause::ContainerSeccomp);
    }

    #[test]
    fn root_needs_cap_sys_admin_not_user_namespaces() {
        let root = |cap_sys_admin, sysctls| Facts {
            rootless: false,
            cap_sys_admin,
            sysctls,
            ..Facts::default()
        };
        let zero = Sysctls {
            max_user_namespaces: Some(0),
            unprivileged_userns_clone: Some(0),
            apparmor_restrict_unprivileged_userns: Some(1),
        };
        // As root the sandbox creates no user namespace: these sysctls do
        // not apply.
        assert_eq!(
            cause(&root(true, zero), libc::ENOSPC),
            BlockCause::Exhausted
        );
        assert_eq!(cause(&root(true, zero), libc::EPERM), BlockCause::Other);
        assert_eq!(
            cause(&root(false, OPEN), libc::EPERM),
            BlockCause::NoCapSysAdmin
        );
        let docker_root = Facts {
            seccomp_filtered: true,
            unshare_refused: true,
            ..root(false, OPEN)
        };
        assert_eq!(cause(&docker_root, libc::EPERM), BlockCause::NoCapSysAdmin);
        let docker_root_with_cap = Facts {
            cap_sys_admin: true,
            ..docker_root
        };
        assert_eq!(
            cause(&docker_root_with_cap, libc::EPERM),
            BlockCause::ContainerSeccomp
        );
    }

    #[test]
    fn every_message_is_one_line_with_a_fix() {
        use BlockCause::*;
        for (cause, needle) in [
            (
                MaxUserNamespaces,
                "sysctl -w user.max_user_namespaces=15000",
            ),
            (DebianSysctl, "sysctl -w kernel.unprivileged_userns_clone=1"),
            (AppArmor, "`userns,`"),
            (ContainerSeccomp, "--security-opt seccomp="),
            (NoCapSysAdmin, "--cap-add SYS_ADMIN"),
            (NotSupported, "CONFIG_USER_NS"),
            (Exhausted, "max_*_namespaces"),
            (Other, "namespace-free"),
        ] {
            let m = NamespaceBlock {
                cause,
                errno: libc::EPERM,
            }
            .message();
            assert!(!m.contains('\n'), "{m}");
            assert!(m.contains(needle), "{cause:?}: {m}");
            assert!(m.contains("see toolcage doctor"), "{m}");
        }
        let m = NamespaceBlock {
            cause: MaxUserNamespaces,
            errno: libc::ENOSPC,
        }
        .message();
        assert!(m.contains("ENOSPC"), "{m}");
        assert!(!m.contains("os error"), "{m}");
    }
}
