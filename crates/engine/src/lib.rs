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
//!   [`ending_within`]: running jobs on blocks that end soon; [`spread_jobs`]: running
//!   jobs over more layer-3 network nodes than the inventory says they needed.
//! - [`annotations`]: the public annotation and label names.
//! - [`Claims`]: DRA ResourceClaimTemplates, ResourceClaims and ComputeDomains that
//!   pods' `resourceClaims` are counted through (input files, or the [`Snapshot`]).
//! - [`bandwidth`]: expected nccl-tests busbw per instance type and node count (sourced rows).
//! - [`vap`]: the deny rules CEL can express, as ValidatingAdmissionPolicies.
//! - [`Budget`]: the work one review may do, sized from its body; a review past it ends
//!   with [`OverBudget`] (its [`Work`] is in [`Reviewed`]); a body whose object would
//!   take more than [`MAX_TREE_BYTES`] as a JSON tree is answered unread ([`TreeSize`]).
#![forbid(unsafe_code)]

mod answer;
mod budget;
mod engine;
mod error;
mod facts;
mod judge;
mod read;
pub mod vap;
mod write;

pub use facts::cluster_objects;
pub use read::annotations;
pub use trainplace_catalog::bandwidth;

pub use answer::admission::{
    Endpoint, MAX_TREE_BYTES, Outcome, Reviewed, TREE_CHECK_FROM_BYTES, review, review_bytes,
};
pub use answer::response::{DEFAULT_MAX_CONTAINERS, DEFAULT_MAX_PATCH_BYTES, Limits};
pub use budget::{Budget, OverBudget, Work};
pub use engine::update::judge_change;
pub use engine::{evaluate, evaluate_owned, judge_owned};
pub use error::PolicyError;
pub use facts::dra::Claims;
pub use facts::ending::{EndingJob, ending_within};
pub use facts::inventory::{OwnerSize, Snapshot};
pub use facts::job_index::JobIndex;
pub use facts::mark::{MarkKeys, take_unknown_key_id};
pub use facts::network_spread::{Layer3Use, SpreadJob, spread_jobs};
pub use facts::node_index::NodeIndex;
pub use facts::policy::{Document as PolicyDocument, EMBEDDED_POLICY, Mode, Policy};
pub use facts::requester::Requester;
pub use facts::reservations::Reservations;
pub use judge::bounds;
pub use judge::finding::{Finding, Rule};
pub use judge::plan::Change;
pub use judge::verdict::{Patch, Verdict};
pub use read::tree_size::TreeSize;
pub use read::workload::Kind;
pub use trainplace_catalog::{Catalog, InstanceProfile, Rdma};
pub use write::layout::MUTATED_TEXT_LIMIT;
