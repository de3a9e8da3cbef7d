//! Reading the object: its raw JSON and the edits made on it, quantities and YAML, the
//! AdmissionReview as it arrives, pod specs, the workload kinds and where their pod
//! templates sit, what a launcher's command line says, and which controller made a pod.
//! Nothing here decides anything.

pub mod annotations;
pub(crate) mod devices;
pub(crate) mod incoming;
pub(crate) mod json;
pub(crate) mod podspec;
pub(crate) mod quantity;
pub(crate) mod recognize;
pub(crate) mod templates;
pub(crate) mod workload;
pub(crate) mod yaml;
