//! Where each job's pods run, kept incrementally (`JobIndex` + `with_job_changes`),
//! answers exactly what a snapshot rebuilt from every pod answers: over a long
//! pseudo-random sequence of adds, moves (also to another zone), deletes, re-adds,
//! pods losing their job labels and pods without a node, checked at every publish.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};
use trainplace_engine::{JobIndex, Snapshot};

const ZONES: [&str; 3] = ["us-east-1a", "us-east-1b", "us-east-1c"];
const JOBSET: &str = "jobset.sigs.k8s.io/jobset-name";
const BATCH: &str = "batch.kubernetes.io/job-name";

/// Node `i` of `n`, in zone `i % 3` (`shift` moves every node one zone on: a relabelled
/// node list). Node `n - 1` has no zone label.
fn nodes(n: usize, shift: usize) -> Vec<Value> {
    (0..n)
        .map(|i| {
            let mut labels = json!({"node.kubernetes.io/instance-type": "p5.48xlarge"});
            if i + 1 < n {
                labels["topology.kubernetes.io/zone"] = json!(ZONES[(i + shift) % 3]);
            }
            json!({"metadata": {"name": format!("node-{i}"), "labels": labels},
                "status": {"allocatable": {"nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "32"}}})
        })
        .collect()
}

/// A pod of job `job` in namespace `ns` on `node` (or unbound); `labelled` false: the
/// pod lost its job labels.
fn pod(ns: usize, job: usize, node: Option<usize>, labelled: bool) -> Value {
    let labels = if labelled {
        json!({JOBSET: format!("job-{job}"), BATCH: format!("job-{job}-workers"), "app": "x"})
    } else {
        json!({"app": "x"})
    };
    json!({"metadata": {"namespace": format!("ns-{ns}"), "labels": labels},
        "spec": {"nodeName": node.map(|n| format!("node-{n}"))}})
}

/// The zones of a job worked out by hand from the pods and nodes: what both snapshots
/// must answer.
fn expected<'a>(
    pods: impl Iterator<Item = &'a Value>,
    nodes: &[Value],
    (ns, label, value): (&str, &str, &str),
) -> Option<BTreeSet<String>> {
    let zones: BTreeSet<String> = pods
        .filter(|p| p["metadata"]["namespace"] == ns && p["metadata"]["labels"][label] == value)
        .filter_map(|p| {
            let node = nodes
                .iter()
                .find(|n| n["metadata"]["name"] == p["spec"]["nodeName"])?;
            Some(
                node["metadata"]["labels"]["topology.kubernetes.io/zone"]
                    .as_str()?
                    .to_string(),
            )
        })
        .collect();
    (!zones.is_empty()).then_some(zones)
}

/// Every answer the two snapshots can give about the jobs of the test (and one that
/// never existed) is the same, and what the pods say by hand.
fn assert_same(
    incremental: &Snapshot,
    rebuilt: &Snapshot,
    (pods, nodes): (&BTreeMap<usize, Value>, &[Value]),
    jobs: usize,
    step: usize,
) {
    for ns in 0..2 {
        for job in 0..=jobs {
            for (label, value) in [
                (JOBSET, format!("job-{job}")),
                (BATCH, format!("job-{job}-workers")),
            ] {
                let ns = format!("ns-{ns}");
                let answer = incremental.sibling_zones(&ns, label, &value);
                assert_eq!(
                    answer,
                    rebuilt.sibling_zones(&ns, label, &value),
                    "step {step}: {ns} {label}={value}"
                );
                assert_eq!(
                    answer.cloned(),
                    expected(pods.values(), nodes, (&ns, label, &value)),
                    "step {step}: {ns} {label}={value}"
                );
            }
        }
    }
}

#[test]
fn incremental_changes_answer_like_a_full_rebuild() {
    const NODES: usize = 12;
    const JOBS: usize = 8;
    let node_list = nodes(NODES, 0);
    let no_namespaces: [Value; 0] = [];
    // The pods as they are now, by name: what a rebuild reads.
    let mut pods: BTreeMap<usize, Value> = BTreeMap::new();
    let mut index = JobIndex::default();
    let mut snap = Snapshot::build_indexed(&node_list, &mut index, &no_namespaces);
    let mut rng = fastrand::Rng::with_seed(0x9E37_79B9_7F4A_7C15);
    for step in 0..5_000 {
        let name = rng.usize(..40);
        let (ns, job) = (name % 2, name % JOBS);
        let new = match rng.usize(..10) {
            // Deleted (also a pod that is not there: nothing happens).
            0 | 1 => None,
            // Lost its job labels.
            2 => Some(pod(ns, job, Some(rng.usize(..NODES)), false)),
            // Not bound yet.
            3 => Some(pod(ns, job, None, true)),
            // Added, re-added, or moved to any node (any zone, or the zoneless one).
            _ => Some(pod(ns, job, Some(rng.usize(..NODES)), true)),
        };
        // What the watch cache does: take back the pod as it was counted, count the new one.
        if let Some(old) = pods.remove(&name) {
            index.remove(&old);
        }
        if let Some(new) = new {
            index.add(&new);
            pods.insert(name, new);
        }
        if rng.usize(..7) == 0 {
            snap = snap.with_job_changes(&mut index);
            let rebuilt = Snapshot::build_from(&node_list, pods.values(), &no_namespaces);
            assert_same(&snap, &rebuilt, (&pods, &node_list), JOBS, step);
        }
    }
    snap = snap.with_job_changes(&mut index);
    let rebuilt = Snapshot::build_from(&node_list, pods.values(), &no_namespaces);
    assert_same(&snap, &rebuilt, (&pods, &node_list), JOBS, 5_000);

    // A new node list (every node moved a zone on) is read with the same counts.
    let moved = nodes(NODES, 1);
    let relisted = Snapshot::build_indexed(&moved, &mut index, &no_namespaces);
    let rebuilt = Snapshot::build_from(&moved, pods.values(), &no_namespaces);
    assert_same(&relisted, &rebuilt, (&pods, &moved), JOBS, 5_001);
}

/// A job whose pods all left is gone from the index (its memory released) and from
/// the snapshot; a job whose pods are all on zoneless nodes has no zones either.
#[test]
fn a_job_whose_pods_all_left_disappears() {
    let node_list = nodes(4, 0);
    let no_namespaces: [Value; 0] = [];
    let mut index = JobIndex::default();
    let mut snap = Snapshot::build_indexed(&node_list, &mut index, &no_namespaces);
    let placed: Vec<Value> = (0..3).map(|n| pod(0, 1, Some(n), true)).collect();
    for p in &placed {
        index.add(p);
    }
    // jobset-name and batch job-name: two jobs.
    assert_eq!(index.len(), 2);
    snap = snap.with_job_changes(&mut index);
    let zones = snap.sibling_zones("ns-0", JOBSET, "job-1").unwrap();
    assert_eq!(zones.len(), 3, "{zones:?}");
    for p in &placed {
        index.remove(p);
    }
    assert_eq!(index.len(), 0, "a job with no pods left takes no room");
    assert!(index.is_empty());
    snap = snap.with_job_changes(&mut index);
    assert_eq!(snap.sibling_zones("ns-0", JOBSET, "job-1"), None);
    assert_eq!(snap.sibling_zones("ns-0", BATCH, "job-1-workers"), None);

    // Node 3 has no zone: its pods are counted but place the job nowhere.
    index.add(&pod(0, 2, Some(3), true));
    snap = snap.with_job_changes(&mut index);
    assert_eq!(snap.sibling_zones("ns-0", JOBSET, "job-2"), None);
    // Taking back a pod that was never counted changes nothing.
    index.remove(&pod(0, 2, Some(1), true));
    assert_eq!(index.len(), 2);
}

/// Publishing shares the rest of the snapshot: the catalog view of the cluster is the
/// same before and after a pod change.
#[test]
fn a_pod_change_keeps_the_rest_of_the_snapshot() {
    let node_list = nodes(4, 0);
    let namespaces = [json!({"metadata": {"name": "ns-0", "labels": {"team": "a"}}})];
    let mut index = JobIndex::default();
    let snap = Snapshot::build_indexed(&node_list, &mut index, &namespaces);
    index.add(&pod(0, 1, Some(0), true));
    let next = snap.with_job_changes(&mut index);
    assert_eq!(next.types, snap.types);
    assert_eq!(next.namespace_labels("ns-0"), snap.namespace_labels("ns-0"));
    assert!(next.has_type("p5.48xlarge"));
    assert_eq!(snap.sibling_zones("ns-0", JOBSET, "job-1"), None);
    assert_eq!(
        next.sibling_zones("ns-0", JOBSET, "job-1")
            .map(|z| z.iter().collect::<Vec<_>>()),
        Some(vec![&ZONES[0].to_string()])
    );
}
