//! Which nodes run on Capacity Blocks, and which node pools / node groups have nothing
//! else. Learned from node labels when the snapshot is built; matched to blocks (and
//! their end times) only when asked, since the blocks may be added to the snapshot
//! after its nodes.
//!
//! Labels: Karpenter puts `karpenter.sh/capacity-type: reserved` and
//! `karpenter.k8s.aws/capacity-reservation-id` on nodes it launches into a reservation
//! (<https://karpenter.sh/docs/tasks/odcrs/>); EKS managed node groups launched with
//! `--capacity-type CAPACITY_BLOCK` carry `eks.amazonaws.com/capacityType: CAPACITY_BLOCK`
//! and no reservation id (<https://docs.aws.amazon.com/eks/latest/userguide/capacity-blocks-mng.html>).

use std::sync::Arc;

use jiff::SignedDuration;

use crate::facts::reservations::{RECLAIM_BEFORE_END, Reservation, Reservations};
use crate::read::annotations::{LABEL_INSTANCE_TYPE, LABEL_RESERVATION_ID, LABEL_ZONE};

pub(crate) const LABEL_KARPENTER_CAPACITY_TYPE: &str = "karpenter.sh/capacity-type";
pub(crate) const LABEL_EKS_CAPACITY_TYPE: &str = "eks.amazonaws.com/capacityType";
pub(crate) const LABEL_NODEPOOL: &str = "karpenter.sh/nodepool";
pub(crate) const LABEL_NODEGROUP: &str = "eks.amazonaws.com/nodegroup";

/// EKS managed node groups on a Capacity Block get a scheduled action that scales them
/// to 0 this long before the block ends ("Amazon EKS Node Group Capacity Scaledown
/// Before Reservation End"): https://docs.aws.amazon.com/eks/latest/userguide/ml-node-groups.html
pub const NODE_GROUP_SCALEDOWN_BEFORE_END: SignedDuration = SignedDuration::from_mins(40);

/// Karpenter (>= 1.6, the first with Capacity Blocks) starts draining a block's nodes
/// 10 minutes before EC2 starts terminating them, i.e. this long before the end:
/// https://karpenter.sh/docs/tasks/odcrs/ ("Expiration", "Capacity Blocks").
pub const KARPENTER_DRAIN_BEFORE_END: SignedDuration =
    SignedDuration::from_mins(RECLAIM_BEFORE_END.as_mins() + 10);

/// What puts block nodes into the cluster, which decides when their pods stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Provisioner {
    /// Karpenter: drains the nodes 40 minutes before the end.
    Karpenter,
    /// An EKS managed node group: scaled to 0 40 minutes before the end.
    ManagedNodeGroup,
}

impl Provisioner {
    /// How long before the block's end the job's pods stop running.
    pub fn stop_before_end(self) -> SignedDuration {
        match self {
            Provisioner::Karpenter => KARPENTER_DRAIN_BEFORE_END,
            Provisioner::ManagedNodeGroup => NODE_GROUP_SCALEDOWN_BEFORE_END,
        }
    }

    /// Who stops the pods, for messages ("… at 10:50Z").
    pub fn stopper(self) -> &'static str {
        match self {
            Provisioner::Karpenter => {
                "Karpenter drains its nodes (10 minutes before EC2 terminates them)"
            }
            Provisioner::ManagedNodeGroup => "EKS scales its managed node group to 0",
        }
    }
}

/// A node whose labels say it runs on reserved capacity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockNode {
    pub reservation_id: Option<String>,
    pub instance_type: String,
    pub zone: Option<String>,
    pub provisioner: Provisioner,
}

impl BlockNode {
    pub(crate) fn of<'a>(get: impl Fn(&str) -> Option<&'a str>) -> Option<Self> {
        let provisioner = if get(LABEL_EKS_CAPACITY_TYPE) == Some("CAPACITY_BLOCK") {
            Provisioner::ManagedNodeGroup
        } else if get(LABEL_KARPENTER_CAPACITY_TYPE) == Some("reserved") {
            Provisioner::Karpenter
        } else {
            return None;
        };
        Some(BlockNode {
            reservation_id: get(LABEL_RESERVATION_ID).map(String::from),
            instance_type: get(LABEL_INSTANCE_TYPE)?.to_string(),
            zone: get(LABEL_ZONE).map(String::from),
            provisioner,
        })
    }

    /// The Capacity Block this node runs on: by its reservation id, else (a managed
    /// node group's node names none) the block of its type and zone that ends first.
    /// `None` for a reserved node that is no Capacity Block (a plain ODCR).
    pub fn block<'r>(&self, reservations: &'r Reservations) -> Option<&'r Reservation> {
        match &self.reservation_id {
            Some(id) => reservations.get(id),
            None => reservations.first_ending(&self.instance_type, self.zone.as_deref()),
        }
    }
}

/// Block nodes by node name, and the nodes of every node pool / node group. Persistent
/// maps: a node added or removed changes a copy in O(log nodes), and snapshots share
/// the rest.
#[derive(Debug, Clone, Default)]
pub struct BlockNodes {
    by_node: imbl::HashMap<Arc<str>, BlockNode>,
    /// `label=value` of a pool -> its nodes, and the block nodes among them.
    pools: imbl::OrdMap<String, Pool>,
}

#[derive(Debug, Clone, Default)]
struct Pool {
    nodes: u32,
    blocks: imbl::OrdMap<Arc<str>, BlockNode>,
}

impl BlockNodes {
    /// Record one node from its name and its labels (`label` reads one).
    #[cfg(test)]
    pub(crate) fn add<'a>(&mut self, name: &str, label: impl Fn(&str) -> Option<&'a str>) {
        let pools: Vec<String> = [LABEL_NODEPOOL, LABEL_NODEGROUP]
            .iter()
            .filter_map(|k| Some(format!("{k}={}", label(k)?)))
            .collect();
        self.add_node(&name.into(), BlockNode::of(&label), &pools);
    }

    /// Record node `name`, in the pools `pools` (`label=value`), on `block` if it is on one.
    pub(crate) fn add_node(&mut self, name: &Arc<str>, block: Option<BlockNode>, pools: &[String]) {
        for p in pools {
            let mut pool = self.pools.get(p).cloned().unwrap_or_default();
            pool.nodes += 1;
            if let Some(b) = &block {
                pool.blocks.insert(name.clone(), b.clone());
            }
            self.pools.insert(p.clone(), pool);
        }
        if let Some(b) = block {
            self.by_node.insert(name.clone(), b);
        }
    }

    /// Take back a node recorded with [`BlockNodes::add_node`] (the same block and pools).
    pub(crate) fn remove_node(&mut self, name: &str, block: Option<&BlockNode>, pools: &[String]) {
        for p in pools {
            let Some(mut pool) = self.pools.get(p).cloned() else {
                continue;
            };
            pool.nodes = pool.nodes.saturating_sub(1);
            if block.is_some() {
                pool.blocks.remove(name);
            }
            if pool.nodes == 0 {
                self.pools.remove(p);
            } else {
                self.pools.insert(p.clone(), pool);
            }
        }
        if block.is_some() {
            self.by_node.remove(name);
        }
    }

    /// The block node of this name, if it is one.
    pub fn node(&self, name: &str) -> Option<&BlockNode> {
        self.by_node.get(name)
    }

    /// When every current node of the pool (`karpenter.sh/nodepool=x` or
    /// `eks.amazonaws.com/nodegroup=x`) runs on a Capacity Block: the block that ends
    /// first, with how its nodes are provisioned. `None` for a pool with no nodes, or
    /// with any node off a block (the job may run there).
    pub fn pool_block<'r>(
        &self,
        pool: &str,
        reservations: &'r Reservations,
    ) -> Option<(&'r Reservation, Provisioner)> {
        let Pool { nodes, blocks } = self.pools.get(pool)?;
        if *nodes == 0 || blocks.len() != *nodes as usize {
            return None;
        }
        let mut resolved = Vec::with_capacity(blocks.len());
        for node in blocks.values() {
            resolved.push((node.block(reservations)?, node.provisioner));
        }
        resolved
            .into_iter()
            .min_by_key(|(r, p)| r.before_end(p.stop_before_end()))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::*;

    fn add(nodes: &mut BlockNodes, name: &str, labels: &BTreeMap<String, String>) {
        nodes.add(name, |k| labels.get(k).map(String::as_str));
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn reservations() -> Reservations {
        let mut r = Reservations::default();
        r.add_describe_output(&json!({"CapacityReservations": [
            {"CapacityReservationId": "cr-1", "InstanceType": "p5.48xlarge", "AvailabilityZone": "us-east-1d",
             "State": "active", "EndDate": "2026-11-23T11:30:00+00:00", "ReservationType": "capacity-block"}
        ]}));
        r
    }

    #[test]
    fn a_node_group_with_only_block_nodes_has_a_block_and_one_with_others_has_none() {
        let mut nodes = BlockNodes::default();
        let block = labels(&[
            (LABEL_NODEGROUP, "p5-cb"),
            (LABEL_EKS_CAPACITY_TYPE, "CAPACITY_BLOCK"),
            (LABEL_INSTANCE_TYPE, "p5.48xlarge"),
            (LABEL_ZONE, "us-east-1d"),
        ]);
        add(&mut nodes, "a", &block);
        add(&mut nodes, "b", &block);
        let mut mixed = block.clone();
        mixed.insert(LABEL_NODEGROUP.into(), "p5-mixed".into());
        add(&mut nodes, "c", &mixed);
        add(
            &mut nodes,
            "d",
            &labels(&[
                (LABEL_NODEGROUP, "p5-mixed"),
                (LABEL_EKS_CAPACITY_TYPE, "ON_DEMAND"),
                (LABEL_INSTANCE_TYPE, "p5.48xlarge"),
            ]),
        );
        let r = reservations();
        let (found, how) = nodes
            .pool_block("eks.amazonaws.com/nodegroup=p5-cb", &r)
            .unwrap();
        assert_eq!(found.id, "cr-1");
        assert_eq!(how, Provisioner::ManagedNodeGroup);
        assert!(
            nodes
                .pool_block("eks.amazonaws.com/nodegroup=p5-mixed", &r)
                .is_none()
        );
        assert!(
            nodes
                .pool_block("eks.amazonaws.com/nodegroup=none", &r)
                .is_none()
        );
        assert_eq!(nodes.node("a").unwrap().block(&r).unwrap().id, "cr-1");
        assert!(nodes.node("d").is_none());
    }

    #[test]
    fn a_reserved_node_of_a_plain_reservation_is_on_no_block() {
        let mut nodes = BlockNodes::default();
        add(
            &mut nodes,
            "a",
            &labels(&[
                (LABEL_NODEPOOL, "odcr"),
                (LABEL_KARPENTER_CAPACITY_TYPE, "reserved"),
                (LABEL_RESERVATION_ID, "cr-odcr"),
                (LABEL_INSTANCE_TYPE, "p5.48xlarge"),
            ]),
        );
        let r = reservations();
        assert!(nodes.node("a").unwrap().block(&r).is_none());
        assert!(nodes.pool_block("karpenter.sh/nodepool=odcr", &r).is_none());
    }
}
