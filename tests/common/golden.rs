//! Golden files: `UPDATE_GOLDEN=1` rewrites them on a developer's machine, and is
//! ignored where `CI` is set (`.ci/run` sets it), so a stale golden file fails CI even
//! when the variable leaks into its environment.

/// Whether a golden test should rewrite its file instead of comparing with it.
pub fn update() -> bool {
    std::env::var_os("UPDATE_GOLDEN").is_some() && std::env::var_os("CI").is_none()
}
