//! Which entries the constructed root holds: roots, the fresh
//! filesystems, symlinks, protected and denied paths, and the pins that
//! keep their parents from being renamed.

use super::*;
use toolcage_policy::canon;

/// What a call under `grant` sees, before ordering.
pub(super) struct Inputs<'a> {
    pub grant: &'a Grant,
    pub extra_read: &'a [PathBuf],
    pub hidden: &'a [PathBuf],
    pub files: &'a [(PathBuf, PathBuf)],
}

fn beneath(p: &Path, roots: &[PathBuf]) -> bool {
    roots.iter().any(|r| within(p, r))
}

/// Whether `p` exists (a final symlink not followed), and whether what it
/// names is a directory (`None`: a dangling link). One `lstat`, and a
/// `stat` only for a symlink.
fn probe(p: &Path) -> Option<Option<bool>> {
    let own = p.symlink_metadata().ok()?;
    if own.file_type().is_symlink() {
        Some(p.metadata().ok().map(|m| m.is_dir()))
    } else {
        Some(Some(own.is_dir()))
    }
}

/// The entries of the root, in steps: the granted roots, `/dev`, the
/// fresh filesystems, the merged-`/usr` links, protected paths, generated
/// files, then what is masked.
pub(super) fn collect(inp: &Inputs, plan: &mut RootPlan) -> Vec<Entry> {
    let g = inp.grant;
    let roots = Roots::usable(inp);
    let mut entries = Vec::new();
    root_entries(inp, &roots, &mut entries);
    let all_roots: Vec<PathBuf> = roots.writes.iter().chain(&roots.reads).cloned().collect();
    let root_is_bound = all_roots.iter().any(|r| r == Path::new("/"));
    if !all_roots.iter().any(|r| r == Path::new("/dev")) {
        dev_entries(&mut entries);
    }
    fresh_filesystems(g, plan, &mut entries);
    if !root_is_bound {
        merged_usr_links(&all_roots, &mut entries);
    }
    protected_entries(g, &roots.writes, plan, &mut entries);
    for (path, source) in inp.files {
        entries.push(Entry {
            path: path.clone(),
            kind: Kind::Generated {
                source: source.clone(),
            },
            dir: false,
        });
    }
    masks(inp, &all_roots, &mut entries);
    entries
}

/// The granted roots that name something, each with whether it is a
/// directory (`None`: a dangling link, which gets no entry).
struct Roots {
    write: Vec<(PathBuf, Option<bool>)>,
    read: Vec<(PathBuf, Option<bool>)>,
    writes: Vec<PathBuf>,
    reads: Vec<PathBuf>,
}

impl Roots {
    fn usable(inp: &Inputs) -> Roots {
        let g = inp.grant;
        // /proc and the ptys get fresh filesystems of their own.
        let usable = |p: &PathBuf| {
            if within(p, Path::new("/proc")) || p == Path::new(PTMX) || within(p, Path::new(PTS)) {
                return None;
            }
            probe(p).map(|dir| (p.clone(), dir))
        };
        let write: Vec<_> = g.write.iter().filter_map(usable).collect();
        let read: Vec<_> = g
            .read
            .iter()
            .chain(inp.extra_read)
            .filter_map(usable)
            .collect();
        Roots {
            writes: write.iter().map(|(p, _)| p.clone()).collect(),
            reads: read.iter().map(|(p, _)| p.clone()).collect(),
            write,
            read,
        }
    }
}

/// Ptys come from a private devpts instance, never the host's.
const PTMX: &str = "/dev/ptmx";
const PTS: &str = "/dev/pts";

/// One bind of a granted root (a device beneath `/dev`).
fn root_entry(p: &Path, dir: Option<bool>, writable: bool, entries: &mut Vec<Entry>) {
    let Some(dir) = dir else { return };
    // Beneath /dev: device nodes and their directories (/dev/pts), bound
    // without nodev.
    let dev = Path::new("/dev");
    let kind = if within(p, dev) && p != dev {
        Kind::Device
    } else {
        Kind::Bind { writable }
    };
    entries.push(Entry {
        path: p.to_path_buf(),
        kind,
        dir,
    });
}

/// A bind for each root that another does not already cover.
fn root_entries(inp: &Inputs, roots: &Roots, entries: &mut Vec<Entry>) {
    let (writes, reads) = (&roots.writes, &roots.reads);
    for (i, (w, dir)) in roots.write.iter().enumerate() {
        // A write root inside another write root adds nothing.
        let covered = writes
            .iter()
            .enumerate()
            .any(|(j, o)| j != i && within(w, o) && (w != o || j < i));
        if !covered {
            root_entry(w, *dir, true, entries);
        }
    }
    for (i, (r, dir)) in roots.read.iter().enumerate() {
        // Landlock's rights are a union: beneath a write root, or beneath
        // another read root, a read root adds nothing; except a file of
        // the call's own inside one of toolcage's hidden directories,
        // which is bound again into the tmpfs that covers it (below).
        let in_hidden =
            inp.extra_read.contains(r) && inp.hidden.iter().any(|h| r != h && r.starts_with(h));
        let covered = !in_hidden
            && (beneath(r, writes)
                || reads
                    .iter()
                    .enumerate()
                    .any(|(j, o)| j != i && within(r, o) && (r != o || j < i)));
        if !covered {
            root_entry(r, *dir, false, entries);
        }
    }
}

/// `/dev` when no root grants it: a tmpfs with the standard devices the
/// host has and the `/proc/self/fd` links.
fn dev_entries(entries: &mut Vec<Entry>) {
    let dev = Path::new("/dev");
    entries.push(Entry {
        path: dev.into(),
        kind: Kind::Tmpfs {
            mode: 0o755,
            size: 0,
        },
        dir: true,
    });
    for d in STANDARD_DEVICES {
        let p = Path::new(d);
        let is_dev = p
            .metadata()
            .map(|m| m.file_type().is_char_device())
            .unwrap_or(false);
        if is_dev && !entries.iter().any(|e| e.path == p) {
            entries.push(Entry {
                path: p.into(),
                kind: Kind::Device,
                dir: false,
            });
        }
    }
    for (name, target) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        entries.push(Entry {
            path: dev.join(name),
            kind: Kind::Symlink {
                target: target.into(),
            },
            dir: false,
        });
    }
}

/// The filesystems made for the call (ptys when a write root asks for
/// them, `/dev/shm`, `/proc`, a private `/tmp`), each with the rights the
/// tool gets beneath it.
fn fresh_filesystems(g: &Grant, plan: &mut RootPlan, entries: &mut Vec<Entry>) {
    let (ptmx, pts) = (Path::new(PTMX), Path::new(PTS));
    if g.write.iter().any(|w| w == ptmx || w == pts) {
        entries.push(Entry {
            path: pts.into(),
            kind: Kind::Devpts,
            dir: true,
        });
        entries.push(Entry {
            path: ptmx.into(),
            kind: Kind::Symlink {
                target: "pts/ptmx".into(),
            },
            dir: false,
        });
        plan.fresh_rules.push((lit("/dev/pts"), FreshAccess::All));
    }
    entries.push(Entry {
        path: "/dev/shm".into(),
        kind: Kind::Scratch { sub: SCRATCH_SHM },
        dir: true,
    });
    plan.fresh_rules.push((lit("/dev/shm"), FreshAccess::All));
    let proc_ = Path::new("/proc");
    entries.push(Entry {
        path: proc_.into(),
        kind: Kind::Proc,
        dir: true,
    });
    let proc_access = if g.write.iter().any(|w| w == proc_) {
        FreshAccess::All
    } else {
        FreshAccess::Read
    };
    plan.fresh_rules.push((lit("/proc"), proc_access));
    if g.private_tmp {
        entries.push(Entry {
            path: "/tmp".into(),
            kind: Kind::Scratch { sub: SCRATCH_TMP },
            dir: true,
        });
        plan.fresh_rules.push((lit("/tmp"), FreshAccess::All));
    }
}

/// Merged-/usr systems: /bin -> usr/bin and friends, where the target is
/// granted (roots are canonical, so the grant names /usr/bin).
fn merged_usr_links(all_roots: &[PathBuf], entries: &mut Vec<Entry>) {
    let Ok(top) = std::fs::read_dir("/") else {
        return;
    };
    for e in top.flatten() {
        // The directory entry's type costs no syscall; readlink only links.
        if !e.file_type().is_ok_and(|t| t.is_symlink()) {
            continue;
        }
        let p = e.path();
        let Ok(target) = std::fs::read_link(&p) else {
            continue;
        };
        let granted = canon::canonical(&p).is_ok_and(|real| beneath(&real, all_roots));
        if granted && !entries.iter().any(|x| x.path == p) {
            entries.push(Entry {
                path: p,
                kind: Kind::Symlink { target },
                dir: false,
            });
        }
    }
}

/// Protected paths: read-only where they lie inside a write root.
fn protected_entries(g: &Grant, writes: &[PathBuf], plan: &mut RootPlan, entries: &mut Vec<Entry>) {
    for p in &g.protected {
        if !beneath(p, writes) {
            continue; // outside every write root nothing can write it anyway
        }
        match p.symlink_metadata() {
            Ok(m) if m.file_type().is_symlink() => {
                // A symlink cannot be a mount point: protect what it names,
                // and remember the link so that replacing it is reported.
                match (canon::canonical(p), std::fs::read_link(p)) {
                    (Ok(target), Ok(link)) => {
                        if beneath(&target, writes) {
                            let dir = target.is_dir();
                            entries.push(Entry {
                                path: target,
                                kind: Kind::Protect,
                                dir,
                            });
                        }
                        plan.protected_links.push((p.clone(), link));
                    }
                    _ => plan.missing_protected.push(p.clone()),
                }
            }
            Ok(m) => entries.push(Entry {
                path: p.clone(),
                kind: Kind::Protect,
                dir: m.is_dir(),
            }),
            Err(_) => plan.missing_protected.push(p.clone()),
        }
    }
}

/// Denied paths and toolcage's hidden directories, where a root grants
/// them: masked by an empty directory or file.
fn masks(inp: &Inputs, all_roots: &[PathBuf], entries: &mut Vec<Entry>) {
    for p in inp.grant.denied.iter().chain(inp.hidden) {
        if !beneath(p, all_roots) {
            continue; // never granted in the first place
        }
        // toolcage's own directory that holds a file granted to this call
        // (its parameters file): an empty private tmpfs in its place, so
        // the call's own file can be bound into it and nothing else of it
        // shows.
        let holds_extra = inp.extra_read.iter().any(|f| f != p && f.starts_with(p));
        if holds_extra && inp.hidden.contains(p) && p.is_dir() {
            entries.push(Entry {
                path: p.clone(),
                kind: Kind::Tmpfs {
                    mode: 0o711,
                    size: 0,
                },
                dir: true,
            });
            continue;
        }
        match p.metadata() {
            Ok(m) if m.is_dir() => entries.push(Entry {
                path: p.clone(),
                kind: Kind::MaskDir,
                dir: true,
            }),
            Ok(_) => entries.push(Entry {
                path: p.clone(),
                kind: Kind::MaskFile,
                dir: false,
            }),
            Err(_) => {}
        }
    }
}

/// Directories strictly between the nearest writable ancestor of each
/// guard (protected or denied path) and the guard itself.
pub(super) fn pins(entries: &[Entry]) -> Vec<Entry> {
    let mut out: Vec<Entry> = Vec::new();
    for e in entries {
        if !matches!(e.kind, Kind::Protect | Kind::MaskDir | Kind::MaskFile) {
            continue;
        }
        let Some(base) = entries
            .iter()
            .filter(|w| matches!(w.kind, Kind::Bind { writable: true }))
            .filter(|w| within(&e.path, &w.path) && e.path != w.path)
            .map(|w| &w.path)
            .max_by_key(|p| p.components().count())
        else {
            continue;
        };
        let mut dir = e.path.parent();
        while let Some(d) = dir {
            if d == base.as_path() || !within(d, base) {
                break;
            }
            let taken = entries.iter().any(|x| x.path == d) || out.iter().any(|x| x.path == d);
            if !taken {
                out.push(Entry {
                    path: d.to_path_buf(),
                    kind: Kind::Pin,
                    dir: true,
                });
            }
            dir = d.parent();
        }
    }
    out
}
