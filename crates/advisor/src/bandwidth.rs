//! Expected all-reduce bandwidth class: NVLink (or PCIe / NeuronLink) inside a node,
//! EFA between nodes.

use serde::Serialize;
use trainplace_engine::{InstanceProfile, catalog::Rdma};

/// Fraction of the EFA line rate below which a multi-node nccl-tests busbw points at a
/// setup fault (placement group or EFA self-referencing security-group rule missing).
/// [tp-default]: a threshold, not a measurement; the catalog has no measured busbw.
pub const BUSBW_FLOOR_FRACTION: f64 = 0.6;

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Bandwidth {
    /// e.g. `nvlink`, `nvlink+efa-rdma`, `pcie+efa`.
    pub class: String,
    pub intra_node: String,
    pub inter_node: Option<String>,
    /// EFA line rate per node, GB/s (network Gbps / 8).
    pub efa_line_rate_gbs: Option<f64>,
    /// nccl-tests all_reduce_perf busbw at large sizes should reach at least this.
    pub busbw_floor_gbs: Option<f64>,
    pub note: String,
}

pub fn bandwidth(p: &InstanceProfile, nodes: u32) -> Bandwidth {
    let intra = if p.nvlink {
        "nvlink"
    } else if p.intra_node.starts_with("NeuronLink") {
        "neuronlink"
    } else {
        "pcie"
    };
    if nodes <= 1 {
        return Bandwidth {
            class: intra.to_string(),
            intra_node: p.intra_node.clone(),
            inter_node: None,
            efa_line_rate_gbs: None,
            busbw_floor_gbs: None,
            note: "one node: all-reduce stays inside the node (DESIGN.md measured 338.6 GB/s busbw on 4 x H200 over NVLink in one pod)".into(),
        };
    }
    let rdma = match p.rdma {
        Rdma::ReadWrite | Rdma::Read => "efa-rdma",
        Rdma::None => "efa",
    };
    let line = p.network_gbps.map(|g| f64::from(g) / 8.0);
    Bandwidth {
        class: format!("{intra}+{rdma}"),
        intra_node: p.intra_node.clone(),
        inter_node: Some(format!(
            "EFA x{} per node, {} Gbps",
            p.max_efa,
            p.network_gbps.map_or("unknown".into(), |g| g.to_string())
        )),
        efa_line_rate_gbs: line,
        busbw_floor_gbs: line.map(|l| (l * BUSBW_FLOOR_FRACTION * 10.0).round() / 10.0),
        note: "between nodes the ring runs at EFA speed; lower busbw than the floor usually means no placement group or a missing EFA self-referencing security-group rule".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use trainplace_engine::Catalog;

    #[test]
    fn classes() {
        let c = Catalog::embedded();
        let p5 = bandwidth(c.get("p5.48xlarge").unwrap(), 8);
        assert_eq!(p5.class, "nvlink+efa-rdma");
        assert_eq!(p5.efa_line_rate_gbs, Some(400.0));
        assert_eq!(p5.busbw_floor_gbs, Some(240.0));
        assert_eq!(
            bandwidth(c.get("g5.48xlarge").unwrap(), 2).class,
            "pcie+efa"
        );
        assert_eq!(bandwidth(c.get("p5.48xlarge").unwrap(), 1).class, "nvlink");
    }
}
