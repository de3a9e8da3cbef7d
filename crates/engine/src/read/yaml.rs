//! YAML documents into typed values, with `origin:line:column` in every error. A leaf:
//! the catalog and the policy both parse through it.

use serde::de::DeserializeOwned;

use crate::error::PolicyError;

/// The apiVersion of trainplace's own files (Policy, InstanceCatalog).
pub(crate) const API_VERSION: &str = "trainplace.io/v1alpha1";

/// Parse one YAML document into `T`, reporting `origin:line:column` on error.
pub(crate) fn parse_yaml<T: DeserializeOwned>(text: &str, origin: &str) -> Result<T, PolicyError> {
    serde_yaml_ng::from_str(text).map_err(|e| {
        let at = e
            .location()
            .map(|l| format!(":{}:{}", l.line(), l.column()))
            .unwrap_or_default();
        PolicyError::Parse {
            origin: format!("{origin}{at}"),
            message: e.to_string(),
        }
    })
}
