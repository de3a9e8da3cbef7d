//! YAML documents into typed values, with `origin:line:column` in every error: the
//! catalog here, and the engine's policy files through the same function.

use serde::de::DeserializeOwned;

use crate::error::CatalogError;

/// The apiVersion of trainplace's own files (Policy, InstanceCatalog).
pub const API_VERSION: &str = "trainplace.io/v1alpha1";

/// Parse one YAML document into `T`, reporting `origin:line:column` on error.
pub fn parse_yaml<T: DeserializeOwned>(text: &str, origin: &str) -> Result<T, CatalogError> {
    serde_yaml_ng::from_str(text).map_err(|e| {
        let at = e
            .location()
            .map(|l| format!(":{}:{}", l.line(), l.column()))
            .unwrap_or_default();
        CatalogError::Parse {
            origin: format!("{origin}{at}"),
            message: e.to_string(),
        }
    })
}
