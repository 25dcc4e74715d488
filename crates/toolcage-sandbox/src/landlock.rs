//! Building the Landlock ruleset in the parent; the child only calls
//! `landlock_restrict_self` on the prepared descriptor.

pub(crate) use super::landlock_abi::kernel_abi;
use super::report::{Degradation, LandlockReport, LandlockStatus};
use super::root_open::{RootError, open_root_stat};
use super::rootfs::STANDARD_DEVICES;
use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, NetPort, PathBeneath, Ruleset,
    RulesetAttr, RulesetCreatedAttr, Scope,
};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use toolcage_policy::{Grant, Network};

/// A ruleset ready for the child, and what it will enforce.
pub(crate) struct Prepared {
    pub fd: Option<OwnedFd>,
    pub report: LandlockReport,
    /// Rights the tool grants itself beneath the filesystems mounted inside
    /// the call (`/tmp`, `/dev/shm`: everything; `/proc`: read). Rules on
    /// host inodes cannot name them: they exist only in the call.
    pub read_access: u64,
    pub all_access: u64,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum LandlockError {
    #[error("cannot open {path} for a Landlock rule: {source}")]
    Path {
        path: String,
        source: std::io::Error,
    },
    /// A root a call turned into a symlink after resolution.
    #[error("{0}")]
    Planted(String),
    #[error("building the Landlock ruleset failed: {0}")]
    Ruleset(#[from] landlock::RulesetError),
}

/// Landlock features newer than ABI 1, with what toolcage does without them.
/// `compensated` says whether another layer covers the gap for this grant.
fn missing_features(abi: i32, network: &Network, constructed: bool) -> Vec<Degradation> {
    // A constructed root shows only the granted paths: a host socket
    // outside them has no path inside the call.
    let unix_compensated = !matches!(network, Network::On) || constructed;
    let pid_ns = constructed;
    let table: [(i32, &str, bool, &str); 6] = [
        (
            2,
            "refer (cross-directory link and rename)",
            true,
            "Landlock ABI 1 denies every cross-directory link and rename",
        ),
        (
            3,
            "truncate",
            false,
            "files in read-only roots can be truncated where file permissions allow",
        ),
        (
            5,
            "ioctl on devices",
            true,
            "seccomp denies TIOCSTI, TIOCLINUX and TIOCSETD",
        ),
        (
            6,
            "abstract unix socket scoping",
            unix_compensated,
            "seccomp denies connect() with the network off and AF_UNIX sockets in tcp mode",
        ),
        (
            6,
            "signal scoping",
            pid_ns,
            "the PID namespace hides every process outside the sandbox",
        ),
        (
            9,
            "unix socket path resolution",
            unix_compensated,
            "seccomp denies connect() with the network off and AF_UNIX sockets in tcp mode; \
             with the network on, the constructed root shows no socket outside the grant",
        ),
    ];
    let mut out: Vec<Degradation> = table
        .iter()
        .filter(|(since, ..)| abi < *since)
        .map(|(since, what, compensated, how)| Degradation {
            feature: format!("landlock: {what} (needs ABI {since})"),
            compensated: *compensated,
            note: how.to_string(),
        })
        .collect();
    if abi < 4 && matches!(network, Network::Tcp { .. }) {
        out.push(Degradation {
            feature: "landlock: TCP port rules (needs ABI 4)".into(),
            compensated: false,
            note: "port restrictions cannot be enforced; TCP to any port would be allowed".into(),
        });
    }
    out
}

fn is_dir(path: &Path) -> bool {
    path.metadata().map(|m| m.is_dir()).unwrap_or(false)
}

/// What the tool's filesystem looks like, which decides the rules.
pub(crate) enum Layout {
    /// The constructed root: denied and protected paths are covered by
    /// mounts; `/proc`, `/tmp` and `/dev/shm` are fresh (the tool adds
    /// their rules itself).
    Constructed,
    /// The host's own tree (namespace-free mode): read roots are split
    /// around the denied and hidden paths inside them, the host's `/proc`
    /// is readable, and `private_tmp` (a directory toolcage made for this
    /// call) is writable.
    Host {
        private_tmp: Option<PathBuf>,
        hidden: Vec<PathBuf>,
    },
}

/// `root` as rules that leave out `excluded` paths beneath it: the root
/// itself when nothing is excluded inside; else its entries, recursing into
/// those that contain an excluded path. Symlinks are left out (the kernel
/// checks the target's own rules); unreadable directories give nothing.
/// Exact for read-only roots, whose entries the call cannot add to.
fn split_around(root: &Path, excluded: &[PathBuf], out: &mut Vec<PathBuf>) {
    if excluded.iter().any(|e| e == root) {
        return;
    }
    if !excluded.iter().any(|e| e.starts_with(root)) || !is_dir(root) {
        out.push(root.to_path_buf());
        return;
    }
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_symlink()) {
            continue;
        }
        split_around(&entry.path(), excluded, out);
    }
}

/// One path rule before it is opened.
struct RuleSpec {
    path: PathBuf,
    rights: landlock::BitFlags<AccessFs>,
    /// Skipped when it does not exist (else an error).
    optional: bool,
    /// A root of the grant: opened by [`open_root_stat`], never through a
    /// symlink inside a write root.
    guarded: bool,
}

/// An `O_PATH` descriptor for `spec` and whether it is a directory; `None`
/// for an optional path that is gone or is a symlink by the time it is
/// opened. Optional paths are entries of a split read root, listed a moment
/// earlier: /tmp changes while we look, and a concurrent call may replace an
/// entry inside its write root with a symlink to a secret, which must not
/// become a rule on the secret.
fn open_for_rule(spec: &RuleSpec, bases: &[PathBuf]) -> Result<Option<(OwnedFd, bool)>, RootError> {
    use nix::fcntl::{OFlag, open};
    use nix::sys::stat::{Mode, SFlag, fstat};
    let mut flags = OFlag::O_PATH | OFlag::O_CLOEXEC;
    if spec.optional {
        flags |= OFlag::O_NOFOLLOW;
    }
    // A guarded root's walk made the `fstat` already.
    let opened = if spec.guarded {
        open_root_stat(&spec.path, bases, !spec.optional)
    } else {
        open(spec.path.as_path(), flags, Mode::empty())
            .and_then(|fd| fstat(&fd).map(|st| (fd, st)))
            .map_err(RootError::from)
    };
    let (fd, st) = match opened {
        Ok(fd) => fd,
        // An entry of a split read root that changed while we looked:
        // left out (the call reads less, never more).
        Err(RootError::LastIsLink | RootError::Planted { .. }) if spec.optional => {
            return Ok(None);
        }
        Err(RootError::Io(e))
            if spec.optional && matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) =>
        {
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    let kind = SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT;
    if spec.optional && kind == SFlag::S_IFLNK {
        return Ok(None);
    }
    Ok(Some((fd, kind == SFlag::S_IFDIR)))
}

/// Build the ruleset for `grant`. `extra_read` are files readable for this
/// call only (a parameters file, `resolv.conf`'s target). The standard
/// device nodes of the constructed root (`/dev/null`, `zero`, `full`,
/// `random`, `urandom`) are readable and writable in every call. With no
/// Landlock support, `fd` is `None` and the report says so; the caller
/// decides whether that is acceptable.
///
/// The steps: what the kernel lacks, the handled rights and scopes, the
/// TCP port rules, the path rules, each opened and added.
pub(crate) fn prepare(
    grant: &Grant,
    extra_read: &[PathBuf],
    layout: &Layout,
) -> Result<Prepared, LandlockError> {
    let version = kernel_abi();
    let constructed = matches!(layout, Layout::Constructed);
    let missing = missing_features(version, &grant.network, constructed);
    if version == 0 {
        return Ok(Prepared {
            fd: None,
            report: LandlockReport {
                abi: 0,
                status: LandlockStatus::NotEnforced,
                missing,
            },
            read_access: 0,
            all_access: 0,
        });
    }
    let abi = ABI::from(version);
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(abi))?;
    if version >= 6 {
        ruleset = ruleset.scope(Scope::AbstractUnixSocket | Scope::Signal)?;
    }
    let (ruleset, net_rules) = network(ruleset, &grant.network, version)?;
    let file_rights = AccessFs::from_file(abi);
    // Where a call can make symlinks: the grant's write roots and project,
    // and every write root of the session (another tool's call).
    let bases: Vec<PathBuf> = grant.link_bases();
    let fs_rules = path_rules(grant, extra_read, layout, abi);
    let created = ruleset
        .create()?
        .add_rules(
            fs_rules
                .iter()
                .filter_map(|spec| open_rule(spec, &bases, file_rights)),
        )?
        .add_rules(net_rules.into_iter().map(Ok::<_, landlock::RulesetError>))?;
    let status = if missing.iter().any(|d| !d.compensated) {
        LandlockStatus::PartiallyEnforced
    } else {
        LandlockStatus::FullyEnforced
    };
    Ok(Prepared {
        fd: created.into(),
        report: LandlockReport {
            abi: version,
            status,
            missing,
        },
        read_access: AccessFs::from_read(abi).bits(),
        all_access: AccessFs::from_all(abi).bits(),
    })
}

/// The TCP rights handled (ABI 4 and later) and the port rules.
fn network(
    mut ruleset: Ruleset,
    network: &Network,
    version: i32,
) -> Result<(Ruleset, Vec<NetPort>), LandlockError> {
    let net_rules: Vec<NetPort> = match network {
        // Domains: the call's own network namespace holds only loopback;
        // toolcage's proxy outside it decides every connection.
        Network::On | Network::Domains(_) => vec![],
        Network::Off => {
            // Defence in depth: seccomp already forbids inet sockets.
            if version >= 4 {
                ruleset = ruleset.handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)?;
            }
            vec![]
        }
        Network::Tcp { connect, bind } => {
            if version >= 4 {
                ruleset = ruleset.handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)?;
            }
            connect
                .iter()
                .map(|p| NetPort::new(*p, AccessNet::ConnectTcp))
                .chain(bind.iter().map(|p| NetPort::new(*p, AccessNet::BindTcp)))
                .collect()
        }
    };
    Ok((ruleset, net_rules))
}

/// `spec` opened as a rule (a file gets only the rights a file can have);
/// `None` for an optional path that is gone.
fn open_rule(
    spec: &RuleSpec,
    bases: &[PathBuf],
    file_rights: landlock::BitFlags<AccessFs>,
) -> Option<Result<PathBeneath<OwnedFd>, LandlockError>> {
    match open_for_rule(spec, bases) {
        Ok(Some((fd, dir))) => {
            let rights = if dir {
                spec.rights
            } else {
                spec.rights & file_rights
            };
            Some(Ok(PathBeneath::new(fd, rights)))
        }
        Ok(None) => None,
        Err(e @ RootError::Planted { .. }) => {
            Some(Err(LandlockError::Planted(e.describe(&spec.path))))
        }
        Err(RootError::Io(source)) => Some(Err(LandlockError::Path {
            path: spec.path.display().to_string(),
            source,
        })),
        Err(RootError::LastIsLink) => Some(Err(LandlockError::Path {
            path: spec.path.display().to_string(),
            source: nix::errno::Errno::ELOOP.into(),
        })),
    }
}

fn required(path: &Path, rights: landlock::BitFlags<AccessFs>, guarded: bool) -> RuleSpec {
    RuleSpec {
        path: path.to_path_buf(),
        rights,
        optional: false,
        guarded,
    }
}

/// The path rules: the read roots as the layout sees them, the write
/// roots, the standard devices.
fn path_rules(grant: &Grant, extra_read: &[PathBuf], layout: &Layout, abi: ABI) -> Vec<RuleSpec> {
    let mut fs_rules: Vec<RuleSpec> = Vec::with_capacity(grant.read.len() + grant.write.len() + 8);
    match layout {
        Layout::Constructed => {
            let read = grant.read.iter().map(|r| (r, true));
            for (root, guarded) in read.chain(extra_read.iter().map(|r| (r, false))) {
                if root.starts_with("/proc") {
                    continue; // the call's /proc is its own; see `read_access`
                }
                fs_rules.push(required(root, AccessFs::from_read(abi), guarded));
            }
        }
        Layout::Host {
            private_tmp,
            hidden,
        } => host_read_rules(
            grant,
            extra_read,
            private_tmp.as_deref(),
            hidden,
            abi,
            &mut fs_rules,
        ),
    }
    let constructed = matches!(layout, Layout::Constructed);
    for root in &grant.write {
        // The host's /proc is never writable: a root tool without
        // capabilities still passes the sysctl owner check. (The
        // constructed root mounts its /proc/sys read-only instead.)
        if !constructed && root.starts_with("/proc") {
            continue;
        }
        fs_rules.push(required(root, AccessFs::from_all(abi), true));
    }
    for dev in STANDARD_DEVICES {
        fs_rules.push(RuleSpec {
            path: PathBuf::from(dev),
            rights: (AccessFs::from_read(abi) | AccessFs::WriteFile | AccessFs::Truncate)
                & AccessFs::from_all(abi),
            optional: true,
            guarded: false,
        });
    }
    fs_rules
}

/// Namespace-free: the read roots split around the denied and hidden
/// paths, the host's `/proc` readable, the private tmp writable.
fn host_read_rules(
    grant: &Grant,
    extra_read: &[PathBuf],
    private_tmp: Option<&Path>,
    hidden: &[PathBuf],
    abi: ABI,
    fs_rules: &mut Vec<RuleSpec>,
) {
    let excluded: Vec<PathBuf> = grant.denied.iter().chain(hidden).cloned().collect();
    // The grant's own roots are opened guarded; toolcage's files
    // and the host's /proc as named.
    let mut parts = Vec::new();
    for root in &grant.read {
        split_around(root, &excluded, &mut parts);
    }
    let mut own = Vec::new();
    for root in extra_read {
        split_around(root, &excluded, &mut own);
    }
    own.push(PathBuf::from("/proc"));
    let parts = parts.into_iter().map(|p| (p, true));
    for (part, guarded) in parts.chain(own.into_iter().map(|p| (p, false))) {
        fs_rules.push(RuleSpec {
            path: part,
            rights: AccessFs::from_read(abi),
            optional: true,
            guarded,
        });
    }
    if let Some(tmp) = private_tmp {
        fs_rules.push(required(tmp, AccessFs::from_all(abi), false));
    }
}

/// What Landlock will enforce for `grant` on this kernel, without building
/// the ruleset (`toolcage doctor`). `constructed`: the call runs in the
/// constructed root and its namespaces, which cover some gaps.
pub fn report_for(grant: &Grant, constructed: bool) -> LandlockReport {
    let abi = kernel_abi();
    let missing = missing_features(abi, &grant.network, constructed);
    let status = if abi == 0 {
        LandlockStatus::NotEnforced
    } else if missing.iter().any(|d| !d.compensated) {
        LandlockStatus::PartiallyEnforced
    } else {
        LandlockStatus::FullyEnforced
    };
    LandlockReport {
        abi,
        status,
        missing,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abi_seven_off_network_is_fully_compensated() {
        let missing = missing_features(7, &Network::Off, true);
        assert!(!missing.is_empty(), "ABI 9 features are missing on ABI 7");
        assert!(missing.iter().all(|d| d.compensated));
    }

    #[test]
    fn old_abi_reports_uncompensated_gaps() {
        let missing = missing_features(1, &Network::Off, true);
        assert!(
            missing
                .iter()
                .any(|d| !d.compensated && d.feature.contains("truncate"))
        );
        let tcp = Network::Tcp {
            connect: vec![80],
            bind: vec![],
        };
        assert!(
            missing_features(3, &tcp, true)
                .iter()
                .any(|d| d.feature.contains("TCP port") && !d.compensated)
        );
    }

    #[test]
    fn split_entries_never_follow_symlinks_and_may_vanish() {
        let dir = std::env::temp_dir().join(format!("tc-ll-open-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join("file"), "x").unwrap();
        std::os::unix::fs::symlink(dir.join("sub"), dir.join("link")).unwrap();
        let spec = |name: &str, optional| RuleSpec {
            path: dir.join(name),
            rights: AccessFs::from_all(ABI::V1),
            optional,
            guarded: false,
        };
        let opened = |name, optional| open_for_rule(&spec(name, optional), &[]);
        // An entry of a split root: the symlink is left out, a vanished
        // entry is skipped; files and directories open as what they are.
        assert!(opened("link", true).unwrap().is_none());
        assert!(opened("gone", true).unwrap().is_none());
        assert!(opened("sub", true).unwrap().unwrap().1);
        assert!(!opened("file", true).unwrap().unwrap().1);
        // A root the grant names: followed (resolution already
        // canonicalised it), and missing is an error, never a silent skip.
        assert!(opened("link", false).unwrap().unwrap().1);
        assert!(opened("gone", false).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
