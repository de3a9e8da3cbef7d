//! Expected all-reduce bandwidth class: NVLink (or PCIe / NeuronLink) inside a node,
//! EFA between nodes, and the nccl-tests busbw range `trainplace diagnose` judges by
//! (the engine's expected-bandwidth table, so the advisor and the check afterwards agree).

use serde::Serialize;
use trainplace_catalog::bandwidth::Expectations;
use trainplace_catalog::{InstanceProfile, Rdma};

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Bandwidth {
    /// e.g. `nvlink`, `nvlink+efa-rdma`, `pcie+efa`.
    pub class: String,
    pub intra_node: String,
    pub inter_node: Option<String>,
    /// EFA line rate per node, GB/s (network Gbps / 8).
    pub efa_line_rate_gbs: Option<f64>,
    /// nccl-tests all_reduce_perf peak busbw range, GB/s, when the table has a row.
    pub busbw_low_gbs: Option<f64>,
    pub busbw_high_gbs: Option<f64>,
    /// Where that range comes from (measured or a trainplace estimate, and its formula).
    pub busbw_source: Option<String>,
}

pub fn bandwidth(p: &InstanceProfile, nodes: u32) -> Bandwidth {
    let intra = if p.nvlink {
        "nvlink"
    } else if p.intra_node.starts_with("NeuronLink") {
        "neuronlink"
    } else {
        "pcie"
    };
    let table = Expectations::embedded();
    let expect = table.lookup(&p.name, nodes, Some(p.accelerators));
    let mut b = Bandwidth {
        class: intra.to_string(),
        intra_node: p.intra_node.clone(),
        inter_node: None,
        efa_line_rate_gbs: None,
        busbw_low_gbs: expect.map(|e| e.low),
        busbw_high_gbs: expect.map(|e| e.high),
        busbw_source: expect.map(|e| e.cited()),
    };
    if nodes > 1 && p.max_efa == 0 {
        // No EFA: NCCL crosses nodes over TCP sockets on the ENA interface.
        b.class = format!("{intra}+tcp");
        b.inter_node = Some(format!(
            "no EFA: TCP over ENA, {} Gbps",
            p.network_gbps.map_or("unknown".into(), |g| g.to_string())
        ));
    } else if nodes > 1 {
        let rdma = match p.rdma {
            Rdma::ReadWrite | Rdma::Read => "efa-rdma",
            Rdma::None => "efa",
        };
        b.class = format!("{intra}+{rdma}");
        b.inter_node = Some(format!(
            "EFA x{} per node, {} Gbps",
            p.max_efa,
            p.network_gbps.map_or("unknown".into(), |g| g.to_string())
        ));
        b.efa_line_rate_gbs = p.network_gbps.map(|g| f64::from(g) / 8.0);
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use trainplace_catalog::Catalog;

    #[test]
    fn classes_and_expected_busbw() {
        let c = Catalog::embedded();
        let p5 = bandwidth(c.get("p5.48xlarge").unwrap(), 8);
        assert_eq!(p5.class, "nvlink+efa-rdma");
        assert_eq!(p5.efa_line_rate_gbs, Some(400.0));
        assert_eq!(
            (p5.busbw_low_gbs, p5.busbw_high_gbs),
            (Some(200.0), Some(360.0))
        );
        assert_eq!(
            bandwidth(c.get("g5.48xlarge").unwrap(), 2).class,
            "pcie+efa"
        );
        let one = bandwidth(c.get("p5.48xlarge").unwrap(), 1);
        assert_eq!(
            (one.class.as_str(), one.busbw_low_gbs),
            ("nvlink", Some(333.0))
        );
    }
}
