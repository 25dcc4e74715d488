//! The enforcement report carried by every outcome: what the kernel actually
//! enforced for this call, and what was degraded.

use super::isolation::{IsolationMode, Lack};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LandlockStatus {
    FullyEnforced,
    PartiallyEnforced,
    NotEnforced,
}

/// A kernel feature that this call runs without.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Degradation {
    pub feature: String,
    /// Another layer covers the gap for this grant.
    pub compensated: bool,
    pub note: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LandlockReport {
    /// The kernel's Landlock ABI version (0: not available).
    pub abi: i32,
    pub status: LandlockStatus,
    pub missing: Vec<Degradation>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnforcementReport {
    /// `namespaces`, or `namespace-free` where namespaces are unavailable.
    pub mode: IsolationMode,
    /// What namespace-free mode lacks, each with what compensates it.
    /// Not read back: the one reader (the pool's maker, `maker.rs`) makes
    /// namespaced sandboxes only, which lack nothing.
    #[serde(skip_deserializing)]
    pub lacking: Vec<Lack>,
    pub landlock: LandlockReport,
    /// The seccomp deny list was installed.
    pub seccomp: bool,
    /// Every capability set (bounding, effective, permitted, inheritable, ambient) is empty.
    /// Namespace-free as an ordinary user, the bounding set stays as inherited
    /// (changing it needs CAP_SETPCAP); the user holds no capability and
    /// no_new_privs stops any exec from gaining one.
    pub capabilities_dropped: bool,
    pub no_new_privs: bool,
    /// The call runs in its own PID namespace: nothing it starts outlives it.
    pub pid_namespace: bool,
    /// Protected and denied paths are enforced with a private mount namespace.
    pub mount_namespace: bool,
    /// The call sees a root built from its grant, not the host's.
    pub constructed_root: bool,
    /// Its own SysV IPC and POSIX message queues.
    pub ipc_namespace: bool,
    /// Its own network namespace (loopback only): network off.
    pub network_namespace: bool,
    /// Bytes of memory the call's private `/tmp` and `/dev/shm` hold
    /// together (one tmpfs, `[limits] tmp`); `None`: no private tmpfs
    /// (namespace-free, `TMPDIR` is a host directory, each file bounded by
    /// `file_size` only).
    pub tmp_bytes: Option<u64>,
    pub rlimits: bool,
    /// Limits lowered to the hard limit toolcage inherited.
    pub rlimits_clamped: Vec<String>,
    /// Human-readable list of everything degraded and not compensated.
    pub degraded: Vec<String>,
}

impl EnforcementReport {
    /// A call no process ran: toolcage made it itself (an http tool), so no
    /// sandbox layer applies and none is claimed; the network policy did.
    pub fn in_process() -> EnforcementReport {
        EnforcementReport {
            mode: IsolationMode::InProcess,
            lacking: Vec::new(),
            landlock: LandlockReport {
                abi: super::landlock_abi::kernel_abi(),
                status: LandlockStatus::NotEnforced,
                missing: Vec::new(),
            },
            seccomp: false,
            capabilities_dropped: false,
            no_new_privs: false,
            pid_namespace: false,
            mount_namespace: false,
            constructed_root: false,
            ipc_namespace: false,
            network_namespace: false,
            tmp_bytes: None,
            rlimits: false,
            rlimits_clamped: Vec::new(),
            degraded: Vec::new(),
        }
    }

    /// One line for logs and the CLI: `landlock=full(abi 7) seccomp=on ...`.
    pub fn summary(&self) -> String {
        let ll = match self.landlock.status {
            LandlockStatus::FullyEnforced => "full",
            LandlockStatus::PartiallyEnforced => "partial",
            LandlockStatus::NotEnforced => "off",
        };
        let on = |b: bool| if b { "on" } else { "off" };
        let mut s = format!(
            "mode={} landlock={ll}(abi {}) seccomp={} caps=dropped:{} pidns={} mountns={} root={} ipcns={} netns={}",
            self.mode.name(),
            self.landlock.abi,
            on(self.seccomp),
            self.capabilities_dropped,
            on(self.pid_namespace),
            on(self.mount_namespace),
            if self.constructed_root {
                "constructed"
            } else {
                "host"
            },
            on(self.ipc_namespace),
            on(self.network_namespace),
        );
        match self.tmp_bytes {
            Some(n) => s.push_str(&format!(" tmp={}", toolcage_policy::format_size(n))),
            None => s.push_str(" tmp=host"),
        }
        if !self.degraded.is_empty() {
            s.push_str(&format!(" degraded=[{}]", self.degraded.join("; ")));
        }
        s
    }
}
