//! The pods of training jobs as the inventory keeps them: for each pod only its
//! namespace, its job identity labels and the node it is bound to. A cluster of
//! 100,000 training pods (5-20 KB each as the API sends them) then costs tens of MiB,
//! not GBs, and a snapshot rebuild walks small records instead of whole pods.
//!
//! The watch decodes each pod straight into [`PodPlacement`] (every other field is
//! skipped while parsing), and [`PodIndex`] applies the watch's events the way the
//! `kube` reflector store does (a relist replaces a watch's pods atomically at its
//! end). Each event also updates the index of where each job's pods are bound
//! ([`JobIndex`]) by what changed, so a new snapshot never walks all pods.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::watcher::Event;
use serde::Deserialize;
use trainplace_engine::JobIndex;
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
    #[serde(default)]
    status: WireStatus,
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

#[derive(Deserialize, Default)]
struct WireStatus {
    phase: Option<String>,
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
            // A pod that has finished (a failed attempt, a completed rank) runs nowhere:
            // its zone says nothing about where the job's live pods are, and must not
            // hold a retry or an update to it.
            node: w
                .spec
                .node_name
                .filter(|_| !matches!(w.status.phase.as_deref(), Some("Failed" | "Succeeded"))),
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
#[derive(Debug, PartialEq, Eq)]
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
struct WatchedPods {
    pods: HashMap<Key, Placement>,
    /// A relist in progress: filled by `InitApply`, swapped in at `InitDone`.
    relist: Option<HashMap<Key, Placement>>,
}

/// The pods every pod watch has delivered (one watch per job identity label; a pod
/// with two such labels is in two), and where each job's pods are bound, counted as
/// the events arrive.
#[derive(Debug, Default)]
pub struct PodIndex {
    watches: Vec<WatchedPods>,
    jobs: JobIndex,
}

impl PodIndex {
    /// Apply one event of watch number `watch`. Costs O(the pods it changes): one
    /// for an applied or deleted pod; a relist compares the listed pods with those it
    /// replaces and counts only the differences.
    pub fn apply(&mut self, watch: usize, event: &Event<PodPlacement>) {
        if self.watches.len() <= watch {
            self.watches.resize_with(watch + 1, WatchedPods::default);
        }
        let (w, jobs) = (&mut self.watches[watch], &mut self.jobs);
        match event {
            Event::Apply(pod) => {
                let (key, new) = (key(pod), Placement::of(pod));
                if w.pods.get(&key) == Some(&new) {
                    return;
                }
                if let Some(old) = w.pods.remove(&key) {
                    jobs.remove(&old);
                }
                jobs.add(&new);
                w.pods.insert(key, new);
            }
            Event::Delete(pod) => {
                if let Some(old) = w.pods.remove(&key(pod)) {
                    jobs.remove(&old);
                }
            }
            Event::Init => w.relist = Some(HashMap::new()),
            Event::InitApply(pod) => {
                w.relist
                    .get_or_insert_default()
                    .insert(key(pod), Placement::of(pod));
            }
            Event::InitDone => {
                let Some(fresh) = w.relist.take() else {
                    return;
                };
                for (key, old) in &w.pods {
                    if fresh.get(key) != Some(old) {
                        jobs.remove(old);
                    }
                }
                for (key, new) in &fresh {
                    if w.pods.get(key) != Some(new) {
                        jobs.add(new);
                    }
                }
                w.pods = fresh;
            }
        }
    }

    /// Where each job's pods are bound, for a snapshot to be built or updated from.
    pub fn jobs_mut(&mut self) -> &mut JobIndex {
        &mut self.jobs
    }

    /// Every pod of every watch (for a rebuild from scratch to compare against).
    pub fn placements(&self) -> impl Iterator<Item = &Placement> {
        self.watches.iter().flat_map(|w| w.pods.values())
    }

    /// How many pods the watches hold (a pod in two watches counts twice).
    pub fn len(&self) -> usize {
        self.watches.iter().map(|w| w.pods.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use trainplace_engine::Snapshot;

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
    fn a_finished_pod_is_placed_nowhere() {
        for (phase, placed) in [
            ("Failed", false),
            ("Succeeded", false),
            ("Running", true),
            ("Pending", true),
        ] {
            let p: PodPlacement = serde_json::from_value(json!({
                "metadata": {"name": "a", "namespace": "team-a"},
                "spec": {"nodeName": "n1"}, "status": {"phase": phase}
            }))
            .unwrap();
            assert_eq!(p.node.is_some(), placed, "{phase}");
        }
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
        index.apply(0, &Event::Apply(pod("a", None)));
        index.apply(0, &Event::Apply(pod("a", Some("n1"))));
        index.apply(0, &Event::Apply(pod("b", Some("n2"))));
        assert_eq!(index.len(), 2);
        index.apply(0, &Event::Delete(pod("b", Some("n2"))));
        assert_eq!(index.len(), 1);
        assert_eq!(index.placements().next().unwrap().node_name(), Some("n1"));
        // A relist replaces the index only when it completes.
        index.apply(0, &Event::Init);
        index.apply(0, &Event::InitApply(pod("c", Some("n3"))));
        assert_eq!(index.len(), 1);
        index.apply(0, &Event::InitDone);
        assert_eq!(index.len(), 1);
        assert_eq!(index.placements().next().unwrap().node_name(), Some("n3"));
    }

    const JOBSET: &str = "jobset.sigs.k8s.io/jobset-name";
    const BATCH: &str = "batch.kubernetes.io/job-name";

    /// Pod `name` of job `job` (`None`: it lost its job labels) on node `node`.
    fn placed(name: usize, job: Option<usize>, node: Option<usize>) -> PodPlacement {
        let labels = match job {
            Some(j) => json!({JOBSET: format!("job-{j}"), BATCH: format!("job-{j}-0")}),
            None => json!({"app": "x"}),
        };
        serde_json::from_value(json!({
            "metadata": {"name": format!("p{name}"), "namespace": "team-a", "labels": labels},
            "spec": {"nodeName": node.map(|n| format!("n{n}"))}
        }))
        .unwrap()
    }

    /// Watch events of two pod watches (applied, deleted with a stale object, pods
    /// losing their job labels or moving zones, relists that replace a watch's pods)
    /// kept incrementally answer like a snapshot rebuilt from every pod, at every
    /// publish of a deterministic pseudo-random sequence.
    #[test]
    fn events_update_jobs_like_a_rebuild() {
        const JOBS: usize = 6;
        let zones = ["us-east-1a", "us-east-1b", "us-east-1c"];
        let nodes: Vec<serde_json::Value> = (0..7)
            .map(|i| {
                json!({"metadata": {"name": format!("n{i}"),
                "labels": {"topology.kubernetes.io/zone": zones[i % 3]}}})
            })
            .collect();
        let none: [serde_json::Value; 0] = [];
        let mut index = PodIndex::default();
        let mut snap = Snapshot::build_indexed(&nodes, index.jobs_mut(), &none);
        let mut rng = fastrand::Rng::with_seed(0x9E37_79B9_7F4A_7C15);
        for step in 0..3_000 {
            let watch = rng.usize(..2);
            let any = |rng: &mut fastrand::Rng| {
                let job = (rng.usize(..8) > 0).then(|| rng.usize(..JOBS));
                // Node 7 is not in the node list.
                let node = (rng.usize(..10) > 0).then(|| rng.usize(..8));
                placed(rng.usize(..25), job, node)
            };
            match rng.usize(..20) {
                0..=3 => index.apply(watch, &Event::Delete(any(&mut rng))),
                4 => {
                    index.apply(watch, &Event::Init);
                    for _ in 0..rng.usize(..20) {
                        index.apply(watch, &Event::InitApply(any(&mut rng)));
                    }
                    index.apply(watch, &Event::InitDone);
                }
                _ => index.apply(watch, &Event::Apply(any(&mut rng))),
            }
            if rng.usize(..5) == 0 {
                snap = snap.with_job_changes(index.jobs_mut());
                let rebuilt = Snapshot::build_from(&nodes, index.placements(), &none);
                for j in 0..=JOBS {
                    for (label, value) in
                        [(JOBSET, format!("job-{j}")), (BATCH, format!("job-{j}-0"))]
                    {
                        assert_eq!(
                            snap.sibling_zones("team-a", label, &value),
                            rebuilt.sibling_zones("team-a", label, &value),
                            "step {step}: {label}={value}"
                        );
                    }
                }
            }
        }
        // Every pod deleted: no job is left in the index.
        for watch in 0..2 {
            for name in 0..25 {
                index.apply(watch, &Event::Delete(placed(name, None, None)));
            }
        }
        assert!(index.is_empty());
        assert!(
            index.jobs_mut().is_empty(),
            "jobs with no pods are released"
        );
        snap = snap.with_job_changes(index.jobs_mut());
        assert_eq!(snap.sibling_zones("team-a", JOBSET, "job-1"), None);
    }
}
