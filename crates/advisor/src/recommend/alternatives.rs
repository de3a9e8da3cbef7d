//! The other candidates: the recommended layout first, the slower ones with what they
//! cost in all-reduce bandwidth.

use serde::Serialize;

use super::cost::on_demand;
use crate::bandwidth::{Bandwidth, bandwidth};
use crate::shape::Candidate;

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

/// The next three candidates, with what they would cost on demand; those in the
/// recommended layout first, the others marked as the slower layout with the
/// all-reduce bandwidth they would give (the engine's expected-busbw table: measured,
/// or trainplace's estimate, as its source says) against the recommendation's.
pub(super) fn alternatives(
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
