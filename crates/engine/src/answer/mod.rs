//! Answering: the AdmissionReview in and its response out (allowed, warnings, the
//! patch within its limits), and the signed marks that tell a controller's pods they
//! were admitted with their job.

pub(crate) mod admission;
pub(crate) mod response;
