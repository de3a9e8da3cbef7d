//! Process exit codes: one table for every subcommand (check, mutate, audit, policy,
//! advise, diagnose), so scripts can rely on the same numbers everywhere.
//!
//! A command whose stdout reader closes early (`trainplace policy export --format vap |
//! head -1`) stops writing and exits 0, quietly, whatever code it would have had: the
//! reader took what it wanted (src/cli/out.rs). Another failed write exits 1.

/// Process exit codes shared by every command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitCode {
    /// Everything allowed (warnings are fine).
    Ok = 0,
    /// At least one object denied / an error-level finding.
    Denied = 1,
    /// Input could not be read or parsed.
    BadInput = 2,
}
