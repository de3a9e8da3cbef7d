//! Running jobs spread over more layer-3 network nodes than they needed (`trainplace
//! audit --network-spread`): the pods of each job, bound to nodes that carry EKS's
//! network layer labels, against how many nodes of the job's instance type each layer-3
//! network node holds in the inventory. A job of N nodes needed the fewest layer-3 nodes
//! whose nodes of its type add up to N; every extra one is traffic that climbs to layer
//! 2 or 1 on each collective
//! (<https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/how-ec2-instance-topology-works.html>).
//!
//! "Needed" counts every node of the type, busy or not: it is the floor the cluster's
//! shape allows, not a promise that those nodes were free when the job started.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use crate::facts::ending::{job_of, running};
use crate::facts::inventory::Snapshot;
use crate::read::json::str_at;

/// The layer whose network nodes are counted: the bottom layer of most instance types
/// (`NETWORK_LAYERS`), the one `networkProximity.requiredLayer` defaults to.
pub const SPREAD_LAYER: usize = 3;

/// One job whose running pods span more layer-3 network nodes than it needed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SpreadJob {
    pub namespace: String,
    /// The job's name: its identity label's value, else its owner's, else the pod's.
    pub job: String,
    /// What names it (`batch Job`, `JobSet`, `ReplicaSet`, `Pod`).
    pub kind: String,
    /// The job's running pods on nodes with network labels, by name.
    pub pods: Vec<String>,
    /// The `uid` of each pod (for PolicyReport resources), in the order of `pods`.
    #[serde(skip)]
    pub pod_uids: Vec<Option<String>>,
    /// The distinct nodes those pods run on.
    pub nodes: usize,
    /// The instance type most of them are.
    pub instance_type: String,
    /// Layer-3 network nodes the job spans, and the fewest that hold its nodes.
    pub layer3_spanned: usize,
    pub layer3_needed: usize,
    /// Layer-2 network nodes it spans (1: every layer-3 node under one layer-2 node).
    pub layer2_spanned: usize,
    /// Each layer-3 node the job uses, the most of its nodes first.
    pub per_layer3: Vec<Layer3Use>,
}

/// One layer-3 network node a job uses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Layer3Use {
    pub network_node: String,
    /// The job's nodes under it.
    pub job_nodes: usize,
    /// The nodes of the job's type under it, in the inventory.
    pub holds: usize,
}

impl SpreadJob {
    /// One sentence for a PolicyReport result or a log line.
    pub fn message(&self) -> String {
        let per: Vec<String> = self
            .per_layer3
            .iter()
            .map(|u| format!("{} under {} of {}", u.job_nodes, u.network_node, u.holds))
            .collect();
        format!(
            "{} {}/{} runs {} pod(s) on {} {} node(s) under {} layer-3 network nodes ({} layer-2), where {} would hold them (its nodes under each, of the type's nodes there: {}): each extra layer-3 node is traffic that climbs a layer on every collective. Keep the job's pods together: trainplace's network proximity (docs/network.md), networkProximity.placement: required for jobs up to a size, or Kueue's Topology Aware Scheduling.",
            self.kind,
            self.namespace,
            self.job,
            self.pods.len(),
            self.nodes,
            self.instance_type,
            self.layer3_spanned,
            self.layer2_spanned,
            self.layer3_needed,
            per.join(", ")
        )
    }
}

/// What one job's pods use, gathered.
#[derive(Default)]
struct Gathered {
    pods: Vec<String>,
    uids: Vec<Option<String>>,
    /// Node -> its network path.
    nodes: BTreeMap<String, Vec<Arc<str>>>,
}

/// Jobs whose running `pods` span more layer-3 network nodes than the inventory says
/// they needed, the most spread first.
pub fn spread_jobs<'v>(
    pods: impl IntoIterator<Item = &'v Value>,
    snapshot: &Snapshot,
) -> Vec<SpreadJob> {
    let mut jobs: BTreeMap<(String, String, String), Gathered> = BTreeMap::new();
    for pod in pods {
        let Some(node) = running(pod) else {
            continue;
        };
        let Some(path) = snapshot
            .node_network(node)
            .filter(|p| p.len() >= SPREAD_LAYER)
        else {
            continue;
        };
        let namespace = str_at(pod, &["metadata", "namespace"])
            .unwrap_or("default")
            .to_string();
        let (kind, job) = job_of(pod);
        let g = jobs.entry((namespace, kind, job)).or_default();
        g.pods
            .push(str_at(pod, &["metadata", "name"]).unwrap_or("").to_string());
        g.uids
            .push(str_at(pod, &["metadata", "uid"]).map(String::from));
        g.nodes.insert(node.to_string(), path.to_vec());
    }
    let capacity = layer3_capacity(snapshot);
    let mut out: Vec<SpreadJob> = jobs
        .into_iter()
        .filter_map(|((namespace, kind, job), g)| {
            judge(namespace, kind, job, g, snapshot, &capacity)
        })
        .collect();
    out.sort_by(|a, b| {
        (b.layer3_spanned - b.layer3_needed)
            .cmp(&(a.layer3_spanned - a.layer3_needed))
            .then(a.namespace.cmp(&b.namespace))
            .then(a.job.cmp(&b.job))
    });
    out
}

/// (instance type, layer-3 path) -> how many nodes of the type are under it.
type Capacity<'s> = BTreeMap<(&'s str, &'s [Arc<str>]), usize>;

fn layer3_capacity(snapshot: &Snapshot) -> Capacity<'_> {
    let mut capacity = Capacity::new();
    for (node, path) in snapshot.networked_nodes() {
        if let (Some(t), Some(path)) = (snapshot.node_type(node), path.get(..SPREAD_LAYER)) {
            *capacity.entry((t, path)).or_default() += 1;
        }
    }
    capacity
}

fn judge(
    namespace: String,
    kind: String,
    job: String,
    g: Gathered,
    snapshot: &Snapshot,
    capacity: &Capacity<'_>,
) -> Option<SpreadJob> {
    if g.nodes.len() < 2 {
        return None;
    }
    // The type most of its nodes are (ties: the first by name).
    let mut types: BTreeMap<&str, usize> = BTreeMap::new();
    for node in g.nodes.keys() {
        *types
            .entry(snapshot.node_type(node).unwrap_or(""))
            .or_default() += 1;
    }
    let (instance_type, _) = types
        .iter()
        .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))?;
    let mut used: BTreeMap<&[Arc<str>], usize> = BTreeMap::new();
    let mut layer2: BTreeSet<&[Arc<str>]> = BTreeSet::new();
    for path in g.nodes.values() {
        *used.entry(&path[..SPREAD_LAYER]).or_default() += 1;
        layer2.insert(&path[..SPREAD_LAYER - 1]);
    }
    // The fewest layer-3 nodes of the type whose nodes add up to the job's.
    let mut sizes: Vec<usize> = capacity
        .iter()
        .filter(|((t, _), _)| t == instance_type)
        .map(|(_, n)| *n)
        .collect();
    sizes.sort_unstable_by(|a, b| b.cmp(a));
    let (mut held, mut needed) = (0, 0);
    for n in sizes {
        if held >= g.nodes.len() {
            break;
        }
        held += n;
        needed += 1;
    }
    let needed = needed.max(1);
    if used.len() <= needed {
        return None;
    }
    let mut per_layer3: Vec<Layer3Use> = used
        .iter()
        .map(|(path, job_nodes)| Layer3Use {
            network_node: path.last().map(|n| n.to_string()).unwrap_or_default(),
            job_nodes: *job_nodes,
            holds: capacity.get(&(*instance_type, *path)).copied().unwrap_or(0),
        })
        .collect();
    per_layer3.sort_by(|a, b| {
        b.job_nodes
            .cmp(&a.job_nodes)
            .then(a.network_node.cmp(&b.network_node))
    });
    Some(SpreadJob {
        namespace,
        job,
        kind,
        nodes: g.nodes.len(),
        pods: g.pods,
        pod_uids: g.uids,
        instance_type: instance_type.to_string(),
        layer3_spanned: used.len(),
        layer3_needed: needed,
        layer2_spanned: layer2.len(),
        per_layer3,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::read::annotations::NETWORK_LAYERS;

    /// 12 p5 nodes: n0-n3 under l3-a, n4-n7 under l3-b (both under l2-a), n8-n11 under
    /// l3-c (under l2-b); one node without labels.
    fn nodes() -> Value {
        let mut items: Vec<Value> = (0..12)
            .map(|i| {
                let (l2, l3) = match i / 4 {
                    0 => ("l2-a", "l3-a"),
                    1 => ("l2-a", "l3-b"),
                    _ => ("l2-b", "l3-c"),
                };
                json!({"metadata": {"name": format!("n{i}"), "labels": {
                    "node.kubernetes.io/instance-type": "p5.48xlarge",
                    "topology.kubernetes.io/zone": "us-east-1a",
                    NETWORK_LAYERS[0]: "l1", NETWORK_LAYERS[1]: l2, NETWORK_LAYERS[2]: l3,
                }}, "status": {"allocatable": {"nvidia.com/gpu": "8"}}})
            })
            .collect();
        items.push(json!({"metadata": {"name": "plain", "labels": {
            "node.kubernetes.io/instance-type": "p5.48xlarge"}}}));
        json!({"items": items})
    }

    fn pod(job: &str, i: usize, node: &str, phase: &str) -> Value {
        json!({"metadata": {"name": format!("{job}-{i}"), "namespace": "ml", "uid": format!("{job}-{i}-uid"),
            "labels": {"batch.kubernetes.io/job-name": job}},
            "spec": {"nodeName": node}, "status": {"phase": phase}})
    }

    #[test]
    fn a_job_over_two_layer_3_nodes_that_fits_in_one_is_reported() {
        let snapshot = Snapshot::from_lists(&nodes(), &json!({"items": []}), &json!({"items": []}));
        assert_eq!(snapshot.node_network("n5").unwrap()[2].as_ref(), "l3-b");
        assert_eq!(snapshot.node_network("plain"), None);
        let pods = vec![
            // 4 pods over l3-a and l3-b: one layer-3 node holds 4.
            pod("spread", 0, "n0", "Running"),
            pod("spread", 1, "n1", "Running"),
            pod("spread", 2, "n4", "Running"),
            pod("spread", 3, "n8", "Running"),
            // 6 pods need two layer-3 nodes and use two.
            pod("big", 0, "n2", "Running"),
            pod("big", 1, "n3", "Running"),
            pod("big", 2, "n5", "Running"),
            pod("big", 3, "n6", "Running"),
            pod("big", 4, "n7", "Running"),
            pod("big", 5, "n9", "Succeeded"),
            pod("big", 6, "n11", "Pending"),
            // One node, and a node without labels.
            pod("one", 0, "n10", "Running"),
            pod("one", 1, "plain", "Running"),
        ];
        let jobs = spread_jobs(&pods, &snapshot);
        assert_eq!(jobs.len(), 2, "{jobs:#?}");
        let spread = jobs.iter().find(|j| j.job == "spread").unwrap();
        assert_eq!(
            (
                spread.nodes,
                spread.layer3_spanned,
                spread.layer3_needed,
                spread.layer2_spanned
            ),
            (4, 3, 1, 2)
        );
        assert_eq!(spread.per_layer3[0].network_node, "l3-a");
        assert_eq!(
            (spread.per_layer3[0].job_nodes, spread.per_layer3[0].holds),
            (2, 4)
        );
        assert!(
            spread
                .message()
                .contains("under 3 layer-3 network nodes (2 layer-2), where 1 would hold them"),
            "{}",
            spread.message()
        );
        // big: 6 running pods (n11 is Pending but bound, so it holds its node) over
        // l3-a, l3-b and l3-c where two hold 8: spread by one.
        let big = jobs.iter().find(|j| j.job == "big").unwrap();
        assert_eq!(
            (big.nodes, big.layer3_spanned, big.layer3_needed),
            (6, 3, 2)
        );
        assert_eq!(jobs[0].job, "spread", "the most spread first");
    }
}
