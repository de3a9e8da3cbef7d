//! Nodes kept incrementally (`NodeIndex` + `with_changes`, what the live watch does)
//! answer exactly what a snapshot built from the final node and pod lists answers:
//! over a pseudo-random sequence of nodes added, relabelled (zone, instance type, node
//! group, Capacity Block, EC2 network nodes), removed and added again, and pods bound to
//! them (also to nodes not listed yet), checked at every publish.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use trainplace_engine::{JobIndex, NodeIndex, Snapshot};

const ZONES: [&str; 3] = ["us-east-1a", "us-east-1b", "us-east-1c"];
const ZONE_IDS: [&str; 3] = ["use1-az1", "use1-az2", "use1-az4"];
const TYPES: [&str; 3] = ["p5.48xlarge", "p4d.24xlarge", "x9.unknown"];
const JOBSET: &str = "jobset.sigs.k8s.io/jobset-name";

/// A node with a pseudo-random zone, type, accelerators, EFA, node group and
/// capacity type (some without a zone, some without accelerators).
fn node(rng: &mut fastrand::Rng, i: usize) -> Value {
    let mut labels = json!({"node.kubernetes.io/instance-type": TYPES[rng.usize(..3)],
        "eks.amazonaws.com/nodegroup": format!("ng-{}", rng.usize(..3))});
    if rng.usize(..6) > 0 {
        let z = rng.usize(..3);
        labels["topology.kubernetes.io/zone"] = json!(ZONES[z]);
        labels["topology.k8s.aws/zone-id"] = json!(ZONE_IDS[z]);
    }
    if rng.usize(..3) == 0 {
        labels["eks.amazonaws.com/capacityType"] = json!("CAPACITY_BLOCK");
    }
    // Network layer labels: none, or layers 1 to 1..=4 (a label missing cuts the path).
    for layer in 1..=rng.usize(..5) {
        labels[format!("topology.k8s.aws/network-node-layer-{layer}")] =
            json!(format!("nn-{layer}-{}", rng.usize(..3)));
    }
    let gpus = [0, 4, 8][rng.usize(..3)].to_string();
    let efa = [0, 4, 32][rng.usize(..3)].to_string();
    json!({"metadata": {"name": format!("node-{i}"), "labels": labels},
        "status": {"allocatable": {"nvidia.com/gpu": gpus, "vpc.amazonaws.com/efa": efa}}})
}

fn pod(job: usize, node: usize) -> Value {
    json!({"metadata": {"namespace": "ml", "labels": {JOBSET: format!("job-{job}")}},
        "spec": {"nodeName": format!("node-{node}")}})
}

/// Everything a review reads of the nodes and jobs, from both snapshots.
fn assert_same(incremental: &Snapshot, rebuilt: &Snapshot, step: usize) {
    assert_eq!(incremental.types, rebuilt.types, "step {step}: types");
    assert_eq!(incremental.nodes_listed(), rebuilt.nodes_listed());
    for t in TYPES {
        assert_eq!(
            incremental.has_type(t),
            rebuilt.has_type(t),
            "step {step}: {t}"
        );
        assert_eq!(
            incremental.advertises_efa(t),
            rebuilt.advertises_efa(t),
            "step {step}: efa {t}"
        );
        assert_eq!(
            incremental
                .learned(t)
                .map(|p| (&p.source, p.accelerators, p.max_efa)),
            rebuilt
                .learned(t)
                .map(|p| (&p.source, p.accelerators, p.max_efa)),
            "step {step}: learned {t}"
        );
    }
    for id in ZONE_IDS {
        assert_eq!(
            incremental.zone_name(id),
            rebuilt.zone_name(id),
            "step {step}: {id}"
        );
    }
    for i in 0..NODES {
        let name = format!("node-{i}");
        assert_eq!(
            incremental.node_zone(&name),
            rebuilt.node_zone(&name),
            "step {step}: zone of {name}"
        );
        assert_eq!(
            incremental.node_type(&name),
            rebuilt.node_type(&name),
            "step {step}: type of {name}"
        );
        assert_eq!(
            incremental.block_nodes().node(&name),
            rebuilt.block_nodes().node(&name),
            "step {step}: block node {name}"
        );
        assert_eq!(
            incremental.node_network(&name),
            rebuilt.node_network(&name),
            "step {step}: network nodes of {name}"
        );
    }
    let mut networked: Vec<(&str, &[std::sync::Arc<str>])> =
        incremental.networked_nodes().collect();
    let mut expected: Vec<(&str, &[std::sync::Arc<str>])> = rebuilt.networked_nodes().collect();
    networked.sort();
    expected.sort();
    assert_eq!(networked, expected, "step {step}: networked nodes");
    let r = incremental.reservations();
    for g in 0..3 {
        let pool = format!("eks.amazonaws.com/nodegroup=ng-{g}");
        assert_eq!(
            incremental.block_nodes().pool_block(&pool, r).is_some(),
            rebuilt.block_nodes().pool_block(&pool, r).is_some(),
            "step {step}: {pool}"
        );
    }
    for j in 0..JOBS {
        let job = format!("job-{j}");
        assert_eq!(
            incremental.sibling_zones("ml", JOBSET, &job),
            rebuilt.sibling_zones("ml", JOBSET, &job),
            "step {step}: {job}"
        );
    }
}

const NODES: usize = 16;
const JOBS: usize = 5;

#[test]
fn node_adds_changes_and_removals_answer_like_a_rebuild() {
    let mut rng = fastrand::Rng::with_seed(0x5EED_0032);
    let (mut nodes, mut index, mut jobs) =
        (BTreeMap::new(), NodeIndex::listed(), JobIndex::default());
    let mut pods: Vec<Value> = Vec::new();
    let none: [Value; 0] = [];
    let mut snap = Snapshot::default().with_changes(&mut index, &mut jobs);
    for step in 0..2_000 {
        let i = rng.usize(..NODES);
        match rng.usize(..10) {
            // Removed (also a node that is not there).
            0..=2 => {
                nodes.remove(&i);
                index.remove(&format!("node-{i}"));
            }
            // A pod bound to any node, listed or not; or one deleted.
            3..=5 => {
                let p = pod(rng.usize(..JOBS), rng.usize(..NODES));
                jobs.add(&p);
                pods.push(p);
            }
            6 if !pods.is_empty() => {
                let p = pods.swap_remove(rng.usize(..pods.len()));
                jobs.remove(&p);
            }
            // Added, or relabelled in place.
            _ => {
                let n = node(&mut rng, i);
                index.apply(&n);
                nodes.insert(i, n);
            }
        }
        if rng.usize(..4) == 0 {
            snap = snap.with_changes(&mut index, &mut jobs);
            let rebuilt = Snapshot::build_from(nodes.values(), &pods, &none);
            assert_same(&snap, &rebuilt, step);
        }
    }
    assert_eq!(index.len(), nodes.len());
}

/// A node's status report (nothing the snapshot reads changed) is no change at all.
#[test]
fn an_unchanged_node_is_no_change() {
    let mut rng = fastrand::Rng::with_seed(7);
    let n = node(&mut rng, 1);
    let mut index = NodeIndex::listed();
    assert!(index.apply(&n));
    let mut heartbeat = n.clone();
    heartbeat["metadata"]["resourceVersion"] = json!("99");
    heartbeat["status"]["conditions"] = json!([{"type": "Ready", "status": "True"}]);
    assert!(!index.apply(&heartbeat));
    assert!(index.remove("node-1"));
    assert!(!index.remove("node-1"));
    assert!(index.is_empty());
}
