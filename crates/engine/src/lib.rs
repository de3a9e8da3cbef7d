//! trainplace's one pure engine: a Kubernetes object in, a verdict out (allow or deny,
//! findings, warnings, an RFC 6902 JSON Patch computed on the raw JSON). The webhook,
//! the offline CLI and the advisor all call [`engine::evaluate`]. No I/O here beyond
//! reading a policy directory on request.
#![forbid(unsafe_code)]

pub mod admission;
pub mod annotations;
pub mod bandwidth;
pub mod catalog;
pub mod error;
pub mod json;
pub mod policy;
pub mod quantity;

pub use catalog::{Catalog, InstanceProfile};
pub use error::{ObjectError, PolicyError};
pub use policy::{Mode, Policy, Requester};

pub mod classify;
pub mod edit;
pub mod engine;
pub mod finding;
pub mod inventory;
pub mod layout;
pub mod podspec;
pub mod reshape;
pub mod rules;
pub mod trainjob;
pub mod workload;

pub use engine::{Verdict, evaluate, evaluate_owned};
pub use finding::{Finding, Rule};
