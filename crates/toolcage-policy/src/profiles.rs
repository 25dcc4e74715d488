//! The shipped profiles, embedded so an installed binary works anywhere.

/// Every shipped profile: name and TOML text. `default` is always applied
/// first; the others are layered over it.
pub(crate) const PROFILES: &[(&str, &str)] = &[
    ("default", include_str!("../../../policies/default.toml")),
    (
        "untrusted",
        include_str!("../../../policies/untrusted.toml"),
    ),
    ("ci", include_str!("../../../policies/ci.toml")),
    ("network", include_str!("../../../policies/network.toml")),
];

/// The names accepted by `--profile`.
pub fn profile_names() -> Vec<&'static str> {
    PROFILES.iter().map(|(n, _)| *n).collect()
}

/// The TOML text of a shipped profile.
pub(crate) fn profile_text(name: &str) -> Option<&'static str> {
    PROFILES.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}
