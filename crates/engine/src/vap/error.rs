//! Why a policy cannot be exported as ValidatingAdmissionPolicies.

use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq)]
pub enum ExportError {
    /// A part of the policy that a binding's namespace selector or CEL cannot say.
    #[error(
        "{origin}: cannot be exported as a ValidatingAdmissionPolicy: {message}. Rewrite it with namespace names or a selector of one requirement, or keep this rule webhook-only."
    )]
    Inexpressible { origin: String, message: String },
}
