//! What a plan costs: on demand at the catalog price, or the chosen blocks' fee; and,
//! beside it, the checkpoint storage the plan makes (`checkpoint.rs`).

use serde::Serialize;
use trainplace_catalog::InstanceProfile;

use crate::plan::CapacityPlan;
use crate::request::Request;
use crate::shape::Shape;

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Cost {
    /// On-demand price x nodes x job hours (catalog price).
    pub on_demand_usd: Option<f64>,
    /// Upfront fee of the chosen Capacity Blocks.
    pub capacity_block_usd: Option<f64>,
    /// What this plan is expected to cost.
    pub estimate_usd: Option<f64>,
    /// The checkpoint storage the plan makes, for the run's hours (`checkpoint.rs`);
    /// none when the plan makes none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpoint_storage_usd: Option<f64>,
    /// The same storage for a month: it bills until deleted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpoint_storage_usd_per_month: Option<f64>,
    /// The region whose list prices the catalog figures above are (on-demand, storage),
    /// when it is not the plan's: the catalog holds us-east-1 prices only. Capacity Block
    /// fees are the plan's region's, from its offerings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub list_prices_region: Option<&'static str>,
}

/// The region of the catalog's prices: EC2 on-demand (policies/instances.yaml,
/// `[ec2-price]`) and FSx for Lustre (`checkpoint.rs`).
pub const LIST_PRICES_REGION: &str = "us-east-1";

/// On-demand cost at the catalog price; none for a type not sold on-demand
/// (`capacity/margin.rs`).
pub(super) fn on_demand(p: &InstanceProfile, nodes: u32, hours: u32) -> Option<f64> {
    if crate::capacity::margin::ultraserver_only(&p.name) {
        return None;
    }
    p.price_per_hour_usd
        .map(|usd| round2(usd * f64::from(nodes) * f64::from(hours)))
}

pub(super) fn cost(req: &Request, p: &InstanceProfile, shape: &Shape, plan: &CapacityPlan) -> Cost {
    let hours = req.job_hours;
    let on_demand_usd = on_demand(p, shape.nodes, hours);
    let storage_gib = crate::checkpoint::applies(req, plan)
        .then(|| crate::checkpoint::sizing(req, p, shape).fsx_gib);
    let capacity_block_usd = match plan {
        CapacityPlan::CapacityBlock {
            blocks: Some(b), ..
        } => Some(b.total_fee_usd),
        _ => None,
    };
    let estimate_usd = match plan {
        CapacityPlan::CapacityBlock { .. } => capacity_block_usd,
        // ODCRs bill at the on-demand rate.
        CapacityPlan::Odcr { .. } | CapacityPlan::OnDemand | CapacityPlan::Existing { .. } => {
            on_demand_usd
        }
    };
    let catalog_priced = on_demand_usd.is_some() || storage_gib.is_some();
    Cost {
        on_demand_usd,
        capacity_block_usd,
        estimate_usd,
        checkpoint_storage_usd: storage_gib.map(|g| crate::checkpoint::usd_for_hours(g, hours)),
        checkpoint_storage_usd_per_month: storage_gib.map(crate::checkpoint::usd_per_month),
        list_prices_region: (catalog_priced && req.region != LIST_PRICES_REGION)
            .then_some(LIST_PRICES_REGION),
    }
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}
