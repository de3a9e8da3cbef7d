//! Reading the object: its raw JSON, quantities and YAML, the AdmissionReview as it
//! arrives, pod specs and what their DRA claims ask for, the workload kinds and where
//! their pod templates sit, and what a launcher's command line says. Nothing here
//! decides anything.

pub mod annotations;
pub(crate) mod controller_edits;
pub(crate) mod devices;
pub(crate) mod incoming;
pub(crate) mod json;
pub(crate) mod podspec;
pub(crate) mod quantity;
pub(crate) mod recognize;
pub(crate) mod templates;
pub(crate) mod tree_size;
pub(crate) mod workload;
pub(crate) mod yaml;
