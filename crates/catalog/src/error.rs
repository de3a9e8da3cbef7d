//! Why a catalog file cannot be used.

use thiserror::Error;

/// A catalog (or a file read like one) that does not parse or says something impossible.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum CatalogError {
    #[error("{origin}: {message}")]
    Parse { origin: String, message: String },
    #[error("{origin}: {message}")]
    Invalid { origin: String, message: String },
}
