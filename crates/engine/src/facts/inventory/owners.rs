//! The controllers that own training pods, kept as their size and nothing else: what
//! an admission mark's pod count is compared with when a pod arrives from one of them
//! (issue 39, class 3). A mark binds the namespace, the job label, the owner's kind and
//! the content; all four can be written by a user on a workload of another size. Only
//! the owner itself says how many pods it runs, so the snapshot keeps, per owner, its
//! uid and its pod count as its controller computes it: a batch Job's active pods
//! (`parallelism`, never more than `completions`), a StatefulSet's `replicas`, a
//! training CRD's replicas summed over its replica specs.

use std::sync::Arc;

use serde_json::Value;

use super::Snapshot;
use crate::read::json::str_at;
use crate::read::workload::{count_at, kind_of, locate};

/// (namespace, API group, kind, name) of an owner.
pub(super) type OwnerKey = (String, String, String, String);

/// What the snapshot keeps of an owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerSize {
    pub uid: String,
    /// Pods the owner runs at once; `None` when it cannot be counted (past u32).
    pub pods: Option<u32>,
}

/// The API group of an `apiVersion` ("" for the core group).
fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(g, _)| g)
}

/// The size of an object that owns training pods; `None` for any other object.
pub(super) fn owner_size(o: &Value) -> Option<OwnerSize> {
    let group = group_of(str_at(o, &["apiVersion"])?);
    let kind = str_at(o, &["kind"])?;
    let pods = match (group, kind) {
        ("apps", "StatefulSet") => count_at(o, "/spec/replicas", 1).ok().map(|k| k.value),
        _ => {
            let k = kind_of(o).ok()?;
            if !k.is_workload() || k.pod_owner_kind().is_none() || k.owns_no_pods() {
                return None;
            }
            // A count past u32 or unreadable: unknown, never smaller than a mark.
            let (_, sites) = locate(o).ok()?;
            sites
                .iter()
                .try_fold(0u32, |acc, s| acc.checked_add(s.pods?))
        }
    };
    Some(OwnerSize {
        uid: str_at(o, &["metadata", "uid"]).unwrap_or("").to_string(),
        pods,
    })
}

fn key(namespace: &str, api_version: &str, kind: &str, name: &str) -> OwnerKey {
    (
        namespace.to_string(),
        group_of(api_version).to_string(),
        kind.to_string(),
        name.to_string(),
    )
}

impl Snapshot {
    /// Keep the size of each object that owns training pods (batch Jobs,
    /// StatefulSets, the training CRDs); other objects are ignored.
    pub fn add_owners<'v>(&mut self, objects: impl IntoIterator<Item = &'v Value>) {
        for o in objects {
            let Some(size) = owner_size(o) else {
                continue;
            };
            let at = |p: &[&str]| str_at(o, p).unwrap_or("");
            let k = key(
                at(&["metadata", "namespace"]),
                at(&["apiVersion"]),
                at(&["kind"]),
                at(&["metadata", "name"]),
            );
            Arc::make_mut(&mut self.objects)
                .owners
                .insert(k, Arc::new(size));
        }
    }

    pub(super) fn remove_owner(
        &mut self,
        namespace: &str,
        api_version: &str,
        kind: &str,
        name: &str,
    ) {
        let k = key(namespace, api_version, kind, name);
        if self.objects.owners.contains_key(&k) {
            Arc::make_mut(&mut self.objects).owners.remove(&k);
        }
    }

    /// The size of the owner a pod's controller reference names (`apiVersion`, `kind`,
    /// `name` in `namespace`), when the inventory holds it.
    pub fn owner(
        &self,
        namespace: &str,
        api_version: &str,
        kind: &str,
        name: &str,
    ) -> Option<&OwnerSize> {
        self.objects
            .owners
            .get(&key(namespace, api_version, kind, name))
            .map(Arc::as_ref)
    }
}
