//! Typed errors at the engine's edges.

use thiserror::Error;

/// A policy or catalog file that cannot be used.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum PolicyError {
    #[error("{origin}: {message}")]
    Parse { origin: String, message: String },
    #[error("{origin}: {message}")]
    Invalid { origin: String, message: String },
    #[error("{path}: cannot read: {message}")]
    Io { path: String, message: String },
}

impl From<trainplace_catalog::CatalogError> for PolicyError {
    fn from(e: trainplace_catalog::CatalogError) -> Self {
        use trainplace_catalog::CatalogError;
        match e {
            CatalogError::Parse { origin, message } => PolicyError::Parse { origin, message },
            CatalogError::Invalid { origin, message } => PolicyError::Invalid { origin, message },
        }
    }
}

/// An object the engine cannot judge. The webhook answers these with a denial that
/// carries the message; the CLI prints it and exits non-zero.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum ObjectError {
    #[error("the object is not a JSON object")]
    NotAnObject,
    #[error("{field}: {message}")]
    BadField { field: String, message: String },
    /// Judging it would take more work than the review's budget grants.
    #[error(transparent)]
    OverBudget(#[from] crate::budget::OverBudget),
}

impl ObjectError {
    pub fn bad(field: impl Into<String>, message: impl Into<String>) -> Self {
        ObjectError::BadField {
            field: field.into(),
            message: message.into(),
        }
    }
}
