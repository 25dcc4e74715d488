//! The management tools of one server, as data: what the server holds
//! (`Shared::manage`) without depending on how they answer (`mod.rs`).

use crate::gate::Gate;
use crate::policy::ManagePolicy;
use std::path::PathBuf;
use std::sync::Arc;

/// The management tools of one server.
pub(crate) struct Manager {
    pub(crate) policy: ManagePolicy,
    /// The project root (symlinks resolved).
    pub(crate) project: PathBuf,
    /// For the audit log and the state directory (the lock).
    pub(crate) gate: Arc<Gate>,
}
