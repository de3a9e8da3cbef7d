//! The layout steps: each writes one part of the recommended layout into a pod
//! template when it is missing, and records the change with its reason.

mod devices;
mod env;
mod network;
mod scheduling;
mod spec;

pub(super) use scheduling::zone_hold;
pub(super) use spec::push_required;
