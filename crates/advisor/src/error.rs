//! Bad input, typed: every error names where it was found (a field path) so the CLI
//! can print it and the HTTP face can return it as a 422 with the same path.

use serde::Serialize;

/// Which input the error is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum InputSource {
    Request,
    Offerings,
    InstanceTypes,
    Nodes,
    /// `--existing-reservations` (describe-capacity-reservations).
    Reservations,
}

/// One piece of bad input: where, what is wrong, and (when finite) what is allowed.
#[derive(Debug, Clone, PartialEq, thiserror::Error, Serialize)]
#[serde(rename_all = "camelCase")]
#[error("{source_name} {field}: {message}{}", allowed_suffix(.allowed))]
pub struct InputError {
    pub input: InputSource,
    /// Field path inside that input, e.g. `gpus` or `CapacityBlockOfferings[2].UpfrontFee`.
    pub field: String,
    pub message: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allowed: Vec<String>,
    #[serde(skip)]
    source_name: &'static str,
}

fn allowed_suffix(allowed: &[String]) -> String {
    if allowed.is_empty() {
        String::new()
    } else {
        format!(" (allowed: {})", allowed.join(", "))
    }
}

impl InputError {
    pub fn new(source: InputSource, field: impl Into<String>, message: impl Into<String>) -> Self {
        let source_name = match source {
            InputSource::Request => "request",
            InputSource::Offerings => "offerings",
            InputSource::InstanceTypes => "instance types",
            InputSource::Nodes => "nodes",
            InputSource::Reservations => "existing reservations",
        };
        Self {
            input: source,
            field: field.into(),
            message: message.into(),
            allowed: Vec::new(),
            source_name,
        }
    }

    pub fn request(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(InputSource::Request, field, message)
    }

    pub fn with_allowed<I, S>(mut self, allowed: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.allowed = allowed.into_iter().map(Into::into).collect();
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_names_field_and_allowed_values() {
        let e =
            InputError::request("family", "unknown family \"v100\"").with_allowed(["a100", "any"]);
        assert_eq!(
            e.to_string(),
            "request family: unknown family \"v100\" (allowed: a100, any)"
        );
    }
}
