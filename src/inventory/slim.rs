//! What the live inventory keeps of a watched Node or Namespace: only what a snapshot
//! reads, so the caches of a large cluster stay small, and an update that changes none
//! of it (a node's periodic status report) does not cost a snapshot rebuild.

use k8s_openapi::api::core::v1::{Namespace, Node, NodeStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::reflector::{ObjectRef, Store};

/// Whether `obj` (slimmed) differs from the cached copy in anything but its
/// resourceVersion; an object the cache does not hold does.
pub(crate) fn changes_cache<K>(cached: &Store<K>, obj: &K) -> bool
where
    K: kube::Resource<DynamicType = ()> + Clone + PartialEq,
{
    let Some(old) = cached.get(&ObjectRef::from_obj(obj)) else {
        return true;
    };
    let mut old = (*old).clone();
    old.meta_mut().resource_version = obj.meta().resource_version.clone();
    old != *obj
}

/// Keep of a cached Node its name, labels and allocatable: a GPU node's status lists
/// its container images (tens of KB) and conditions, which the snapshot never reads.
pub fn slim_node(node: &mut Node) {
    let allocatable = node.status.as_mut().and_then(|s| s.allocatable.take());
    *node = Node {
        metadata: slim_meta(std::mem::take(&mut node.metadata)),
        spec: None,
        status: Some(NodeStatus {
            allocatable,
            ..NodeStatus::default()
        }),
    };
}

/// Keep of a cached Namespace its name and labels.
pub fn slim_namespace(ns: &mut Namespace) {
    *ns = Namespace {
        metadata: slim_meta(std::mem::take(&mut ns.metadata)),
        spec: None,
        status: None,
    };
}

fn slim_meta(meta: ObjectMeta) -> ObjectMeta {
    ObjectMeta {
        name: meta.name,
        namespace: meta.namespace,
        labels: meta.labels,
        uid: meta.uid,
        resource_version: meta.resource_version,
        ..ObjectMeta::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::reflector::store::Writer;
    use kube::runtime::watcher::Event;
    use serde_json::json;

    fn node(version: &str, zone: &str, heartbeat: &str) -> Node {
        let mut n: Node = serde_json::from_value(json!({
            "metadata": {"name": "n1", "resourceVersion": version,
                "labels": {"topology.kubernetes.io/zone": zone}},
            "status": {"allocatable": {"nvidia.com/gpu": "8"},
                "conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": heartbeat}]}
        }))
        .unwrap();
        slim_node(&mut n);
        n
    }

    /// A node's status report (new resourceVersion and heartbeat, nothing the snapshot
    /// reads) does not change the cache; a new zone or a node not cached does.
    #[test]
    fn only_what_the_snapshot_reads_is_a_change() {
        let mut writer = Writer::<Node>::default();
        let cached = writer.as_reader();
        let first = node("1", "us-east-1a", "2026-11-22T10:00:00Z");
        assert!(changes_cache(&cached, &first));
        writer.apply_watcher_event(&Event::Apply(first));
        assert!(!changes_cache(
            &cached,
            &node("2", "us-east-1a", "2026-11-22T10:05:00Z")
        ));
        assert!(changes_cache(
            &cached,
            &node("3", "us-east-1b", "2026-11-22T10:05:00Z")
        ));
    }
}
