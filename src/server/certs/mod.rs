//! Self-managed serving certificates (`trainplace serve --self-managed-certs`), as
//! Kyverno's and Gatekeeper's certificate controllers do it: a CA and a serving
//! certificate in one Secret that every replica shares, the CA kept in the webhook
//! configurations' caBundle, and rotation before expiry with the old and the new CA both
//! trusted, so no request fails while it happens.
//!
//! Reading order: `settings` (the flags), `issue` (making certificates), `material` (the
//! Secret's layout), `plan` (the schedule, pure), `cluster` (the API calls), `run` (the
//! loop every replica runs).

mod cluster;
pub mod issue;
pub mod material;
pub mod plan;
pub mod register;
mod run;
pub mod settings;

pub use run::{serving_names, start};
pub use settings::{SelfManagedArgs, Settings};
