//! Which Landlock ABI the kernel offers: a leaf the probe, the report and
//! the ruleset all ask.

use std::sync::OnceLock;

/// The Landlock ABI version this kernel supports (0 = none).
pub fn kernel_abi() -> i32 {
    static ABI_VERSION: OnceLock<i32> = OnceLock::new();
    *ABI_VERSION.get_or_init(|| {
        // SAFETY: landlock_create_ruleset with a NULL attribute, size 0 and the
        // VERSION flag only returns the ABI version; it takes no pointers.
        let v = unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                std::ptr::null::<libc::c_void>(),
                0usize,
                1u32, // LANDLOCK_CREATE_RULESET_VERSION
            )
        };
        if v < 0 { 0 } else { v as i32 }
    })
}
