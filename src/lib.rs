//! trainplace: the binary's wiring (CLI and HTTPS server) around the pure engine in
//! `trainplace-engine`.
#![forbid(unsafe_code)]

pub mod advisor_server;
pub mod cli;
pub mod exit;
pub mod inventory;
pub mod mark_keys;
pub mod policy_dir;
pub mod sandbox_fleet;
pub mod server;
