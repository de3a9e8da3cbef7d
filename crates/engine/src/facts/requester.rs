//! Who is asking, and where: what the policy needs to resolve modes and grants, and
//! what the cluster holds when an inventory is at hand.

use std::collections::BTreeMap;

use crate::facts::dra::Claims;
use crate::facts::inventory::Snapshot;
use crate::facts::mark::MarkKeys;
use crate::read::podspec::PodView;

/// Who is asking, and where: what the policy needs to resolve modes and grants.
#[derive(Debug, Clone, Default)]
pub struct Requester<'a> {
    pub namespace: &'a str,
    /// Labels of the namespace, when known (the webhook learns them from the cluster).
    pub namespace_labels: Option<&'a BTreeMap<String, String>>,
    pub groups: &'a [String],
    /// What the cluster holds, when a live cache or a fixture provides it.
    pub inventory: Option<&'a Snapshot>,
    /// The webhook's keys for admission marks; without them nothing is marked and no
    /// pod is trusted as made from an admitted template (the offline CLI).
    pub marks: Option<&'a MarkKeys>,
    /// The time rules that depend on it (Capacity Block ends) judge against; without
    /// it they are not evaluated.
    pub now: Option<jiff::Timestamp>,
    /// DRA objects submitted alongside the object (the CLI's input files); the
    /// inventory's own are looked up after these.
    pub claims: Option<&'a Claims>,
    /// The object as stored, when the request UPDATEs it: a workload template that still
    /// carries trainplace's mark keeps the grants it was admitted with (Kueue's
    /// unsuspend), and the job size its mark vouches for (Kueue restoring the
    /// parallelism it lowered). A CREATE is judged with the requester's own grants, so a
    /// copied mark grants nothing.
    pub updating: Option<&'a serde_json::Value>,
}

impl Requester<'_> {
    /// The view with its DRA claims counted in `namespace`, through the templates the
    /// requester submitted alongside, then the inventory's (unchanged when it has none).
    pub(crate) fn claims_resolved<'v>(
        &self,
        view: PodView<'v>,
        namespace: &str,
        catalog: &trainplace_catalog::Catalog,
    ) -> PodView<'v> {
        if view.claims == 0 {
            return view;
        }
        let sources: Vec<&Claims> = [self.claims, self.inventory.map(Snapshot::claims)]
            .into_iter()
            .flatten()
            .collect();
        let devices = crate::facts::dra::resolve(view.pod, namespace, &sources, catalog);
        view.with_devices(devices)
    }
}
