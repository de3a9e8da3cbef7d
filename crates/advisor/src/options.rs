//! The capacity the plan did not choose, with its cost: the longer Capacity Block that
//! also holds the 40 minutes EKS takes at the end, and on-demand. Shown next to the
//! chosen plan so the trade (price against the checkpoint deadline) is visible.

use jiff::Timestamp;
use serde::Serialize;
use trainplace_catalog::InstanceProfile;

use crate::capacity::{BlockChoice, BlockNeed, BlockPlan, block_lengths, choose_blocks};
use crate::plan::{CapacityPlan, Facts};
use crate::request::Request;
use crate::shape::Shape;

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CapacityOption {
    /// `capacity-block` or `on-demand`.
    pub kind: &'static str,
    pub label: String,
    pub chosen: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub offerings: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub availability_zone: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start: Option<Timestamp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end: Option<Timestamp>,
    pub usd: Option<f64>,
}

impl CapacityOption {
    /// An option of `kind` with no blocks, zone, window or price (yet).
    fn plain(kind: &'static str, label: String, chosen: bool) -> Self {
        CapacityOption {
            kind,
            label,
            chosen,
            offerings: Vec::new(),
            availability_zone: None,
            start: None,
            end: None,
            usd: None,
        }
    }

    /// The Capacity Blocks of `plan`: their ids, zone, window and fee.
    fn blocks(label: String, chosen: bool, plan: &BlockPlan) -> Self {
        CapacityOption {
            offerings: plan.offerings.iter().map(|o| o.id.clone()).collect(),
            availability_zone: Some(plan.availability_zone.clone()),
            start: Some(plan.start),
            end: Some(plan.end),
            usd: Some(plan.total_fee_usd),
            ..CapacityOption::plain("capacity-block", label, chosen)
        }
    }
}

/// The chosen capacity first, then the longer blocks that also hold EKS's scale-down
/// (when offered and different), the existing nodes, and on-demand.
pub fn capacity_options(
    req: &Request,
    p: &InstanceProfile,
    shape: &Shape,
    facts: &Facts,
    chosen: &CapacityPlan,
    on_demand_usd: Option<f64>,
) -> Vec<CapacityOption> {
    let mut out = Vec::new();
    match chosen {
        CapacityPlan::CapacityBlock {
            blocks: Some(plan), ..
        } => out.extend(chosen_blocks(req, p, shape, facts, plan)),
        CapacityPlan::CapacityBlock {
            block_hours,
            blocks: None,
        } => out.push(CapacityOption::plain(
            "capacity-block",
            format!(
                "Capacity Block(s) of {block_hours} h: list the offerings (aws-cli.sh), then rerun with them to choose"
            ),
            true,
        )),
        CapacityPlan::Existing { nodes, groups } => out.push(CapacityOption::plain(
            "existing",
            format!(
                "the cluster's {nodes} existing node(s) ({})",
                groups.join(", ")
            ),
            true,
        )),
        CapacityPlan::OnDemand => out.extend(weighed_block(req, p, shape, facts)),
        CapacityPlan::Odcr { .. } => {}
    }
    // Not sold on-demand: no such option to weigh (`capacity/margin.rs`).
    if crate::capacity::margin::ultraserver_only(&p.name) {
        return out;
    }
    out.push(CapacityOption {
        usd: on_demand_usd,
        ..CapacityOption::plain(
            "on-demand",
            format!(
                "on-demand, {} x {} for {} h (not reserved: one AZ, large counts are often not obtainable)",
                shape.nodes, p.name, req.job_hours
            ),
            matches!(chosen, CapacityPlan::OnDemand | CapacityPlan::Odcr { .. }),
        )
    });
    out
}

/// The chosen blocks, and the longer ones that also cover the EKS scale-down when the
/// offerings have them.
fn chosen_blocks(
    req: &Request,
    p: &InstanceProfile,
    shape: &Shape,
    facts: &Facts,
    plan: &BlockPlan,
) -> Vec<CapacityOption> {
    let label = format!(
        "Capacity Block(s) of {} for the job's {} h; checkpoint by {}",
        block_lengths(plan),
        req.job_hours,
        plan.checkpoint_by
    );
    let mut out = vec![CapacityOption::blocks(label, true, plan)];
    if let Some(offers) = &facts.offerings {
        let margin = plan.end_margin_minutes;
        let need = BlockNeed::of_request(&p.name, req, shape.nodes, margin);
        if let BlockChoice::Fit(longer) = choose_blocks(offers, &need)
            && longer
                .offerings
                .iter()
                .map(|o| &o.id)
                .ne(plan.offerings.iter().map(|o| &o.id))
        {
            let label = format!(
                "longer Capacity Block(s) of {}: the job plus the {margin} min {}",
                block_lengths(&longer),
                if crate::capacity::margin::ultraserver_only(&p.name) {
                    "UltraServer reclaim"
                } else {
                    "EKS scale-down"
                }
            );
            out.push(CapacityOption::blocks(label, false, &longer));
        }
    }
    out
}

/// The block on-demand was weighed against (when one fits): reserved nodes for its fee.
fn weighed_block(
    req: &Request,
    p: &InstanceProfile,
    shape: &Shape,
    facts: &Facts,
) -> Option<CapacityOption> {
    let need = BlockNeed::of_request(&p.name, req, shape.nodes, 0);
    let BlockChoice::Fit(plan) = choose_blocks(facts.offerings.as_ref()?, &need) else {
        return None;
    };
    let label = format!(
        "Capacity Block(s) of {} for the job's {} h: reserved nodes; checkpoint by {}",
        block_lengths(&plan),
        req.job_hours,
        plan.checkpoint_by
    );
    Some(CapacityOption::blocks(label, false, &plan))
}
