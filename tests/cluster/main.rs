//! The suites that need a real control plane, in one test binary, so that a `cargo test`
//! run starts one control plane for them all (tests/sandbox/mod.rs): each suite is a
//! module (`cargo test --test cluster admission::` runs one), each test works in
//! namespaces of its own, and a test that changes what every namespace sees holds the
//! control plane alone for its duration (`sandbox::shared_exclusive`).
//!
//! Three suites start a control plane of their own, and say why at `sandbox::own`: the
//! advisor's (its fleet is the nodes its emitted eksctl config makes, nothing else), the
//! network proximity test's (a fleet under a known network topology that no other
//! suite's pods occupy) and the scale test's (it grows the cluster to 500 nodes and measures what trainplace and
//! a whole-cluster audit cost at that size). tests/helm_chart.rs, a test binary of its
//! own, starts one without trainplace registered (the chart refuses to install beside
//! another trainplace install).
//!
//! Fails (never skips) without the control plane: run scripts/test-deps.sh.

#[path = "../common/mod.rs"]
mod common;
#[path = "../common/manifests_helpers.rs"]
#[allow(dead_code)]
mod manifests_helpers;
#[path = "../sandbox/mod.rs"]
mod sandbox;

mod admission;
mod advisor;
mod certs;
mod controllers;
mod failure;
mod guardrails;
mod guardrails_alone;
mod inventory;
mod network;
mod reports;
mod scale;
mod strict;
