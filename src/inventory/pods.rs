//! The pods of training jobs as the inventory keeps them: for each pod only its
//! namespace, its job identity labels and the node it is bound to. A cluster of
//! 100,000 training pods (5-20 KB each as the API sends them) then costs tens of MiB,
//! not GBs, and a snapshot rebuild walks small records instead of whole pods.
//!
//! The watch decodes each pod straight into [`PodPlacement`] (every other field is
//! skipped while parsing), and [`PodIndex`] applies the watch's events the way the
//! `kube` reflector store does (a relist replaces the index atomically at its end).

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::watcher::Event;
use serde::Deserialize;
use trainplace_engine::annotations::JOB_IDENTITY_LABELS;
use trainplace_engine::cluster_objects::PodFacts;

/// A Pod reduced, while it is parsed, to what the inventory reads.
#[derive(Debug, Clone, Deserialize)]
#[serde(from = "Wire")]
pub struct PodPlacement {
    metadata: ObjectMeta,
    node: Option<String>,
}

/// The fields of a Pod that are parsed at all; serde skips the rest unallocated.
#[derive(Deserialize)]
struct Wire {
    #[serde(default)]
    metadata: WireMeta,
    #[serde(default)]
    spec: WireSpec,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct WireMeta {
    name: Option<String>,
    namespace: Option<String>,
    resource_version: Option<String>,
    uid: Option<String>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct WireSpec {
    node_name: Option<String>,
}

impl From<Wire> for PodPlacement {
    fn from(w: Wire) -> Self {
        let mut labels = w.metadata.labels;
        labels.retain(|k, _| JOB_IDENTITY_LABELS.iter().any(|(id, _)| id == k));
        PodPlacement {
            metadata: ObjectMeta {
                name: w.metadata.name,
                namespace: w.metadata.namespace,
                resource_version: w.metadata.resource_version,
                uid: w.metadata.uid,
                labels: Some(labels),
                ..ObjectMeta::default()
            },
            node: w.spec.node_name,
        }
    }
}

impl kube::Resource for PodPlacement {
    type DynamicType = ();
    type Scope = k8s_openapi::NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        <Pod as kube::Resource>::kind(&())
    }
    fn group(_: &()) -> Cow<'_, str> {
        <Pod as kube::Resource>::group(&())
    }
    fn version(_: &()) -> Cow<'_, str> {
        <Pod as kube::Resource>::version(&())
    }
    fn plural(_: &()) -> Cow<'_, str> {
        <Pod as kube::Resource>::plural(&())
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// One pod in the index.
#[derive(Debug)]
pub struct Placement {
    namespace: String,
    node: Option<String>,
    /// Its job identity labels (key, value); usually one to three.
    jobs: Vec<(&'static str, Box<str>)>,
}

impl Placement {
    fn of(pod: &PodPlacement) -> Self {
        let labels = pod.metadata.labels.as_ref();
        Placement {
            namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            node: pod.node.clone(),
            jobs: JOB_IDENTITY_LABELS
                .iter()
                .filter_map(|(k, _)| Some((*k, labels?.get(*k)?.as_str().into())))
                .collect(),
        }
    }
}

impl PodFacts for Placement {
    fn namespace(&self) -> Option<&str> {
        Some(&self.namespace)
    }
    fn node_name(&self) -> Option<&str> {
        self.node.as_deref()
    }
    fn label(&self, key: &str) -> Option<&str> {
        self.jobs.iter().find(|(k, _)| *k == key).map(|(_, v)| &**v)
    }
    fn job_labels(&self) -> impl Iterator<Item = (&'static str, &str)> {
        self.jobs.iter().map(|(k, v)| (*k, &**v))
    }
}

type Key = (String, String);

fn key(pod: &PodPlacement) -> Key {
    (
        pod.metadata.namespace.clone().unwrap_or_default(),
        pod.metadata.name.clone().unwrap_or_default(),
    )
}

/// The pods one watch has delivered, keyed by namespace and name.
#[derive(Debug, Default)]
pub struct PodIndex {
    pods: HashMap<Key, Placement>,
    /// A relist in progress: filled by `InitApply`, swapped in at `InitDone`.
    relist: Option<HashMap<Key, Placement>>,
}

impl PodIndex {
    pub fn apply(&mut self, event: &Event<PodPlacement>) {
        match event {
            Event::Apply(pod) => {
                self.pods.insert(key(pod), Placement::of(pod));
            }
            Event::Delete(pod) => {
                self.pods.remove(&key(pod));
            }
            Event::Init => self.relist = Some(HashMap::new()),
            Event::InitApply(pod) => {
                self.relist
                    .get_or_insert_default()
                    .insert(key(pod), Placement::of(pod));
            }
            Event::InitDone => {
                if let Some(fresh) = self.relist.take() {
                    self.pods = fresh;
                }
            }
        }
    }

    pub fn placements(&self) -> impl Iterator<Item = &Placement> {
        self.pods.values()
    }

    pub fn len(&self) -> usize {
        self.pods.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pods.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, node: Option<&str>) -> PodPlacement {
        serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "team-a", "resourceVersion": "7",
                "labels": {"jobset.sigs.k8s.io/jobset-name": "llama", "app": "x"},
                "annotations": {"big": "x".repeat(1000)},
                "managedFields": [{"manager": "kubelet"}]},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": "Running"}
        }))
        .unwrap()
    }

    #[test]
    fn keeps_only_what_the_snapshot_reads() {
        let p = pod("a", Some("n1"));
        assert_eq!(p.node.as_deref(), Some("n1"));
        assert_eq!(p.metadata.resource_version.as_deref(), Some("7"));
        assert_eq!(p.metadata.annotations, None);
        assert_eq!(p.metadata.managed_fields, None);
        let labels = p.metadata.labels.as_ref().unwrap();
        assert_eq!(labels.len(), 1, "only job identity labels: {labels:?}");
        let placed = Placement::of(&p);
        assert_eq!(
            placed.label("jobset.sigs.k8s.io/jobset-name"),
            Some("llama")
        );
        assert_eq!(placed.label("app"), None);
    }

    #[test]
    fn applies_events_like_a_reflector() {
        let mut index = PodIndex::default();
        index.apply(&Event::Apply(pod("a", None)));
        index.apply(&Event::Apply(pod("a", Some("n1"))));
        index.apply(&Event::Apply(pod("b", Some("n2"))));
        assert_eq!(index.len(), 2);
        index.apply(&Event::Delete(pod("b", Some("n2"))));
        assert_eq!(index.len(), 1);
        assert_eq!(index.placements().next().unwrap().node_name(), Some("n1"));
        // A relist replaces the index only when it completes.
        index.apply(&Event::Init);
        index.apply(&Event::InitApply(pod("c", Some("n3"))));
        assert_eq!(index.len(), 1);
        index.apply(&Event::InitDone);
        assert_eq!(index.len(), 1);
        assert_eq!(index.placements().next().unwrap().node_name(), Some("n3"));
    }
}
