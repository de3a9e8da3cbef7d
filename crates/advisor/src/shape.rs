//! Instance choice and node count: the recommended layout is one pod per node holding
//! every accelerator, so the job is `nodes x accelerators` and the question is which
//! instance type makes that shape best.

use std::cmp::Reverse;

use serde::Serialize;
use trainplace_catalog::{Catalog, InstanceProfile};
use trainplace_engine::annotations::RES_NVIDIA_GPU;

use crate::error::InputError;
use crate::request::{CapacityPref, Demand, Request};

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Shape {
    pub instance_type: String,
    pub nodes: u32,
    pub gpus_per_node: u32,
    pub efa_per_node: u32,
    pub total_gpus: u32,
    /// What the request asked for, when it asked in GPUs.
    pub requested_gpus: Option<u32>,
    /// True when the request was not a multiple of the node size and was rounded up.
    pub rounded_up: bool,
}

#[derive(Debug, Clone)]
pub struct Candidate<'c> {
    pub profile: &'c InstanceProfile,
    pub shape: Shape,
}

/// Trainium needs the Neuron stack, not CUDA/NCCL; GB200 is arm64 and needs a
/// ComputeDomain for its NVLink domain: each only chosen when asked for.
const OPT_IN_FAMILIES: &[&str] = &["trainium", "gb200"];

/// Candidates best first. `offered` (from `describe-instance-types`) limits the choice
/// to types the region sells.
pub fn candidates<'c>(
    req: &Request,
    catalog: &'c Catalog,
    offered: Option<&[String]>,
) -> Result<Vec<Candidate<'c>>, InputError> {
    let mut out: Vec<Candidate<'c>> = catalog
        .instances()
        .filter(|p| match (&req.instance_type, &req.family) {
            (Some(name), _) => &p.name == name,
            (None, Some(f)) => &p.family == f,
            (None, None) => !OPT_IN_FAMILIES.contains(&p.family.as_str()),
        })
        .filter(|p| offered.is_none_or(|names| names.contains(&p.name)))
        .map(|p| Candidate {
            profile: p,
            shape: shape_for(p, req.demand),
        })
        .collect();
    if out.is_empty() {
        let what = req
            .instance_type
            .clone()
            .or_else(|| req.family.clone())
            .unwrap_or_else(|| "any".into());
        let field = if req.instance_type.is_some() {
            "instanceType"
        } else {
            "family"
        };
        return Err(InputError::request(
            field,
            format!("no instance type for {what:?} is offered in the given instance types"),
        ));
    }
    let want_blocks = req.capacity == CapacityPref::CapacityBlock;
    out.sort_by_key(|c| {
        let p = c.profile;
        // On one node nothing crosses the network: a type that holds exactly the ask
        // on one node wins, NVLink still counts inside the node, then the node's price.
        // Across nodes NVLink and the fabric come first: 60 H100 go to 8 x 8 (rounded
        // up), not to 60 single-GPU nodes.
        let single = c.shape.nodes == 1;
        let per = if single { 1 } else { p.accelerators };
        (
            Reverse(single && !c.shape.rounded_up),
            Reverse(want_blocks && p.capacity_blocks == Some(true)),
            Reverse(p.nvlink),
            Reverse(!c.shape.rounded_up),
            Reverse(if single {
                0
            } else {
                p.network_gbps.unwrap_or(0) * 1000 / p.accelerators
            }),
            // Fewer, bigger nodes keep more of the all-reduce inside a node.
            c.shape.nodes,
            // Unknown prices sort last; cents per node-hour on one node, per
            // accelerator-hour across nodes.
            p.price_per_hour_usd.map_or(u64::MAX, |usd| {
                (usd * 100.0 / f64::from(per)).round() as u64
            }),
            p.name.clone(),
        )
    });
    Ok(out)
}

/// Worker processes per node: one per GPU; on Trainium one per logical NeuronCore.
/// trn1: 16 Trainium chips x 2 NeuronCore-v2 = 32
/// (<https://awsdocs-neuron.readthedocs-hosted.com/en/latest/about-neuron/arch/neuron-hardware/trn1-arch.html>);
/// trn2: 16 Trainium2 chips x 8 physical cores, grouped 2 per logical core by the
/// default logical NeuronCore config (LNC=2) = 64
/// (<https://awsdocs-neuron.readthedocs-hosted.com/en/latest/about-neuron/arch/neuron-hardware/trn2-arch.html>).
pub fn processes_per_node(p: &InstanceProfile) -> u32 {
    match p.name.as_str() {
        "trn1.32xlarge" | "trn1n.32xlarge" => 32,
        "trn2.48xlarge" | "trn2u.48xlarge" => 64,
        _ => p.accelerators,
    }
}

/// What the accelerators are called in text: GPUs, or accelerators for Neuron.
pub fn accelerator_word(p: &InstanceProfile) -> &'static str {
    if p.accelerator_resource == RES_NVIDIA_GPU {
        "GPUs"
    } else {
        "accelerators"
    }
}

pub fn shape_for(p: &InstanceProfile, demand: Demand) -> Shape {
    let per = p.accelerators;
    let (nodes, requested) = match demand {
        Demand::Gpus(g) => (g.div_ceil(per), Some(g)),
        Demand::Nodes(n) => (n, None),
    };
    Shape {
        instance_type: p.name.clone(),
        nodes,
        gpus_per_node: per,
        efa_per_node: p.max_efa,
        total_gpus: nodes * per,
        requested_gpus: requested,
        rounded_up: requested.is_some_and(|g| g % per != 0),
    }
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;
    use crate::request::AdviceRequest;

    fn pick(gpus: i64, family: Option<&str>, capacity: Option<&str>) -> Shape {
        let catalog = Catalog::embedded();
        let req = AdviceRequest {
            gpus: Some(gpus),
            family: family.map(Into::into),
            capacity: capacity.map(Into::into),
            duration_days: Some(1.0),
            ..Default::default()
        }
        .validate(&catalog, jiff::Timestamp::now())
        .unwrap();
        candidates(&req, &catalog, None).unwrap().remove(0).shape
    }

    #[rstest]
    #[case::h100(64, Some("h100"), None, "p5.48xlarge", 8, false)]
    #[case::any_prefers_nvlink_and_bandwidth(16, None, None, "p6-b300.48xlarge", 2, false)]
    #[case::one_gpu_any_is_the_cheapest_one_gpu_type(1, None, None, "g6.xlarge", 1, false)]
    #[case::h200_known_price_first(16, Some("h200"), None, "p5en.48xlarge", 2, false)]
    #[case::l40s_big_nodes(16, Some("l40s"), None, "g6e.48xlarge", 2, false)]
    #[case::l40s_exact_fit_beats_rounding(12, Some("l40s"), None, "g6e.24xlarge", 3, false)]
    #[case::a10g_four(4, Some("a10g"), None, "g5.12xlarge", 1, false)]
    #[case::rounded_up(60, Some("h100"), None, "p5.48xlarge", 8, true)]
    #[case::a100_blocks_wanted(16, Some("a100"), Some("capacity-block"), "p4d.24xlarge", 2, false)]
    #[case::trainium_bandwidth_first(32, Some("trainium"), None, "trn2.48xlarge", 2, false)]
    #[case::one_node_l40s_is_the_cheapest_that_holds_them(
        4,
        Some("l40s"),
        None,
        "g6e.12xlarge",
        1,
        false
    )]
    #[case::one_l40s_gets_a_one_gpu_type(1, Some("l40s"), None, "g6e.xlarge", 1, false)]
    #[case::one_h100_gets_p5_4xlarge(1, Some("h100"), None, "p5.4xlarge", 1, false)]
    #[case::eight_h100_one_node_not_eight_small(8, Some("h100"), None, "p5.48xlarge", 1, false)]
    #[case::b300_family(16, Some("b300"), None, "p6-b300.48xlarge", 2, false)]
    fn chooses(
        #[case] gpus: i64,
        #[case] family: Option<&str>,
        #[case] capacity: Option<&str>,
        #[case] instance: &str,
        #[case] nodes: u32,
        #[case] rounded: bool,
    ) {
        let s = pick(gpus, family, capacity);
        assert_eq!(
            (s.instance_type.as_str(), s.nodes, s.rounded_up),
            (instance, nodes, rounded)
        );
    }

    #[test]
    fn offered_list_limits_choice() {
        let catalog = Catalog::embedded();
        let req = AdviceRequest {
            gpus: Some(8),
            family: Some("h200".into()),
            duration_days: Some(1.0),
            ..Default::default()
        }
        .validate(&catalog, jiff::Timestamp::now())
        .unwrap();
        let offered = vec!["p5.48xlarge".to_string()];
        let err = candidates(&req, &catalog, Some(&offered)).unwrap_err();
        assert_eq!(err.field, "family");
    }
}
