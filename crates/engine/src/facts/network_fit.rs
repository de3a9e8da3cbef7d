//! Where a job can sit in the EC2 network, from the inventory: the most selective layer
//! of EKS's `topology.k8s.aws/network-node-layer-N` labels at which one network node
//! holds as many nodes of the job's instance type (in its zone, when pinned) as the job
//! has pods. Every node of the type is counted, busy or not: it is the closest the
//! cluster's shape allows, which the scheduler reaches when those nodes are free
//! (<https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/how-ec2-instance-topology-works.html>).

use std::collections::HashMap;

use crate::facts::inventory::Snapshot;

/// The closest fit the inventory allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkFit {
    /// The job's pods (one per node).
    pub pods: u32,
    pub instance_type: String,
    /// Labelled nodes of the type (in the zone) the inventory has.
    pub nodes: usize,
    /// The most selective layer one network node of which holds the job; `None` when no
    /// layer-1 node does (the job spans layer-1 nodes, or the cluster lacks the nodes).
    pub layer: Option<usize>,
    /// The network node that holds the most nodes of the type at `layer` (at layer 1
    /// when `layer` is `None`), and how many.
    pub network_node: String,
    pub holds: usize,
}

impl NetworkFit {
    /// One clause for the change explanation.
    pub fn describe(&self) -> String {
        let (pods, ty) = (self.pods, &self.instance_type);
        match self.layer {
            Some(layer) => format!(
                "in the inventory its {pods} pods fit under one layer-{layer} network node ({} holds {} {ty} nodes), so the scheduler can keep them there while those nodes are free",
                self.network_node, self.holds
            ),
            None if self.nodes < pods as usize => format!(
                "the inventory has {} labelled {ty} nodes for its {pods} pods",
                self.nodes
            ),
            None => format!(
                "in the inventory no layer-1 network node holds {pods} {ty} nodes (the most: {} under {}), so its pods span layer-1 network nodes",
                self.holds, self.network_node
            ),
        }
    }
}

/// The fit of a job of `pods` pods of `instance_type`, in `zone` when given; `None`
/// when the inventory has no labelled node of the type there.
pub fn network_fit(
    snapshot: &Snapshot,
    instance_type: &str,
    zone: Option<&str>,
    pods: u32,
) -> Option<NetworkFit> {
    let zone = zone.map(|z| snapshot.zone_name(z));
    let paths: Vec<_> = snapshot
        .networked_nodes()
        .filter(|(node, _)| snapshot.node_type(node) == Some(instance_type))
        .filter(|(node, _)| zone.is_none_or(|z| snapshot.node_zone(node) == Some(z)))
        .map(|(_, path)| path)
        .collect();
    if paths.is_empty() {
        return None;
    }
    let deepest = paths.iter().map(|p| p.len()).max().unwrap_or(0);
    let largest = |layer: usize| {
        let mut count: HashMap<&str, usize> = HashMap::new();
        for path in &paths {
            if let Some(n) = path.get(layer - 1) {
                *count.entry(&**n).or_default() += 1;
            }
        }
        // The largest, and the first name among equals, so the answer is stable.
        count
            .into_iter()
            .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(a.0)))
            .map(|(n, c)| (n.to_string(), c))
    };
    let fit = |layer: Option<usize>, (network_node, holds): (String, usize)| NetworkFit {
        pods,
        instance_type: instance_type.to_string(),
        nodes: paths.len(),
        layer,
        network_node,
        holds,
    };
    for layer in (1..=deepest).rev() {
        if let Some(top) = largest(layer)
            && top.1 >= pods as usize
        {
            return Some(fit(Some(layer), top));
        }
    }
    largest(1).map(|top| fit(None, top))
}
