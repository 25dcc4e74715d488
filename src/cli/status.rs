//! Exit statuses (docs/cli.md#exit-statuses): the one place that turns what went
//! wrong into a number. The layers below expose a kind ([`CallErrorKind`],
//! [`SandboxErrorKind`], [`DenyReason`]); only the CLI knows the numbers.

use crate::call::CallErrorKind;
use crate::gate::DenyReason;
use crate::sandbox::SandboxErrorKind;

pub(crate) const OK: u8 = 0;
pub(crate) const TOOL_ERROR: u8 = 1;
pub(crate) const INVALID: u8 = 2;
pub(crate) const DENIED: u8 = 3;
pub(crate) const TIMEOUT: u8 = 124;
pub(crate) const INTERNAL: u8 = 125;
pub(crate) const CANNOT_EXECUTE: u8 = 126;
pub(crate) const NOT_FOUND: u8 = 127;

/// `toolcage call`: 2 unknown tool or invalid arguments, 3 denied (by the
/// gate, or stopped before it ran), 127 and 126 as `exec` when the tool's
/// program (or its interpreter) is not found or cannot be executed, 125
/// everything that is toolcage's own failure (an unsupported runner, a
/// policy that does not apply, sandbox setup, an unusable gate or audit log).
pub(crate) fn of_call(kind: CallErrorKind) -> u8 {
    match kind {
        CallErrorKind::UnknownTool | CallErrorKind::InvalidArguments => INVALID,
        CallErrorKind::Denied(reason) => of_denial(reason),
        CallErrorKind::NotRun => DENIED,
        CallErrorKind::Sandbox(kind) => of_sandbox(kind),
        CallErrorKind::Unsupported
        | CallErrorKind::Policy
        | CallErrorKind::Audit
        | CallErrorKind::Internal => INTERNAL,
    }
}

/// A call the gate refused: 3, or 125 when the gate itself is unusable.
pub fn of_denial(reason: DenyReason) -> u8 {
    match reason {
        DenyReason::Unavailable => INTERNAL,
        _ => DENIED,
    }
}

/// `toolcage exec`: 127 not found, 126 cannot execute, 125 toolcage's own
/// failure (a policy the kernel cannot enforce, sandbox setup).
pub(crate) fn of_sandbox(kind: SandboxErrorKind) -> u8 {
    match kind {
        SandboxErrorKind::NotFound => NOT_FOUND,
        SandboxErrorKind::CannotExecute => CANNOT_EXECUTE,
        SandboxErrorKind::Setup => INTERNAL,
    }
}
