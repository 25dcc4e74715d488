//! MCP tool annotations derived from the grant (DESIGN.md section 6): what
//! the sandbox will let the tool do, not what the tool claims.

use crate::policy::{Grant, Network};
use serde_json::{Value, json};

/// `{readOnlyHint, destructiveHint, openWorldHint}` for a tool run under `grant`.
///
/// - `readOnlyHint`: no write roots besides `/dev/null` (private tmp does not count).
/// - `destructiveHint`: the opposite (it may change files it was granted).
/// - `openWorldHint`: any network access.
pub fn annotations(grant: &Grant) -> Value {
    let read_only = grant.is_read_only();
    json!({
        "readOnlyHint": read_only,
        "destructiveHint": !read_only,
        "openWorldHint": grant.network != Network::Off,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_the_grant() {
        let mut g = Grant::closed("/p".into());
        g.write = vec!["/dev/null".into()];
        assert_eq!(
            annotations(&g),
            json!({"readOnlyHint": true, "destructiveHint": false, "openWorldHint": false})
        );
        g.write.push("/p".into());
        g.network = Network::On;
        assert_eq!(
            annotations(&g),
            json!({"readOnlyHint": false, "destructiveHint": true, "openWorldHint": true})
        );
        g.network = Network::Tcp {
            connect: vec![443],
            bind: vec![],
        };
        assert_eq!(annotations(&g)["openWorldHint"], true);
    }
}
