//! The few instance facts the diagnosis judges against, embedded from `data/instances.yaml`.
//! Kept here rather than taken from trainplace-engine so this crate stands alone.

use std::sync::LazyLock;

use serde::Deserialize;

const INSTANCES_YAML: &str = include_str!("../data/instances.yaml");

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IntraNode {
    Nvswitch,
    Pcie,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rdma {
    ReadWrite,
    Read,
    None,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Instance {
    pub name: String,
    pub gpu: String,
    pub gpus: u32,
    pub intra_node: IntraNode,
    #[serde(default)]
    pub nvlink_gbs_per_direction: Option<f64>,
    pub rdma: Rdma,
    pub max_efa: u32,
    pub network_gbps: f64,
    /// aws-ofi-nccl >= 1.16 ships and sets NCCL_TOPO_FILE for this type.
    pub plugin_topo_file: bool,
    pub device_names: Vec<String>,
}

impl Instance {
    pub fn has_nvlink(&self) -> bool {
        self.intra_node == IntraNode::Nvswitch
    }

    pub fn rdma_capable(&self) -> bool {
        self.rdma != Rdma::None
    }

    /// Matches `NVIDIA H100 80GB HBM3` against `H100 80GB HBM3`; `L4` must not match `L40S`.
    pub fn matches_device(&self, device: &str) -> bool {
        let device = device.trim();
        let device = device.strip_prefix("NVIDIA ").unwrap_or(device).trim();
        self.device_names.iter().any(|name| {
            device == name
                || device
                    .strip_prefix(name.as_str())
                    .is_some_and(|rest| rest.starts_with([' ', '-']))
        })
    }
}

#[derive(Debug, Deserialize)]
struct InstancesFile {
    instances: Vec<Instance>,
}

static INSTANCES: LazyLock<Vec<Instance>> = LazyLock::new(|| {
    serde_yaml_ng::from_str::<InstancesFile>(INSTANCES_YAML)
        .map(|file| file.instances)
        // A broken embedded table is a build defect; the unit test below catches it.
        .unwrap_or_default()
});

pub fn all() -> &'static [Instance] {
    &INSTANCES
}

pub fn find(name: &str) -> Option<&'static Instance> {
    let name = name.trim();
    all().iter().find(|instance| instance.name == name)
}

/// Instance types with GPUs named `device` and at least `gpus_per_node` of them; several
/// when the GPU alone does not tell (H200 is in p5e and p5en).
pub fn by_device(device: &str, gpus_per_node: Option<u32>) -> Vec<&'static Instance> {
    all()
        .iter()
        .filter(|instance| instance.matches_device(device))
        .filter(|instance| gpus_per_node.is_none_or(|count| instance.gpus >= count))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_table_loads_and_covers_required_types() {
        for name in [
            "p4d.24xlarge",
            "p4de.24xlarge",
            "p5.48xlarge",
            "p5e.48xlarge",
            "p5en.48xlarge",
            "p6-b200.48xlarge",
            "g5.48xlarge",
            "g6e.48xlarge",
        ] {
            assert!(find(name).is_some(), "{name} missing");
        }
    }

    #[test]
    fn device_names_do_not_overlap() {
        let l4 = find("g6.48xlarge").unwrap();
        assert!(l4.matches_device("NVIDIA L4"));
        assert!(!l4.matches_device("NVIDIA L40S"));
        let names: Vec<_> = by_device("NVIDIA H200", Some(8))
            .iter()
            .map(|i| i.name.as_str())
            .collect();
        assert_eq!(names, ["p5e.48xlarge", "p5en.48xlarge"]);
        let a10g: Vec<_> = by_device("NVIDIA A10G", Some(8))
            .iter()
            .map(|i| i.name.as_str())
            .collect();
        assert_eq!(a10g, ["g5.48xlarge"]);
    }
}
