//! The plan's leaf types: the optional facts next to a request and the capacity a
//! plan buys. Kept below `recommend` so the modules that help it (options, placement)
//! need not import it.

use serde::Serialize;

use crate::aws::instance_types::AwsInstanceType;
use crate::aws::offerings::Offering;
use crate::aws::reservations::HeldBlock;
use crate::capacity::BlockPlan;
use crate::inventory::NodeInfo;

/// Optional real data next to the request.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    pub offerings: Option<Vec<Offering>>,
    pub instance_types: Option<Vec<AwsInstanceType>>,
    pub nodes: Option<Vec<NodeInfo>>,
    /// Capacity Blocks the account already holds (describe-capacity-reservations).
    pub reservations: Option<Vec<HeldBlock>>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum CapacityPlan {
    /// `blocks` is `None` when no offerings were given: look them up, then rerun.
    #[serde(rename_all = "camelCase")]
    CapacityBlock {
        block_hours: u32,
        blocks: Option<BlockPlan>,
    },
    #[serde(rename_all = "camelCase")]
    Odcr {
        reservation_id: String,
    },
    /// The cluster already has enough nodes of the type in one zone: buy nothing.
    #[serde(rename_all = "camelCase")]
    Existing {
        nodes: u32,
        groups: Vec<String>,
    },
    OnDemand,
}
