//! The planner: a validated request plus optional AWS / cluster data in, a
//! recommendation with reasons and warnings out. Pure: no I/O.

use serde::Serialize;
use trainplace_engine::{Catalog, InstanceProfile};

use crate::aws::instance_types::disagreements;
use crate::bandwidth::{Bandwidth, bandwidth};
pub use crate::capacity::block_lengths;
use crate::capacity::{
    BlockChoice, BlockNeed, BlockPlan, block_hours_for, block_sizes, choose_blocks, choose_held,
};
use crate::error::InputError;
use crate::options::{CapacityOption, capacity_options};
pub use crate::placement::ListedOffering;
use crate::placement::{existing_capacity, other_offerings, pick_zone};
pub use crate::plan::{CapacityPlan, Facts};
use crate::request::{CapacityPref, Request};
use crate::shape::{Candidate, Shape, candidates};
use crate::warnings::{self as warn, Warning};

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Cost {
    /// On-demand price x nodes x job hours (catalog price).
    pub on_demand_usd: Option<f64>,
    /// Upfront fee of the chosen Capacity Blocks.
    pub capacity_block_usd: Option<f64>,
    /// What this plan is expected to cost.
    pub estimate_usd: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Alternative {
    pub instance_type: String,
    pub nodes: u32,
    pub total_gpus: u32,
    pub on_demand_usd: Option<f64>,
    /// Its bandwidth class (`bandwidth.rs`), e.g. `pcie+efa-rdma`.
    pub class: String,
    /// It keeps the recommended layout: the same interconnect inside and between nodes,
    /// over no more nodes.
    pub same_layout: bool,
    /// When it does not: the slower layout and what it costs in all-reduce bandwidth.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slower: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Recommendation {
    pub request: Request,
    pub instance: InstanceProfile,
    /// The job's container image: the request's, else the accelerator's default.
    pub image: String,
    pub shape: Shape,
    pub pods: u32,
    pub processes_per_pod: u32,
    pub availability_zone: String,
    pub capacity: CapacityPlan,
    /// Cluster placement group to create, when one is needed.
    pub placement_group: Option<String>,
    pub cost: Cost,
    pub bandwidth: Bandwidth,
    pub reasons: Vec<String>,
    pub warnings: Vec<Warning>,
    pub alternatives: Vec<Alternative>,
    /// The chosen capacity and what else could be bought, with cost.
    pub capacity_options: Vec<CapacityOption>,
    /// Offerings of the chosen type in the region that the plan does not buy, by
    /// start (at most 20), so people can weigh price against start.
    pub other_offerings: Vec<ListedOffering>,
    /// Pods claim EFA through the EFA DRA driver: asked for, or the cluster's nodes of
    /// the type advertise no `vpc.amazonaws.com/efa`.
    pub efa_dra: bool,
}

/// The plan for `req`: the best-ranked instance type and shape, its capacity and zone,
/// cost, the alternatives, and every reason and warning behind them.
pub fn recommend(
    req: &Request,
    catalog: &Catalog,
    facts: &Facts,
) -> Result<Recommendation, InputError> {
    let offered: Option<Vec<String>> = facts
        .instance_types
        .as_ref()
        .map(|t| t.iter().map(|t| t.name.clone()).collect());
    let mut ranked = candidates(req, catalog, offered.as_deref())?;
    let Candidate { profile, shape } = ranked.remove(0);
    let mut reasons = vec![why_this_type(profile)];
    let mut warnings = shape_warnings(req, profile, &shape, facts);
    let (capacity, block_zone) = match existing_capacity(req, &profile.name, shape.nodes, facts) {
        Some((plan, zone)) => {
            reasons.push(format!(
                "nothing to buy: the cluster already has {} {} node(s) in {zone}; make sure they are free for this job",
                shape.nodes, profile.name
            ));
            (plan, Some(zone))
        }
        None => capacity_plan(req, profile, &shape, facts, &mut reasons, &mut warnings),
    };
    let zone = block_zone
        .unwrap_or_else(|| pick_zone(req, &profile.name, facts, &mut reasons, &mut warnings));
    let placement_group = (shape.nodes > 1 && matches!(capacity, CapacityPlan::OnDemand))
        .then(|| format!("{}-{}", req.names.cluster, slug(&profile.name)));
    reasons.extend(co_location(
        &capacity,
        placement_group.as_deref(),
        shape.nodes,
    ));
    if shape.nodes > 1 {
        warnings.push(warn::efa_one_az(&zone));
        warnings.extend(warn::p4d_efa(profile));
        if profile.rdma == trainplace_engine::Rdma::None {
            warnings.push(warn::no_rdma(profile));
        }
    }
    let cost = cost(profile, &shape, req.job_hours, &capacity);
    warnings.extend(cost_warning(&cost, &profile.name));
    let capacity_options =
        capacity_options(req, profile, &shape, facts, &capacity, cost.on_demand_usd);
    within_budget(req.budget_usd, &cost, &capacity_options)?;
    let other_offerings = other_offerings(
        req,
        &profile.name,
        shape.nodes,
        facts,
        &capacity,
        cost.on_demand_usd,
    );
    let efa_dra = efa_through_dra(req, profile, facts);
    let bw = bandwidth(profile, shape.nodes);
    let alternatives = alternatives(&ranked, req.job_hours, &bw, shape.nodes);
    if efa_dra {
        reasons.push(format!(
            "EFA through the EFA DRA driver: pods claim all {} interfaces with a ResourceClaimTemplate (device class {}, allocationMode All) instead of vpc.amazonaws.com/efa (https://docs.aws.amazon.com/eks/latest/userguide/device-management-efa.html)",
            profile.max_efa,
            trainplace_engine::annotations::DRA_CLASS_EFA
        ));
    }
    Ok(Recommendation {
        efa_dra,
        capacity_options,
        other_offerings,
        request: req.clone(),
        image: req
            .image
            .clone()
            .unwrap_or_else(|| crate::images::default_image(profile, &req.region)),
        pods: shape.nodes,
        processes_per_pod: crate::shape::processes_per_node(profile),
        bandwidth: bw.clone(),
        instance: profile.clone(),
        shape,
        availability_zone: zone,
        capacity,
        placement_group,
        cost,
        reasons,
        alternatives,
        warnings,
    })
}

/// The first reason: what the chosen type is and the layout it gets.
fn why_this_type(profile: &InstanceProfile) -> String {
    format!(
        "{}: {} x {} ({} GiB each), {}, {} EFA; one pod per node with all {} accelerators",
        profile.name,
        profile.accelerators,
        profile.accelerator,
        profile
            .accelerator_memory_gi_b
            .map_or("?".into(), |g| g.to_string()),
        profile.intra_node,
        profile.max_efa,
        profile.accelerators
    )
}

/// Warnings about the request as planned: a start moved to now, GPUs rounded up to
/// whole nodes, the catalog disagreeing with the account's instance types.
fn shape_warnings(
    req: &Request,
    profile: &InstanceProfile,
    shape: &Shape,
    facts: &Facts,
) -> Vec<Warning> {
    let mut warnings = Vec::new();
    if let Some(from) = req.start_moved_from {
        warnings.push(warn::start_moved(from, req.now));
    }
    if let (true, Some(g)) = (shape.rounded_up, shape.requested_gpus) {
        warnings.push(warn::rounded_up(
            g,
            shape.total_gpus,
            shape.gpus_per_node,
            &profile.name,
        ));
    }
    for t in facts
        .instance_types
        .iter()
        .flatten()
        .filter(|t| t.name == profile.name)
    {
        warnings.extend(
            disagreements(t, profile)
                .iter()
                .map(|d| warn::catalog_mismatch(d)),
        );
    }
    warnings
}

/// How the nodes end up close together (for EFA), when there is something to say.
fn co_location(
    capacity: &CapacityPlan,
    placement_group: Option<&str>,
    nodes: u32,
) -> Option<String> {
    match (capacity, placement_group) {
        (CapacityPlan::CapacityBlock { .. }, _) => Some(
            "no placement group: Capacity Blocks are already co-located in an UltraCluster".into(),
        ),
        (_, Some(pg)) => Some(format!(
            "cluster placement group {pg} keeps the nodes close for EFA"
        )),
        (CapacityPlan::Odcr { .. }, None) if nodes > 1 => Some(
            "ODCR capacity sits wherever it was reserved: create it in a cluster placement group for co-location".into(),
        ),
        _ => None,
    }
}

/// A cost nobody can tell yet.
fn cost_warning(cost: &Cost, instance: &str) -> Option<Warning> {
    // A Capacity Block not yet chosen has its price once offerings are given.
    (cost.estimate_usd.is_none() && cost.on_demand_usd.is_none())
        .then(|| warn::unknown_cost(instance))
}

/// A budget is a constraint: a plan that costs more is refused, saying what it costs and
/// which listed capacity (if any) would fit the budget. A cost not known yet (no price,
/// or blocks not yet listed) cannot be judged and is let through.
fn within_budget(
    budget: Option<f64>,
    cost: &Cost,
    options: &[CapacityOption],
) -> Result<(), InputError> {
    let (Some(budget), Some(estimate)) = (budget, cost.estimate_usd) else {
        return Ok(());
    };
    if estimate <= budget {
        return Ok(());
    }
    let fits: Vec<String> = options
        .iter()
        .filter(|o| !o.chosen && o.usd.is_some_and(|u| u <= budget))
        .map(|o| format!("{} (${:.2})", o.label, o.usd.unwrap_or_default()))
        .collect();
    let instead = if fits.is_empty() {
        "no listed capacity fits it: raise the budget, or ask for fewer GPUs or hours".to_string()
    } else {
        format!("within it: {}", fits.join("; "))
    };
    let chosen = options
        .iter()
        .find(|o| o.chosen)
        .map_or("the plan".to_string(), |o| o.label.clone());
    Err(InputError::request(
        "budgetUsd",
        format!("{chosen} costs ${estimate:.2}, over the budget of ${budget:.2}; {instead}"),
    ))
}

/// The next three candidates, with what they would cost on demand; those in the
/// recommended layout first, the others marked as the slower layout with the
/// all-reduce bandwidth they would give (the engine's expected-busbw table: measured,
/// or trainplace's estimate, as its source says) against the recommendation's.
fn alternatives(
    ranked: &[Candidate<'_>],
    job_hours: u32,
    chosen: &Bandwidth,
    chosen_nodes: u32,
) -> Vec<Alternative> {
    let mut out: Vec<Alternative> = ranked
        .iter()
        .take(3)
        .map(|c| {
            let bw = bandwidth(c.profile, c.shape.nodes);
            let same_layout = bw.class == chosen.class && c.shape.nodes <= chosen_nodes;
            Alternative {
                instance_type: c.profile.name.clone(),
                nodes: c.shape.nodes,
                total_gpus: c.shape.total_gpus,
                on_demand_usd: on_demand(c.profile, c.shape.nodes, job_hours),
                slower: (!same_layout).then(|| slower_words(c, &bw, chosen, chosen_nodes)),
                class: bw.class,
                same_layout,
            }
        })
        .collect();
    out.sort_by_key(|a| !a.same_layout);
    out
}

/// Across nodes, an all-reduce's busbw cannot exceed a node's network line rate
/// (GB/s); `None` on one node or an unknown rate.
fn line_rate(c: &Candidate<'_>) -> Option<f64> {
    (c.shape.nodes > 1)
        .then_some(c.profile.network_gbps)
        .flatten()
        .map(|g| f64::from(g) / 8.0)
}

/// "slower layout: ..." with the busbw each layout is expected to reach.
fn slower_words(c: &Candidate<'_>, bw: &Bandwidth, chosen: &Bandwidth, nodes: u32) -> String {
    let range = |b: &Bandwidth| match (b.busbw_low_gbs, b.busbw_high_gbs) {
        (Some(lo), Some(hi)) => Some((lo, hi)),
        _ => None,
    };
    let cost = match (range(bw), range(chosen)) {
        (Some((lo, hi)), Some((clo, chi))) => format!(
            "all-reduce busbw {lo}..{hi} GB/s against {clo}..{chi} GB/s, about {:.1}x the time per all-reduce ({})",
            (clo + chi) / (lo + hi),
            bw.busbw_source.as_deref().unwrap_or("expected-busbw table")
        ),
        (None, Some((clo, chi))) => match line_rate(c) {
            Some(max) => format!(
                "no measured busbw for this layout, but at most the node's network line rate, {max} GB/s, against {clo}..{chi} GB/s, at least {:.1}x the time per all-reduce",
                (clo + chi) / 2.0 / max
            ),
            None => format!(
                "no measured busbw for this layout; the recommended one reaches {clo}..{chi} GB/s"
            ),
        },
        _ => "no measured busbw for either layout".to_string(),
    };
    format!(
        "slower layout: {} over {} node(s) of {} accelerator(s) instead of {} over {nodes}; {cost}",
        bw.class, c.shape.nodes, c.shape.gpus_per_node, chosen.class
    )
}

/// EFA through the EFA DRA driver: asked for, or the cluster's nodes of an EFA type
/// advertise no `vpc.amazonaws.com/efa`.
fn efa_through_dra(req: &Request, profile: &InstanceProfile, facts: &Facts) -> bool {
    let have: Vec<_> = facts
        .nodes
        .iter()
        .flatten()
        .filter(|n| n.instance_type.as_deref() == Some(profile.name.as_str()))
        .collect();
    profile.max_efa > 0 && (req.efa_dra || (!have.is_empty() && have.iter().all(|n| n.efa == 0)))
}

fn capacity_plan(
    req: &Request,
    p: &InstanceProfile,
    shape: &Shape,
    facts: &Facts,
    reasons: &mut Vec<String>,
    warnings: &mut Vec<Warning>,
) -> (CapacityPlan, Option<String>) {
    match req.capacity {
        CapacityPref::OnDemand => return (CapacityPlan::OnDemand, None),
        CapacityPref::Odcr => {
            let id = req.reservation_id.clone().unwrap_or_default();
            reasons.push(format!("targets the On-Demand Capacity Reservation {id}"));
            return (CapacityPlan::Odcr { reservation_id: id }, None);
        }
        CapacityPref::CapacityBlock | CapacityPref::Auto => {}
    }
    let Some(block_hours) = block_hours_if_sold(req, p, shape, reasons, warnings) else {
        return (CapacityPlan::OnDemand, None);
    };
    let need = BlockNeed::of_request(&p.name, req, shape.nodes, 0);
    // A block the account already holds comes before buying one.
    if let Some(held) = &facts.reservations {
        match choose_held(held, &need) {
            Ok(plan) => {
                reasons.push(format!(
                    "nothing to buy: the account already holds Capacity Block(s) {} in {} ({} instances, usable from {} to {})",
                    block_ids(&plan),
                    plan.availability_zone,
                    plan.instances,
                    plan.start,
                    plan.checkpoint_by
                ));
                warnings.push(warn::block_end(plan.end, req.job_hours, plan.usable_hours));
                return on_blocks(block_hours, plan);
            }
            Err(why) => reasons.push(format!("{why}: buying one")),
        }
    }
    warnings.extend(too_far_ahead(req));
    let Some(offers) = &facts.offerings else {
        reasons.push(format!(
            "Capacity Block of {block_hours} h x {} instances: list the offerings (aws-cli.sh), then rerun with --offerings to pick one",
            shape.nodes
        ));
        return (
            CapacityPlan::CapacityBlock {
                block_hours,
                blocks: None,
            },
            None,
        );
    };
    match choose_blocks(offers, &need) {
        BlockChoice::Fit(plan) => {
            let on_demand_usd = on_demand(p, shape.nodes, req.job_hours);
            let what = format!(
                "{} in {} ({} instances of {}, {} to {}, ${:.2})",
                block_ids(&plan),
                plan.availability_zone,
                plan.instances,
                block_lengths(&plan),
                plan.start,
                plan.end,
                plan.total_fee_usd
            );
            if let Some(od) = on_demand_usd
                && req.capacity == CapacityPref::Auto
                && plan.total_fee_usd > od
            {
                reasons.push(format!(
                    "on-demand, the cheaper: {} x {} for the job's {} h cost ${od:.2}; the cheapest Capacity Block plan that fits, {what}, costs ${:.2} more",
                    shape.nodes,
                    p.name,
                    req.job_hours,
                    plan.total_fee_usd - od
                ));
                warnings.push(warn::on_demand_risk(
                    shape.nodes,
                    &p.name,
                    plan.total_fee_usd - od,
                ));
                return (CapacityPlan::OnDemand, None);
            }
            reasons.push(format!("cheapest Capacity Block plan that fits: {what}"));
            if let Some(od) = on_demand_usd {
                reasons.push(if plan.total_fee_usd <= od {
                    format!(
                        "the block fee ${:.2} is ${:.2} less than on-demand for the job's {} node(s) x {} h (${od:.2}), and the nodes are reserved",
                        plan.total_fee_usd,
                        od - plan.total_fee_usd,
                        shape.nodes,
                        req.job_hours
                    )
                } else {
                    format!(
                        "the block fee ${:.2} is ${:.2} more than on-demand for the job's {} node(s) x {} h (${od:.2}): paid for reserved nodes, as asked (--capacity capacity-block)",
                        plan.total_fee_usd,
                        plan.total_fee_usd - od,
                        shape.nodes,
                        req.job_hours
                    )
                });
            }
            warnings.push(warn::block_end(plan.end, req.job_hours, plan.usable_hours));
            on_blocks(block_hours, plan)
        }
        BlockChoice::NoFit(why) => {
            if why.iter().any(|r| r.contains("shorter than the job")) {
                warnings.push(warn::job_longer_than_block(
                    req.job_hours,
                    "every offered block",
                ));
            }
            warnings.push(warn::no_block_fits(&why));
            (CapacityPlan::OnDemand, None)
        }
    }
}

/// The Capacity Block length for this job when the type is sold as blocks and the job
/// and shape fit them; `None` (said why) means on-demand.
fn block_hours_if_sold(
    req: &Request,
    p: &InstanceProfile,
    shape: &Shape,
    reasons: &mut Vec<String>,
    warnings: &mut Vec<Warning>,
) -> Option<u32> {
    if p.capacity_blocks != Some(true) {
        if req.capacity == CapacityPref::CapacityBlock {
            warnings.push(warn::no_capacity_blocks(p));
        } else {
            reasons.push(format!(
                "on-demand: {} is not sold as Capacity Blocks",
                p.name
            ));
        }
        return None;
    }
    let Some(block_hours) = block_hours_for(req.job_hours) else {
        warnings.push(warn::job_longer_than_block(
            req.job_hours,
            "the longest Capacity Block (182 days)",
        ));
        return None;
    };
    if block_sizes(shape.nodes).is_none() {
        warnings.push(warn::too_many_for_blocks(shape.nodes));
        return None;
    }
    Some(block_hours)
}

/// A start later than Capacity Blocks can be bought for today: when they can be.
fn too_far_ahead(req: &Request) -> Option<Warning> {
    let start = req.earliest_start?;
    let latest = crate::capacity::latest_buyable_start(req.now);
    (start > latest).then(|| warn::block_too_far_ahead(start, start - (latest - req.now)))
}

/// The plan of `blocks`, in their zone.
fn on_blocks(block_hours: u32, blocks: BlockPlan) -> (CapacityPlan, Option<String>) {
    let zone = blocks.availability_zone.clone();
    (
        CapacityPlan::CapacityBlock {
            block_hours,
            blocks: Some(blocks),
        },
        Some(zone),
    )
}

fn block_ids(plan: &BlockPlan) -> String {
    let ids: Vec<&str> = plan.offerings.iter().map(|o| o.id.as_str()).collect();
    ids.join(" + ")
}

pub(crate) fn on_demand(p: &InstanceProfile, nodes: u32, hours: u32) -> Option<f64> {
    p.price_per_hour_usd
        .map(|usd| round2(usd * f64::from(nodes) * f64::from(hours)))
}

fn cost(p: &InstanceProfile, shape: &Shape, hours: u32, plan: &CapacityPlan) -> Cost {
    let on_demand_usd = on_demand(p, shape.nodes, hours);
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
    Cost {
        on_demand_usd,
        capacity_block_usd,
        estimate_usd,
    }
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// `p5.48xlarge` -> `p5-48xlarge`, for resource names.
pub fn slug(instance: &str) -> String {
    instance.replace('.', "-")
}
