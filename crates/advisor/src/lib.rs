//! Placeholder; filled in by its own issue.
#![forbid(unsafe_code)]
