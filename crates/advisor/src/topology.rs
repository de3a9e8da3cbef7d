//! How far apart a plan's nodes sit in the EC2 network, as far as the plan can know:
//! which topology calls `aws-cli.sh` makes (`artifacts/topology.rs` writes them), what to
//! expect of the answer, and how to read the lines the script prints.
//!
//! EC2 describes the network above an instance as a node set, one network node per
//! layer, top-down: two instances that share their bottom node are closest, and the
//! fewer layers they climb to meet, the closer they are
//! (<https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/how-ec2-instance-topology-works.html>).
//! `DescribeCapacityReservationTopology` answers for reservations and Capacity Blocks
//! that are pending or active, before any instance launches; `DescribeInstanceTopology`
//! for running instances
//! (<https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-instance-topology.html>).

use serde::Serialize;
use trainplace_catalog::topology::{
    TOPOLOGY_PREREQUISITES_URL, network_layers, reservation_topology_in,
};

use crate::plan::CapacityPlan;

/// What the plan says about the distance between its nodes.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Topology {
    /// Network layers EC2 describes for the type's instances (3, or 4 on the types
    /// whose bottom layer is the fourth); `None`: EC2 describes no topology for it.
    pub layers: Option<u8>,
    /// The topology calls `aws-cli.sh` makes, each with when it makes it.
    pub reads: Vec<String>,
    /// What the answer should show, for this capacity.
    pub expect: String,
    /// How to read the `topology:` lines the script prints.
    pub how_to_read: String,
}

/// Whether `aws-cli.sh` reads the topology of the plan's reservations: the type is
/// supported, the Region offers the call, and the plan has reservation ids (blocks, or
/// an On-Demand Capacity Reservation).
pub fn reads_reservations(instance: &str, region: &str, nodes: u32, plan: &CapacityPlan) -> bool {
    nodes > 1
        && network_layers(instance).is_some()
        && reservation_topology_in(region)
        && matches!(
            plan,
            CapacityPlan::CapacityBlock {
                blocks: Some(_),
                ..
            } | CapacityPlan::Odcr { .. }
        )
}

/// Whether `aws-cli.sh` reads the topology of the plan's running nodes (its run stage).
pub fn reads_instances(instance: &str, nodes: u32) -> bool {
    nodes > 1 && network_layers(instance).is_some()
}

/// The topology part of the plan; `None` for a job of one node (nothing to be far from).
pub fn topology(instance: &str, region: &str, nodes: u32, plan: &CapacityPlan) -> Option<Topology> {
    if nodes < 2 {
        return None;
    }
    let Some(layers) = network_layers(instance) else {
        return Some(Topology {
            layers: None,
            reads: Vec::new(),
            expect: format!(
                "EC2 describes no network topology for {instance} (it is not among the types on {TOPOLOGY_PREREQUISITES_URL}): aws-cli.sh reads none, and how far apart the {nodes} nodes are is not known"
            ),
            how_to_read: String::new(),
        });
    };
    let mut reads = Vec::new();
    if reads_reservations(instance, region, nodes, plan) {
        reads.push(
            "describe-capacity-reservation-topology for the plan's reservation(s), at set-up once their ids are known: EC2 answers for reservations that are pending or active, so a block that has not started yet shows `not known yet`".to_string(),
        );
    } else if matches!(
        plan,
        CapacityPlan::CapacityBlock { .. } | CapacityPlan::Odcr { .. }
    ) && !reservation_topology_in(region)
    {
        reads.push(format!(
            "no describe-capacity-reservation-topology: {region} does not offer it ({TOPOLOGY_PREREQUISITES_URL})"
        ));
    }
    reads.push(format!(
        "describe-instance-topology for the {instance} nodes in the job's zone, in the run stage (`sh aws-cli.sh run`), before the NCCL check"
    ));
    Some(Topology {
        layers: Some(layers),
        reads,
        expect: expectation(plan, nodes, layers),
        how_to_read: how_to_read(layers),
    })
}

/// What the answer should show for this capacity.
fn expectation(plan: &CapacityPlan, nodes: u32, layers: u8) -> String {
    let capacity = match plan {
        // "Instances that run inside a Capacity Block are automatically placed close
        // together inside Amazon EC2 UltraClusters"
        // (<https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CapacityBlock.html>).
        CapacityPlan::CapacityBlock {
            blocks: Some(p), ..
        } if p.offerings.len() > 1 => format!(
            "each of the {} blocks is placed close together in an EC2 UltraCluster, the blocks are not known to be close to each other: the reservation topology says whether they share a network node before any node launches",
            p.offerings.len()
        ),
        CapacityPlan::CapacityBlock { .. } => {
            "one Capacity Block is placed close together in an EC2 UltraCluster".to_string()
        }
        CapacityPlan::Odcr { .. } => {
            "an On-Demand Capacity Reservation sits wherever it was reserved".to_string()
        }
        CapacityPlan::Existing { .. } => {
            "the cluster's nodes sit wherever they were launched".to_string()
        }
        CapacityPlan::OnDemand => {
            "a cluster placement group packs the instances close together in one zone".to_string()
        }
    };
    format!(
        "{capacity}; closest is all {nodes} nodes under one layer-{layers} network node. EC2 does not say how many instances one network node holds, so more than one layer-{layers} node is not wrong in itself; the job's pods prefer the closest nodes there are (their network-node affinity)"
    )
}

/// How to read the `topology:` lines.
fn how_to_read(layers: u8) -> String {
    let above = layers - 1;
    format!(
        "aws-cli.sh prints `topology: N ... under a layer-1, b layer-2, ... network node(s)` and where the farthest two meet. One layer-{layers} node for all: as close as EC2 describes. Several layer-{layers} nodes under one layer-{above} node: traffic between them climbs to layer {above}. Several layer-2 nodes: it climbs to layer 1. Several layer-1 nodes: they share no network node. `not known yet` names reservations that are not pending or active, and instances that are not running"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_node_says_nothing_and_an_unsupported_type_reads_nothing() {
        assert_eq!(
            topology("p5.48xlarge", "us-east-1", 1, &CapacityPlan::OnDemand),
            None
        );
        let t = topology("p5.4xlarge", "us-east-1", 4, &CapacityPlan::OnDemand).unwrap();
        assert_eq!(t.layers, None);
        assert!(t.reads.is_empty());
        assert!(
            t.expect
                .contains("describes no network topology for p5.4xlarge")
        );
    }

    #[test]
    fn an_odcr_reads_both_and_tel_aviv_only_the_instances() {
        let odcr = CapacityPlan::Odcr {
            reservation_id: "cr-1".into(),
        };
        let t = topology("p5.48xlarge", "us-east-1", 4, &odcr).unwrap();
        assert_eq!(t.layers, Some(3));
        assert_eq!(t.reads.len(), 2);
        assert!(t.reads[0].starts_with("describe-capacity-reservation-topology"));
        let t = topology("p5.48xlarge", "il-central-1", 4, &odcr).unwrap();
        assert!(t.reads[0].starts_with("no describe-capacity-reservation-topology"));
        assert!(t.reads[1].starts_with("describe-instance-topology"));
        let t = topology("p6-b200.48xlarge", "us-east-1", 2, &CapacityPlan::OnDemand).unwrap();
        assert_eq!(t.reads.len(), 1);
        assert!(
            t.how_to_read.contains("One layer-4 node"),
            "{}",
            t.how_to_read
        );
    }
}
