//! The planner: a validated request plus optional AWS / cluster data in, a
//! recommendation with reasons and warnings out. Pure: no I/O.

mod alternatives;
mod capacity;
mod cost;
pub mod route;

use serde::Serialize;
use trainplace_catalog::{Catalog, InstanceProfile};

pub use self::alternatives::Alternative;
use self::alternatives::alternatives;
use self::capacity::capacity_plan;
pub use self::cost::Cost;
use self::cost::cost;
use crate::aws::instance_types::disagreements;
use crate::bandwidth::{Bandwidth, bandwidth};
pub use crate::capacity::block_lengths;
use crate::error::InputError;
use crate::options::{CapacityOption, capacity_options};
pub use crate::placement::ListedOffering;
use crate::placement::{existing_capacity, other_offerings, pick_zone};
pub use crate::plan::{CapacityPlan, Facts};
use crate::request::Request;
use crate::shape::{Candidate, Shape, candidates};
use crate::warnings::{self as warn, Warning};

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
    /// How far apart the nodes are in the EC2 network: what `aws-cli.sh` reads, what to
    /// expect and how to read it; absent for one node.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topology: Option<crate::topology::Topology>,
    /// The route that makes the nodes (`request.route`), what it emits, and how to get
    /// the other one or why there is none (`route::summary`).
    pub route_summary: String,
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
    let (capacity, block_zone) =
        capacity_for(req, profile, &shape, facts, &mut reasons, &mut warnings)?;
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
        warnings.extend(across_nodes(profile, &zone));
    }
    let cost = cost(req, profile, &shape, &capacity);
    warnings.extend(cost_warning(&cost, &profile.name));
    warnings.extend(
        cost.list_prices_region
            .map(|from| warn::list_prices_of_another_region(from, &req.region)),
    );
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
    let topology = crate::topology::topology(&profile.name, &req.region, shape.nodes, &capacity);
    let mut rec = Recommendation {
        route_summary: String::new(),
        efa_dra,
        topology,
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
    };
    // One route per plan: Karpenter asked for where it cannot make the nodes is refused.
    if let Some(why) = route::refusal(&rec) {
        return Err(InputError::request("route", why));
    }
    rec.route_summary = route::summary(&rec);
    Ok(rec)
}

/// The capacity the job runs on, and its zone when the capacity fixes it: the cluster's
/// own nodes of the type when there are enough, else what the request asks to buy or use.
fn capacity_for(
    req: &Request,
    profile: &InstanceProfile,
    shape: &Shape,
    facts: &Facts,
    reasons: &mut Vec<String>,
    warnings: &mut Vec<Warning>,
) -> Result<(CapacityPlan, Option<String>), InputError> {
    match existing_capacity(req, &profile.name, shape.nodes, facts) {
        Some((plan, zone)) => {
            reasons.push(format!(
                "nothing to buy: the cluster already has {} {} node(s) in {zone}; make sure they are free for this job",
                shape.nodes, profile.name
            ));
            Ok((plan, Some(zone)))
        }
        None => capacity_plan(req, profile, shape, facts, reasons, warnings),
    }
}

/// Warnings for a job over more than one node: EFA in one zone, p4d's EFA, no RDMA.
fn across_nodes(profile: &InstanceProfile, zone: &str) -> Vec<Warning> {
    let mut warnings = vec![warn::efa_one_az(zone)];
    warnings.extend(warn::p4d_efa(profile));
    if profile.rdma == trainplace_catalog::Rdma::None {
        warnings.push(warn::no_rdma(profile));
    }
    warnings
}

/// The first reason: what the chosen type is and the layout it gets.
fn why_this_type(profile: &InstanceProfile) -> String {
    format!(
        "{}: {} x {} ({}), {}, {} EFA; one pod per node with all {} accelerators",
        profile.name,
        profile.accelerators,
        profile.accelerator,
        // Said, not guessed: the catalog leaves it null where no source gives it.
        profile.accelerator_memory_gi_b.map_or(
            "GPU memory unknown: the catalog has no sourced figure for this type".into(),
            |g| format!("{g} GiB each")
        ),
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
    // AWS: "Instances that run inside a Capacity Block are automatically placed close
    // together inside Amazon EC2 UltraClusters"
    // (<https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CapacityBlock.html>).
    // It says that of one block, nothing of two: separate blocks are not called close.
    const INSIDE: &str = "no placement group: the instances inside one Capacity Block are placed close together in an EC2 UltraCluster (AWS)";
    match (capacity, placement_group) {
        (
            CapacityPlan::CapacityBlock {
                blocks: Some(plan), ..
            },
            _,
        ) if plan.offerings.len() > 1 => Some(format!(
            "{INSIDE}; the {} blocks are separate: they are not known to be co-located with each other, so traffic between them may cross more of the network (the pods' network-node affinity still prefers the closest nodes there are)",
            plan.offerings.len()
        )),
        (CapacityPlan::CapacityBlock { blocks: Some(_), .. }, _) => Some(INSIDE.into()),
        (CapacityPlan::CapacityBlock { blocks: None, .. }, _) => Some(format!(
            "{INSIDE}; when the job needs more than one block, separate blocks are not known to be co-located with each other"
        )),
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

/// `p5.48xlarge` -> `p5-48xlarge`, for resource names.
pub fn slug(instance: &str) -> String {
    instance.replace('.', "-")
}
