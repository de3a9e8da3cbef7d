//! Who is asking, and where: what the policy needs to resolve modes and grants, and
//! what the cluster holds when an inventory is at hand.

use std::collections::BTreeMap;

use crate::inventory::Snapshot;

/// Who is asking, and where: what the policy needs to resolve modes and grants.
#[derive(Debug, Clone, Default)]
pub struct Requester<'a> {
    pub namespace: &'a str,
    /// Labels of the namespace, when known (the webhook learns them from the cluster).
    pub namespace_labels: Option<&'a BTreeMap<String, String>>,
    pub groups: &'a [String],
    /// What the cluster holds, when a live cache or a fixture provides it.
    pub inventory: Option<&'a Snapshot>,
}
