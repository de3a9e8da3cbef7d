//! What the inventory snapshot reads of a Node, a Pod and a Namespace, from either
//! form they arrive in: plain JSON (`kubectl get -o json` files, fixtures) or the typed
//! objects a live watch caches. One snapshot builder reads both through these traits,
//! so the files and the live watch share one code path, and the live path does not
//! serialise 100,000 cached pods to JSON on every rebuild.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use serde_json::Value;

use crate::read::annotations::JOB_IDENTITY_LABELS;
use crate::read::json::Lookup as _;
use crate::read::json::str_at;
use crate::read::quantity::parse_count;

/// The parts of a Node the snapshot reads.
pub trait NodeFacts {
    fn name(&self) -> &str;
    fn label(&self, key: &str) -> Option<&str>;
    /// A whole-number allocatable quantity (`0` when absent or not a count).
    fn allocatable(&self, resource: &str) -> u32;
}

/// The parts of a Pod the snapshot reads.
pub trait PodFacts {
    fn namespace(&self) -> Option<&str>;
    fn node_name(&self) -> Option<&str>;
    fn label(&self, key: &str) -> Option<&str>;
    /// The pod's job identity labels (`JOB_IDENTITY_LABELS` keys it carries).
    fn job_labels(&self) -> impl Iterator<Item = (&'static str, &str)> {
        JOB_IDENTITY_LABELS
            .iter()
            .filter_map(|(key, _)| Some((*key, self.label(key)?)))
    }
}

/// The parts of a Namespace the snapshot reads.
pub trait NamespaceFacts {
    fn name(&self) -> Option<&str>;
    fn labels(&self) -> BTreeMap<String, String>;
}

fn json_label<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    object.lookup("/metadata/labels")?.get(key)?.as_str()
}

impl NodeFacts for Value {
    fn name(&self) -> &str {
        str_at(self, &["metadata", "name"]).unwrap_or("")
    }
    fn label(&self, key: &str) -> Option<&str> {
        json_label(self, key)
    }
    fn allocatable(&self, resource: &str) -> u32 {
        self.lookup("/status/allocatable")
            .and_then(|a| a.get(resource))
            .and_then(|v| parse_count(v).ok())
            .unwrap_or(0)
    }
}

impl PodFacts for Value {
    fn namespace(&self) -> Option<&str> {
        str_at(self, &["metadata", "namespace"])
    }
    /// A finished pod (Failed, Succeeded) is placed nowhere: it no longer holds its zone.
    fn node_name(&self) -> Option<&str> {
        let finished = matches!(
            str_at(self, &["status", "phase"]),
            Some("Failed" | "Succeeded")
        );
        str_at(self, &["spec", "nodeName"]).filter(|_| !finished)
    }
    fn label(&self, key: &str) -> Option<&str> {
        json_label(self, key)
    }
}

impl NamespaceFacts for Value {
    fn name(&self) -> Option<&str> {
        str_at(self, &["metadata", "name"])
    }
    fn labels(&self) -> BTreeMap<String, String> {
        self.lookup("/metadata/labels")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                    .collect()
            })
            .unwrap_or_default()
    }
}

fn typed_label<'a>(labels: &'a Option<BTreeMap<String, String>>, key: &str) -> Option<&'a str> {
    labels.as_ref()?.get(key).map(String::as_str)
}

impl NodeFacts for Node {
    fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or("")
    }
    fn label(&self, key: &str) -> Option<&str> {
        typed_label(&self.metadata.labels, key)
    }
    fn allocatable(&self, resource: &str) -> u32 {
        self.status
            .as_ref()
            .and_then(|s| s.allocatable.as_ref())
            .and_then(|a| a.get(resource))
            .and_then(|q| q.0.trim().parse().ok())
            .unwrap_or(0)
    }
}

impl PodFacts for Pod {
    fn namespace(&self) -> Option<&str> {
        self.metadata.namespace.as_deref()
    }
    fn node_name(&self) -> Option<&str> {
        let phase = self.status.as_ref().and_then(|s| s.phase.as_deref());
        if matches!(phase, Some("Failed" | "Succeeded")) {
            return None;
        }
        self.spec.as_ref()?.node_name.as_deref()
    }
    fn label(&self, key: &str) -> Option<&str> {
        typed_label(&self.metadata.labels, key)
    }
}

impl NamespaceFacts for Namespace {
    fn name(&self) -> Option<&str> {
        self.metadata.name.as_deref()
    }
    fn labels(&self) -> BTreeMap<String, String> {
        self.metadata.labels.clone().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The typed and the JSON form of one object read the same.
    #[test]
    fn typed_and_json_forms_agree() {
        let node = json!({"metadata": {"name": "n1", "labels": {"a": "b"}},
            "status": {"allocatable": {"nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "32"}}});
        let typed: Node = serde_json::from_value(node.clone()).unwrap();
        for res in ["nvidia.com/gpu", "vpc.amazonaws.com/efa", "cpu"] {
            assert_eq!(
                NodeFacts::allocatable(&node, res),
                NodeFacts::allocatable(&typed, res)
            );
        }
        assert_eq!(NodeFacts::label(&node, "a"), NodeFacts::label(&typed, "a"));
        assert_eq!(NodeFacts::name(&node), NodeFacts::name(&typed));

        let pod = json!({"metadata": {"namespace": "ns", "labels": {"j": "x"}},
            "spec": {"nodeName": "n1", "containers": []}});
        let typed: Pod = serde_json::from_value(pod.clone()).unwrap();
        assert_eq!(PodFacts::node_name(&pod), PodFacts::node_name(&typed));
        assert_eq!(PodFacts::namespace(&pod), PodFacts::namespace(&typed));
        assert_eq!(PodFacts::label(&pod, "j"), PodFacts::label(&typed, "j"));
    }
}
