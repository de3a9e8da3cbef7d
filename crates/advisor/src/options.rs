//! The capacity the plan did not choose, with its cost: the longer Capacity Block that
//! also holds the 40 minutes EKS takes at the end, and on-demand. Shown next to the
//! chosen plan so the trade (price against the checkpoint deadline) is visible.

use jiff::Timestamp;
use serde::Serialize;
use trainplace_engine::InstanceProfile;

use crate::capacity::{BlockChoice, BlockNeed, EKS_SCALE_DOWN_MINUTES, choose_blocks};
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

pub fn capacity_options(
    req: &Request,
    p: &InstanceProfile,
    shape: &Shape,
    facts: &Facts,
    chosen: &CapacityPlan,
    on_demand_usd: Option<f64>,
) -> Vec<CapacityOption> {
    let mut out = Vec::new();
    let chosen_ids: Option<Vec<String>> = match chosen {
        CapacityPlan::CapacityBlock {
            blocks: Some(plan), ..
        } => {
            let ids: Vec<String> = plan.offerings.iter().map(|o| o.id.clone()).collect();
            out.push(CapacityOption {
                kind: "capacity-block",
                label: format!(
                    "Capacity Block(s) for the job's {} h; checkpoint by {}",
                    req.job_hours, plan.checkpoint_by
                ),
                chosen: true,
                offerings: ids.clone(),
                availability_zone: Some(plan.availability_zone.clone()),
                start: Some(plan.start),
                end: Some(plan.end),
                usd: Some(plan.total_fee_usd),
            });
            Some(ids)
        }
        CapacityPlan::CapacityBlock {
            block_hours,
            blocks: None,
        } => {
            out.push(CapacityOption {
                kind: "capacity-block",
                label: format!(
                    "Capacity Block(s) of {block_hours} h: list the offerings (aws-cli.sh), then rerun with them to choose"
                ),
                chosen: true,
                offerings: Vec::new(),
                availability_zone: None,
                start: None,
                end: None,
                usd: None,
            });
            None
        }
        _ => None,
    };
    if let (Some(offers), Some(ids)) = (&facts.offerings, &chosen_ids) {
        let need = BlockNeed::of_request(&p.name, req, shape.nodes, EKS_SCALE_DOWN_MINUTES);
        if let BlockChoice::Fit(plan) = choose_blocks(offers, &need) {
            let longer: Vec<String> = plan.offerings.iter().map(|o| o.id.clone()).collect();
            if &longer != ids {
                out.push(CapacityOption {
                    kind: "capacity-block",
                    label: format!(
                        "longer Capacity Block(s): the job plus the {EKS_SCALE_DOWN_MINUTES} min EKS scale-down"
                    ),
                    chosen: false,
                    offerings: longer,
                    availability_zone: Some(plan.availability_zone.clone()),
                    start: Some(plan.start),
                    end: Some(plan.end),
                    usd: Some(plan.total_fee_usd),
                });
            }
        }
    }
    if let CapacityPlan::Existing { nodes, groups } = chosen {
        out.push(CapacityOption {
            kind: "existing",
            label: format!(
                "the cluster's {nodes} existing node(s) ({})",
                groups.join(", ")
            ),
            chosen: true,
            offerings: Vec::new(),
            availability_zone: None,
            start: None,
            end: None,
            usd: None,
        });
    }
    out.push(CapacityOption {
        kind: "on-demand",
        label: format!(
            "on-demand, {} x {} for {} h (one AZ; large counts are often not obtainable)",
            shape.nodes, p.name, req.job_hours
        ),
        chosen: matches!(chosen, CapacityPlan::OnDemand | CapacityPlan::Odcr { .. }),
        offerings: Vec::new(),
        availability_zone: None,
        start: None,
        end: None,
        usd: on_demand_usd,
    });
    out
}
