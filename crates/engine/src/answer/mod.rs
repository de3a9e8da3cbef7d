//! Answering: an AdmissionReview through the engine and its response out (allowed,
//! warnings, the patch within its limits).

pub(crate) mod admission;
pub(crate) mod response;
