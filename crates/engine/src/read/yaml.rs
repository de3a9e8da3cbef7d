//! YAML documents into typed values, with `origin:line:column` in every error: the
//! catalog's reader, for the engine's policy files.

use serde::de::DeserializeOwned;

use crate::error::PolicyError;

pub(crate) use trainplace_catalog::yaml::API_VERSION;

/// Parse one YAML document into `T`, reporting `origin:line:column` on error.
pub(crate) fn parse_yaml<T: DeserializeOwned>(text: &str, origin: &str) -> Result<T, PolicyError> {
    Ok(trainplace_catalog::yaml::parse_yaml(text, origin)?)
}
