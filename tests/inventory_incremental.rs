//! The live inventory publishes every change as a delta over the last snapshot
//! (`Index::publish`); what it publishes answers like a snapshot built from scratch
//! from the same objects (`Snapshot::build_from`, the files source's path): for pods
//! moving, nodes added, moved to another zone and removed, namespaces relabelled and
//! deleted, runtimes added and deleted, and relists that drop objects. Each node's
//! network nodes (its EKS layer labels, which `audit --network-spread` reads) follow its
//! zone, so a move changes them too.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Namespace, Node};
use kube::api::DynamicObject;
use kube::runtime::watcher::Event;
use serde_json::{Value, json};
use trainplace::inventory::index::{Crd, Index, OBJECT_CRDS};
use trainplace::inventory::pods::PodPlacement;
use trainplace_engine::Snapshot;

const JOBSET: &str = "jobset.sigs.k8s.io/jobset-name";
const ZONES: [&str; 3] = ["us-east-1a", "us-east-1b", "us-east-1c"];

fn node_json(i: usize, zone: &str) -> Value {
    json!({"metadata": {"name": format!("n{i}"), "resourceVersion": "1",
        "labels": {"topology.kubernetes.io/zone": zone,
            "node.kubernetes.io/instance-type": "p5.48xlarge",
            "topology.k8s.aws/network-node-layer-1": format!("nn-{zone}"),
            "topology.k8s.aws/network-node-layer-2": format!("nn-{zone}-2"),
            "topology.k8s.aws/network-node-layer-3": format!("nn-{zone}-3-{}", i % 2)}},
        "status": {"allocatable": {"nvidia.com/gpu": "8"}}})
}

fn node(i: usize, zone: &str) -> Node {
    serde_json::from_value(node_json(i, zone)).unwrap()
}

fn pod_json(name: &str, job: Option<&str>, node: usize) -> Value {
    let labels = match job {
        Some(job) => json!({JOBSET: job}),
        None => json!({}),
    };
    json!({"metadata": {"name": name, "namespace": "ml", "labels": labels},
        "spec": {"nodeName": format!("n{node}")}})
}

fn pod(name: &str, job: Option<&str>, node: usize) -> PodPlacement {
    serde_json::from_value(pod_json(name, job, node)).unwrap()
}

fn namespace(name: &str, team: &str) -> Namespace {
    serde_json::from_value(json!({"metadata": {"name": name, "labels": {"team": team}}})).unwrap()
}

fn runtime(name: &str) -> DynamicObject {
    serde_json::from_value(json!({"apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime", "metadata": {"name": name},
        "spec": {"template": {}}}))
    .unwrap()
}

fn zones(snap: &Snapshot, job: &str) -> Vec<String> {
    snap.sibling_zones("ml", JOBSET, job)
        .map(|z| z.iter().cloned().collect())
        .unwrap_or_default()
}

/// The objects the test has applied, kept by hand: what a rebuild is built from.
#[derive(Default)]
struct World {
    nodes: BTreeMap<usize, Value>,
    pods: BTreeMap<String, Value>,
    namespaces: BTreeMap<String, Value>,
}

impl World {
    fn rebuilt(&self) -> Snapshot {
        Snapshot::build_from(
            self.nodes.values(),
            self.pods.values(),
            self.namespaces.values(),
        )
    }
}

/// What reviews read, from both snapshots.
fn assert_same(published: &Snapshot, world: &World, jobs: &[&str]) {
    let rebuilt = world.rebuilt();
    assert_eq!(published.types, rebuilt.types);
    for job in jobs {
        assert_eq!(zones(published, job), zones(&rebuilt, job), "{job}");
    }
    for i in 0..8 {
        let n = format!("n{i}");
        assert_eq!(published.node_zone(&n), rebuilt.node_zone(&n), "{n}");
        assert_eq!(published.node_network(&n), rebuilt.node_network(&n), "{n}");
        if let Some(zone) = published.node_zone(&n) {
            let layer3 = published.node_network(&n).map(|p| p[2].to_string());
            assert_eq!(layer3, Some(format!("nn-{zone}-3-{}", i % 2)), "{n}");
        }
    }
    for ns in ["ml", "other"] {
        assert_eq!(published.namespace_labels(ns), rebuilt.namespace_labels(ns));
    }
}

#[test]
fn publishing_changes_answers_like_a_rebuild() {
    let (mut index, mut world) = (Index::new(), World::default());
    let put_node = |index: &mut Index, world: &mut World, i: usize, zone: &str| {
        index.node(&Event::Apply(node(i, zone)));
        world.nodes.insert(i, node_json(i, zone));
    };
    // The initial node list.
    index.node(&Event::Init);
    for i in 0..6 {
        index.node(&Event::InitApply(node(i, ZONES[i % 3])));
        world.nodes.insert(i, node_json(i, ZONES[i % 3]));
    }
    assert!(index.node(&Event::InitDone));
    index.namespace(&Event::Apply(namespace("ml", "a")));
    world.namespaces.insert(
        "ml".into(),
        json!({"metadata": {"name": "ml", "labels": {"team": "a"}}}),
    );
    let put_pod =
        |index: &mut Index, world: &mut World, name: &str, job: Option<&str>, node: usize| {
            index.pod(0, &Event::Apply(pod(name, job, node)));
            world.pods.insert(name.into(), pod_json(name, job, node));
        };
    put_pod(&mut index, &mut world, "a-0", Some("a"), 0);
    put_pod(&mut index, &mut world, "a-1", Some("a"), 3);
    put_pod(&mut index, &mut world, "b-0", Some("b"), 1);
    // A pod bound to a node the list does not have yet.
    put_pod(&mut index, &mut world, "c-0", Some("c"), 7);
    let snap = index.publish();
    assert_eq!(zones(&snap, "a"), ["us-east-1a"]);
    assert_eq!(zones(&snap, "c"), Vec::<String>::new());
    assert_same(&snap, &world, &["a", "b", "c"]);

    // Pods move and lose their labels.
    put_pod(&mut index, &mut world, "a-1", Some("a"), 2);
    put_pod(&mut index, &mut world, "b-0", None, 1);
    let snap = index.publish();
    assert_eq!(zones(&snap, "a"), ["us-east-1a", "us-east-1c"]);
    assert_same(&snap, &world, &["a", "b", "c"]);

    // Node 7 appears: job c is now somewhere. Node 2 moves zone: job a follows it.
    put_node(&mut index, &mut world, 7, "us-east-1b");
    put_node(&mut index, &mut world, 2, "us-east-1d");
    let snap = index.publish();
    assert_eq!(zones(&snap, "c"), ["us-east-1b"]);
    assert_eq!(zones(&snap, "a"), ["us-east-1a", "us-east-1d"]);
    assert_same(&snap, &world, &["a", "b", "c"]);

    // Node 0 is deleted: job a keeps only zone d; its pod there counts nowhere.
    index.node(&Event::Delete(node(0, ZONES[0])));
    world.nodes.remove(&0);
    index.namespace(&Event::Apply(namespace("ml", "b")));
    world.namespaces.insert(
        "ml".into(),
        json!({"metadata": {"name": "ml", "labels": {"team": "b"}}}),
    );
    let snap = index.publish();
    assert_eq!(zones(&snap, "a"), ["us-east-1d"]);
    assert_eq!(snap.namespace_labels("ml").unwrap()["team"], "b");
    assert_same(&snap, &world, &["a", "b", "c"]);

    // A relist of the nodes that no longer lists node 7 (deleted while the watch was
    // down); nodes 0 is back.
    index.node(&Event::Init);
    for i in [0, 1, 2, 3, 4, 5] {
        let zone = if i == 2 { "us-east-1d" } else { ZONES[i % 3] };
        index.node(&Event::InitApply(node(i, zone)));
    }
    world.nodes.remove(&7);
    world.nodes.insert(0, node_json(0, ZONES[0]));
    let before = index.publish();
    assert_eq!(
        zones(&before, "c"),
        ["us-east-1b"],
        "a relist applies at its end"
    );
    index.node(&Event::InitDone);
    let snap = index.publish();
    assert_eq!(zones(&snap, "c"), Vec::<String>::new());
    assert_same(&snap, &world, &["a", "b", "c"]);
}

#[test]
fn runtimes_and_namespaces_come_and_go() {
    let mut index = Index::new();
    let runtimes = OBJECT_CRDS
        .iter()
        .position(|(_, k, _)| *k == "ClusterTrainingRuntime")
        .map(Crd::Object)
        .unwrap();
    index.crd(runtimes, &Event::Apply(runtime("torch")));
    index.crd(runtimes, &Event::Apply(runtime("mpi")));
    index.namespace(&Event::Apply(namespace("other", "x")));
    let snap = index.publish();
    assert!(
        snap.runtime("any", "ClusterTrainingRuntime", "torch")
            .is_some()
    );
    assert!(snap.namespace_labels("other").is_some());
    index.crd(runtimes, &Event::Delete(runtime("torch")));
    index.namespace(&Event::Delete(namespace("other", "x")));
    let snap = index.publish();
    assert!(
        snap.runtime("any", "ClusterTrainingRuntime", "torch")
            .is_none()
    );
    assert!(
        snap.runtime("any", "ClusterTrainingRuntime", "mpi")
            .is_some()
    );
    assert!(snap.namespace_labels("other").is_none());
    // A relist that no longer lists mpi removes it.
    index.crd(runtimes, &Event::Init);
    index.crd(runtimes, &Event::InitDone);
    let snap = index.publish();
    assert!(
        snap.runtime("any", "ClusterTrainingRuntime", "mpi")
            .is_none()
    );
}

/// The owners of marked pods come and go with their watch: a batch Job is kept as its
/// uid and active pods (its size changes with `parallelism`), a StatefulSet as its
/// replicas, and a deleted one is forgotten (issue 39, class 3).
#[test]
fn owners_sizes_come_and_go() {
    let mut index = Index::new();
    let watch = |kind: &str| {
        OBJECT_CRDS
            .iter()
            .position(|(_, k, _)| *k == kind)
            .map(Crd::Object)
            .unwrap()
    };
    let job = |parallelism: u32| -> DynamicObject {
        serde_json::from_value(json!({"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "train", "namespace": "ml", "uid": "u1"},
            "spec": {"parallelism": parallelism, "completions": 6, "template": {"spec": {
                "containers": [{"name": "c", "image": "i"}]}}}}))
        .unwrap()
    };
    let sts: DynamicObject = serde_json::from_value(json!({"apiVersion": "apps/v1",
        "kind": "StatefulSet", "metadata": {"name": "lws-0", "namespace": "ml", "uid": "u2"},
        "spec": {"replicas": 3}}))
    .unwrap();
    let (jobs, sets) = (watch("Job"), watch("StatefulSet"));
    index.crd(jobs, &Event::Apply(job(8)));
    index.crd(sets, &Event::Apply(sts.clone()));
    let snap = index.publish();
    let size = snap.owner("ml", "batch/v1", "Job", "train").unwrap();
    assert_eq!((size.uid.as_str(), size.pods), ("u1", Some(6)));
    let size = snap.owner("ml", "apps/v1", "StatefulSet", "lws-0").unwrap();
    assert_eq!(size.pods, Some(3));
    index.crd(jobs, &Event::Apply(job(2)));
    index.crd(sets, &Event::Delete(sts));
    let snap = index.publish();
    assert_eq!(
        snap.owner("ml", "batch/v1", "Job", "train").unwrap().pods,
        Some(2)
    );
    assert!(
        snap.owner("ml", "apps/v1", "StatefulSet", "lws-0")
            .is_none()
    );
}

/// Nodes added and removed in number: every publish after a node change answers like
/// a rebuild, and one node change is published without the others being re-read
/// (the published snapshot before shares what did not change).
#[test]
fn node_adds_and_removals_answer_like_a_rebuild() {
    let (mut index, mut world) = (Index::new(), World::default());
    let mut rng = fastrand::Rng::with_seed(32);
    for p in 0..40 {
        let (name, job, n) = (format!("p{p}"), format!("j{}", p % 5), rng.usize(..8));
        index.pod(0, &Event::Apply(pod(&name, Some(&job), n)));
        world
            .pods
            .insert(name.clone(), pod_json(&name, Some(&job), n));
    }
    let jobs = ["j0", "j1", "j2", "j3", "j4"];
    for step in 0..300 {
        let i = rng.usize(..8);
        if rng.bool() {
            let zone = ZONES[rng.usize(..3)];
            index.node(&Event::Apply(node(i, zone)));
            world.nodes.insert(i, node_json(i, zone));
        } else {
            index.node(&Event::Delete(node(i, ZONES[0])));
            world.nodes.remove(&i);
        }
        if step % 3 == 0 {
            assert_same(&index.publish(), &world, &jobs);
        }
    }
}
