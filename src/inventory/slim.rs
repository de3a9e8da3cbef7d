//! What the live inventory keeps of a watched Node or Namespace while a relist is
//! under way: only what a snapshot reads, so holding a large cluster's relist stays
//! small (a GPU node's status lists its container images, tens of KB).

use k8s_openapi::api::core::v1::{Namespace, Node, NodeStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

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
