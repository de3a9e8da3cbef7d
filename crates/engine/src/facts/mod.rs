//! The facts a verdict rests on, all handed in by the caller: the policy (with the
//! instance catalog from `trainplace-catalog`), the cluster inventory with its node
//! types, Capacity Blocks and the nodes on them, DRA claims, the index of running jobs,
//! the signed admission marks and their keys, and who is asking.

pub(crate) mod block_nodes;
pub mod cluster_objects;
pub(crate) mod dra;
pub(crate) mod efa_source;
pub(crate) mod ending;
pub(crate) mod inventory;
pub(crate) mod job_index;
pub(crate) mod mark;
pub(crate) mod network_fit;
pub(crate) mod network_spread;
pub(crate) mod node_index;
pub(crate) mod node_types;
pub(crate) mod policy;
pub(crate) mod requester;
pub(crate) mod reservations;
pub(crate) mod whole_node;
