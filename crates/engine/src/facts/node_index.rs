//! The cluster's nodes as a snapshot reads them, kept so that a node added, changed or
//! removed costs O(its labels and the snapshot's persistent maps), not a pass over
//! every node. The live watch keeps one [`NodeIndex`] across snapshots; a snapshot
//! built from a node list (files, the CLI) makes one and drops it.
//!
//! What is per node (its zone, its Capacity Block) sits in persistent maps shared with
//! every snapshot published before; what is per instance type (the [`NodeType`]s, their
//! EFA, learned profiles) is tallied per type and recomputed only for the types a change
//! touched, so its cost grows with the number of instance types, not of nodes.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::facts::block_nodes::{BlockNode, BlockNodes, LABEL_NODEGROUP, LABEL_NODEPOOL};
use crate::facts::cluster_objects::NodeFacts;
use crate::facts::node_types::{NodeType, POOL_LABELS, learned_profile};
use crate::read::annotations::{
    ACCELERATOR_RESOURCES, LABEL_INSTANCE_TYPE, LABEL_ZONE, NETWORK_LAYERS, RES_EFA, ZONE_KEYS,
};
use trainplace_catalog::InstanceProfile;

type Fold = foldhash::fast::RandomState;

/// Node name -> its `topology.kubernetes.io/zone`, as reviewers read it.
pub(crate) type NodeZoneMap = imbl::HashMap<Arc<str>, Arc<str>>;

/// A node's network nodes from its EKS labels (`NETWORK_LAYERS`), layer 1 first, up to
/// the first layer it does not carry.
pub(crate) type NetworkPath = Arc<[Arc<str>]>;

/// What a snapshot knows of the nodes; shared by snapshots until a node changes.
#[derive(Debug, Clone, Default)]
pub(crate) struct NodeView {
    pub(crate) types: BTreeMap<String, NodeType>,
    /// Profiles for GPU types the catalog does not know, learned from allocatable.
    pub(crate) learned: BTreeMap<String, InstanceProfile>,
    /// Every instance type with nodes, with the most `vpc.amazonaws.com/efa` any of its
    /// nodes advertises (also types whose devices come through DRA).
    pub(crate) node_efa: BTreeMap<String, u32>,
    /// Each node's zone (where a pod with `spec.nodeName` runs).
    pub(crate) node_zones: NodeZoneMap,
    /// Each node's `node.kubernetes.io/instance-type` (what a pod with `spec.nodeName`
    /// runs on).
    pub(crate) node_types: imbl::HashMap<Arc<str>, Arc<str>>,
    /// The other labels that name a zone -> the zone name the same nodes carry.
    pub(crate) zone_aliases: HashMap<String, String>,
    /// Each node's network nodes, for the nodes that carry the layer labels.
    pub(crate) node_network: imbl::HashMap<Arc<str>, NetworkPath>,
    /// Nodes on reserved capacity, and the pools that have nothing else.
    pub(crate) block_nodes: BlockNodes,
    /// Whether the nodes were listed (false: nothing is known about node types).
    pub(crate) listed: bool,
}

/// What one node contributes.
#[derive(Debug, Clone, PartialEq, Eq)]
struct NodeRecord {
    instance_type: Option<String>,
    zone: Option<Arc<str>>,
    /// The extended resource its accelerators come through, and how many.
    accelerators: Option<(&'static str, u32)>,
    efa: u32,
    /// `label=value` of its node group, node pool and capacity reservation.
    pools: Vec<String>,
    /// Zone labels other than `topology.kubernetes.io/zone` that name another value.
    aliases: Vec<String>,
    block: Option<BlockNode>,
    /// `label=value` of its node pool and node group, for the block index.
    block_pools: Vec<String>,
    /// Its network nodes, layer 1 first (empty: no layer labels).
    network: Vec<Arc<str>>,
}

/// A multiset of counts: value -> how many nodes have it (its maximum is the last key).
type Tally<K> = BTreeMap<K, u32>;

fn count<K: Ord>(tally: &mut Tally<K>, key: K, add: bool) {
    if add {
        *tally.entry(key).or_default() += 1;
    } else if let Some(n) = tally.get_mut(&key) {
        *n -= 1;
        if *n == 0 {
            tally.remove(&key);
        }
    }
}

/// The nodes of one instance type, counted.
#[derive(Debug, Default)]
struct TypeTally {
    /// EFA of every node of the type.
    efa_all: Tally<u32>,
    /// Of the nodes with accelerators: their resource, count, EFA, zones and pools.
    resources: Tally<&'static str>,
    accelerators: Tally<u32>,
    efa: Tally<u32>,
    zones: Tally<Arc<str>>,
    pools: Tally<String>,
}

impl TypeTally {
    fn count(&mut self, r: &NodeRecord, add: bool) {
        count(&mut self.efa_all, r.efa, add);
        let Some((resource, n)) = r.accelerators else {
            return;
        };
        count(&mut self.resources, resource, add);
        count(&mut self.accelerators, n, add);
        count(&mut self.efa, r.efa, add);
        if let Some(z) = &r.zone {
            count(&mut self.zones, z.clone(), add);
        }
        for p in &r.pools {
            count(&mut self.pools, p.clone(), add);
        }
    }

    /// The type as reviewers read it; `None` when no node of it has accelerators.
    fn node_type(&self, name: &str) -> Option<NodeType> {
        let max = |t: &Tally<u32>| t.keys().next_back().copied().unwrap_or(0);
        // The resource most of its nodes advertise (ties: the first by name).
        let (resource, _) = self
            .resources
            .iter()
            .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))?;
        Some(NodeType {
            name: name.to_string(),
            accelerator_resource: resource.to_string(),
            accelerators: max(&self.accelerators),
            fewest_accelerators: self.accelerators.keys().next().copied().unwrap_or(0),
            efa: max(&self.efa),
            nodes: self.resources.values().sum(),
            zones: self.zones.keys().map(|z| z.to_string()).collect(),
            pools: self.pools.keys().cloned().collect(),
        })
    }
}

/// Every node, tallied by what the snapshot reads; records the changes since the
/// last publish.
#[derive(Debug, Default)]
pub struct NodeIndex {
    nodes: HashMap<Arc<str>, NodeRecord, Fold>,
    types: BTreeMap<String, TypeTally>,
    /// (alias, zone) -> nodes carrying both.
    aliases: Tally<(String, String)>,
    /// One `Arc` per zone name, shared by its nodes.
    zones: Vec<Arc<str>>,
    /// One `Arc` per network node name, shared by the nodes under it.
    network_names: HashMap<String, Arc<str>, Fold>,
    /// The view as of the last change (shared with the snapshots published since).
    view: Arc<NodeView>,
    /// Nodes whose zone changed since the last publish -> their zone now.
    moved: HashMap<Arc<str>, Option<Arc<str>>, Fold>,
    types_changed: Vec<String>,
    aliases_changed: bool,
    changed: bool,
}

impl NodeIndex {
    /// An index of a node list that has been listed, however many nodes it has.
    pub fn listed() -> Self {
        let mut index = NodeIndex::default();
        Arc::make_mut(&mut index.view).listed = true;
        index.changed = true;
        index
    }

    /// Add a node, or replace the one of its name. Returns whether anything a
    /// snapshot reads changed (a node's status report changes nothing).
    pub fn apply(&mut self, node: &impl NodeFacts) -> bool {
        let record = self.record(node);
        let name = node.name();
        if self.nodes.get(name) == Some(&record) {
            return false;
        }
        let name: Arc<str> = match self.nodes.get_key_value(name) {
            Some((k, _)) => k.clone(),
            None => name.into(),
        };
        self.take(&name);
        self.put(&name, &record, true);
        self.nodes.insert(name, record);
        true
    }

    /// Remove a node; whether it was there.
    pub fn remove(&mut self, name: &str) -> bool {
        let Some((name, _)) = self.nodes.get_key_value(name) else {
            return false;
        };
        let name = name.clone();
        self.take(&name);
        true
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// The zone of a node in the index.
    pub(crate) fn zone_of(&self, name: &str) -> Option<&Arc<str>> {
        self.nodes.get(name)?.zone.as_ref()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The names of every node (for a relist to find the nodes it no longer lists).
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.nodes.keys().map(|n| &**n)
    }

    /// Take out node `name`'s record and everything counted from it.
    fn take(&mut self, name: &Arc<str>) {
        if let Some(old) = self.nodes.remove(name) {
            self.put(name, &old, false);
        }
    }

    /// Count `r` in (`add`) or out of every tally and of the view.
    fn put(&mut self, name: &Arc<str>, r: &NodeRecord, add: bool) {
        self.changed = true;
        let view = Arc::make_mut(&mut self.view);
        view.listed = true;
        if let Some(t) = &r.instance_type {
            self.types.entry(t.clone()).or_default().count(r, add);
            self.types_changed.push(t.clone());
        }
        if let Some(z) = &r.zone {
            for a in &r.aliases {
                count(&mut self.aliases, (a.clone(), z.to_string()), add);
                self.aliases_changed = true;
            }
        }
        match r.instance_type.as_deref().filter(|_| add) {
            Some(t) => view.node_types.insert(name.clone(), t.into()),
            None => view.node_types.remove(name),
        };
        let zone = r.zone.clone().filter(|_| add);
        match &zone {
            Some(z) => view.node_zones.insert(name.clone(), z.clone()),
            None => view.node_zones.remove(name),
        };
        self.moved.insert(name.clone(), zone);
        if add && !r.network.is_empty() {
            view.node_network
                .insert(name.clone(), r.network.as_slice().into());
        } else {
            view.node_network.remove(name);
        }
        if add {
            view.block_nodes
                .add_node(name, r.block.clone(), &r.block_pools);
        } else {
            view.block_nodes
                .remove_node(name, r.block.as_ref(), &r.block_pools);
        }
    }

    fn record(&mut self, node: &impl NodeFacts) -> NodeRecord {
        let zone = node.label(LABEL_ZONE).map(|z| self.intern(z));
        let label = |k: &str| node.label(k).map(|v| format!("{k}={v}"));
        NodeRecord {
            instance_type: node.label(LABEL_INSTANCE_TYPE).map(String::from),
            accelerators: ACCELERATOR_RESOURCES
                .iter()
                .map(|r| (*r, node.allocatable(r)))
                .find(|(_, n)| *n > 0),
            efa: node.allocatable(RES_EFA),
            pools: POOL_LABELS.iter().filter_map(|k| label(k)).collect(),
            aliases: match &zone {
                Some(z) => ZONE_KEYS[1..]
                    .iter()
                    .filter_map(|k| node.label(k).filter(|a| *a != &**z).map(String::from))
                    .collect(),
                None => Vec::new(),
            },
            block: BlockNode::of(|k| node.label(k)),
            block_pools: [LABEL_NODEPOOL, LABEL_NODEGROUP]
                .iter()
                .filter_map(|k| label(k))
                .collect(),
            network: NETWORK_LAYERS
                .iter()
                .map_while(|k| node.label(k))
                .map(|v| self.network_name(v))
                .collect(),
            zone,
        }
    }

    fn network_name(&mut self, name: &str) -> Arc<str> {
        if let Some(n) = self.network_names.get(name) {
            return n.clone();
        }
        let n: Arc<str> = name.into();
        self.network_names.insert(name.to_string(), n.clone());
        n
    }

    fn intern(&mut self, zone: &str) -> Arc<str> {
        if let Some(z) = self.zones.iter().find(|z| &***z == zone) {
            return z.clone();
        }
        self.zones.push(zone.into());
        self.zones[self.zones.len() - 1].clone()
    }

    /// Nodes whose zone changed since the last call -> their zone now (`None`: gone,
    /// or no zone label).
    pub(crate) fn take_moves(&mut self) -> HashMap<Arc<str>, Option<Arc<str>>, Fold> {
        std::mem::take(&mut self.moved)
    }

    /// The view with every change so far: the types that changed recomputed (O(those
    /// types)); everything else as it was. `None` when nothing changed since the last.
    pub(crate) fn publish(&mut self) -> Option<Arc<NodeView>> {
        if !std::mem::take(&mut self.changed) {
            return None;
        }
        let view = Arc::make_mut(&mut self.view);
        let mut changed = std::mem::take(&mut self.types_changed);
        changed.sort_unstable();
        changed.dedup();
        for name in changed {
            let tally = self.types.get(&name);
            match tally.and_then(|t| t.efa_all.keys().next_back()) {
                Some(efa) => view.node_efa.insert(name.clone(), *efa),
                None => view.node_efa.remove(&name),
            };
            match tally.and_then(|t| t.node_type(&name)) {
                Some(t) => {
                    view.learned.insert(name.clone(), learned_profile(&t).1);
                    view.types.insert(name.clone(), t);
                }
                None => {
                    view.learned.remove(&name);
                    view.types.remove(&name);
                }
            }
            if tally.is_some_and(|t| t.efa_all.is_empty()) {
                self.types.remove(&name);
            }
        }
        if std::mem::take(&mut self.aliases_changed) {
            // The last zone (by name) an alias is seen with, for an alias on two zones.
            view.zone_aliases = self
                .aliases
                .keys()
                .map(|(a, z)| (a.clone(), z.clone()))
                .collect();
        }
        Some(self.view.clone())
    }

    /// Every node's zone now (for a job index built against this node list).
    pub(crate) fn zones_by_node(&self) -> impl Iterator<Item = (&Arc<str>, &Arc<str>)> {
        self.view.node_zones.iter()
    }
}
