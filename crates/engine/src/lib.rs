//! trainplace's one pure engine: a Kubernetes object in, a verdict out (allow or deny,
//! findings, warnings, an RFC 6902 JSON Patch computed on the raw JSON). The webhook,
//! the offline CLI and the advisor all call [`evaluate`]. No I/O: callers read policy
//! files and cluster state and hand them in.
//!
//! The contract, on one screen:
//! - [`evaluate`] / [`evaluate_owned`]: judge and lay out one object -> [`Verdict`]
//!   ([`Finding`]s by [`Rule`] and [`Mode`], [`Change`]s, the patch, the object after).
//! - [`review`]: the same for an AdmissionReview (`/mutate`, `/validate`: [`Endpoint`]).
//! - [`Policy`] (from [`PolicyDocument`]s or embedded) with its [`Catalog`] of
//!   [`InstanceProfile`]s; [`Requester`]: who asks, where, with which [`Snapshot`] of
//!   the cluster.
//! - [`MarkKeys`]: the webhook's keys for signed admission marks; [`Reservations`]:
//!   Capacity Blocks, read into the [`Snapshot`] with the nodes on them;
//!   [`ending_within`]: running jobs on blocks that end soon.
//! - [`annotations`]: the public annotation and label names.
//! - [`Claims`]: DRA ResourceClaimTemplates, ResourceClaims and ComputeDomains that
//!   pods' `resourceClaims` are counted through (input files, or the [`Snapshot`]).
//! - [`bandwidth`]: expected nccl-tests busbw per instance type and node count (sourced rows).
//! - [`vap`]: the deny rules CEL can express, as ValidatingAdmissionPolicies.
#![forbid(unsafe_code)]

mod admission;
pub mod annotations;
pub mod bandwidth;
mod block_nodes;
mod capacity_block;
mod catalog;
mod classify;
pub mod cluster_objects;
mod dra;
mod edit;
mod efa_source;
mod ending;
mod engine;
mod error;
mod finding;
mod incoming;
mod inventory;
mod job_index;
mod json;
mod judge;
mod layout;
mod mark;
mod node_types;
mod nvlink;
mod owner;
mod placement;
mod podspec;
mod policy;
mod quantity;
mod recognize;
mod requester;
mod reservations;
mod reshape;
mod response;
mod rules;
mod selection;
mod split_zones;
mod trainjob;
mod update;
mod upstream;
pub mod vap;
mod verdict;
mod workload;
mod yaml;

pub use admission::{Endpoint, Outcome, Reviewed, review, review_bytes};
pub use catalog::{Catalog, InstanceProfile, Rdma};
pub use dra::Claims;
pub use ending::{EndingJob, ending_within};
pub use engine::{evaluate, evaluate_owned, judge_owned};
pub use error::PolicyError;
pub use finding::{Finding, Rule};
pub use inventory::Snapshot;
pub use job_index::JobIndex;
pub use layout::{Change, MUTATED_TEXT_LIMIT};
pub use mark::MarkKeys;
pub use policy::{Document as PolicyDocument, EMBEDDED_POLICY, Mode, Policy};
pub use requester::Requester;
pub use reservations::Reservations;
pub use response::{DEFAULT_MAX_CONTAINERS, DEFAULT_MAX_PATCH_BYTES, Limits};
pub use update::judge_change;
pub use verdict::Verdict;
pub use workload::Kind;
