//! Where the job lands and what already exists: the zone, the cluster's own nodes
//! offered before buying, and the offerings the plan leaves for people to weigh.

use serde::Serialize;

use crate::aws::offerings::Offering;
use crate::capacity::{BlockNeed, judge};
use crate::inventory::zones_with;
use crate::plan::{CapacityPlan, Facts};
use crate::request::{CapacityPref, Request};
use crate::warnings::{self as warn, Warning};

/// An offering of the chosen type the plan does not buy, and whether it could serve
/// the job on its own: if not, why; if so, what it costs against the chosen capacity.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListedOffering {
    #[serde(flatten)]
    pub offering: Offering,
    /// It alone holds the job's nodes for its hours, in an allowed zone, buyable now.
    pub fits: bool,
    pub why: String,
}

/// The offerings of `instance` in the region the plan does not buy, by start (at most
/// 20), each judged against the job (`capacity::judge`).
pub(crate) fn other_offerings(
    req: &Request,
    instance: &str,
    nodes: u32,
    facts: &Facts,
    chosen: &CapacityPlan,
    on_demand_usd: Option<f64>,
) -> Vec<ListedOffering> {
    let bought: Vec<&str> = match chosen {
        CapacityPlan::CapacityBlock {
            blocks: Some(plan), ..
        } => plan.offerings.iter().map(|o| o.id.as_str()).collect(),
        _ => Vec::new(),
    };
    let mut out: Vec<&Offering> = facts
        .offerings
        .iter()
        .flatten()
        .filter(|o| {
            o.instance_type == instance
                && crate::regions::is_zone_of(&o.availability_zone, &req.region)
                && !bought.contains(&o.id.as_str())
        })
        .collect();
    out.sort_by(|a, b| a.start.cmp(&b.start).then(a.id.cmp(&b.id)));
    out.truncate(20);
    let need = BlockNeed::of_request(instance, req, nodes, 0);
    out.into_iter()
        .map(|o| {
            let (fits, why) = match judge(o, &need) {
                Err(why) => (false, why),
                Ok(()) => (true, fit_words(o, chosen, on_demand_usd)),
            };
            ListedOffering {
                offering: o.clone(),
                fits,
                why,
            }
        })
        .collect()
}

/// Why a fitting offering is not the plan: its fee against what was chosen.
fn fit_words(o: &Offering, chosen: &CapacityPlan, on_demand_usd: Option<f64>) -> String {
    let sized = format!(
        "fits: {} instances x {} h for ${:.2}",
        o.instance_count, o.duration_hours, o.upfront_fee
    );
    match (chosen, on_demand_usd) {
        (
            CapacityPlan::CapacityBlock {
                blocks: Some(plan), ..
            },
            _,
        ) => format!(
            "{sized}; not chosen: the chosen block(s) cost ${:.2}",
            plan.total_fee_usd
        ),
        (CapacityPlan::OnDemand, Some(od)) if o.upfront_fee > od => format!(
            "{sized}, ${:.2} more than on-demand for the job (${od:.2}); buy it for reserved nodes",
            o.upfront_fee - od
        ),
        _ => sized,
    }
}

/// Nodes the cluster already has, offered before buying more: enough nodes of the type
/// in one allowed zone make the plan `Existing`.
pub(crate) fn existing_capacity(
    req: &Request,
    instance: &str,
    nodes: u32,
    facts: &Facts,
) -> Option<(CapacityPlan, String)> {
    // An explicit capacity preference means buy that way.
    if req.capacity != CapacityPref::Auto {
        return None;
    }
    let have = zones_with(facts.nodes.as_deref()?, instance);
    let z = have
        .into_iter()
        .find(|z| z.nodes >= nodes && (req.zones.is_empty() || req.zones.contains(&z.zone)))?;
    Some((
        CapacityPlan::Existing {
            nodes: z.nodes,
            groups: z.groups,
        },
        z.zone,
    ))
}

/// Allowed zone that already holds nodes of this type, else the first allowed zone,
/// else the region's first zone (assumed, with a warning).
pub(crate) fn pick_zone(
    req: &Request,
    instance: &str,
    facts: &Facts,
    reasons: &mut Vec<String>,
    warnings: &mut Vec<Warning>,
) -> String {
    let existing = facts
        .nodes
        .as_deref()
        .map(|n| zones_with(n, instance))
        .unwrap_or_default();
    if let Some(z) = existing
        .iter()
        .find(|z| req.zones.is_empty() || req.zones.contains(&z.zone))
    {
        reasons.push(format!(
            "{}: the cluster already has {} {instance} node(s) there ({})",
            z.zone,
            z.nodes,
            z.groups.join(", ")
        ));
        return z.zone.clone();
    }
    if let Some(z) = req.zones.first() {
        return z.clone();
    }
    let zone = format!("{}a", req.region);
    warnings.push(warn::zone_assumed(&zone));
    zone
}
