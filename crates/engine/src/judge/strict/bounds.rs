//! The sizes past which strict mode refuses an accelerator pod as too large to judge,
//! the same in the engine and in the exported policies, so both walk lists of bounded
//! length (no real pod comes near them; a hostile one is refused, not walked).

/// Containers and init containers of one pod template.
pub const MAX_CONTAINERS: usize = 64;
/// Resource names in one container's limits.
pub const MAX_LIMITS: usize = 32;
/// Required node-selector terms of one template.
pub const MAX_TERMS: usize = 32;
/// Match expressions of one term.
pub const MAX_EXPRESSIONS: usize = 32;
/// Values of one match expression.
pub const MAX_VALUES: usize = 64;
