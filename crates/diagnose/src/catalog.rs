//! The instance facts the diagnosis judges against. Base facts (GPU model and count,
//! NVLink/NVSwitch, max EFA, network Gbps, RDMA) come from the project's one instance
//! catalog, `policies/instances.yaml` via [`trainplace_catalog::Catalog::embedded`];
//! the few facts only the diagnosis needs (NVLink bandwidth, whether aws-ofi-nccl ships a
//! topology file, the GPU names nvidia-smi prints) come from `data/diagnosis-facts.yaml`.
//! A type is known here when it is in both.

use std::sync::LazyLock;

use serde::Deserialize;
use trainplace_catalog::{Catalog, InstanceProfile, Rdma as CatalogRdma};

const FACTS_YAML: &str = include_str!("../data/diagnosis-facts.yaml");

/// Where the base facts live, for messages.
pub(crate) const CATALOG_PATH: &str = "policies/instances.yaml";
/// Where the diagnosis-only facts live, for messages.
pub(crate) const FACTS_PATH: &str = "crates/diagnose/data/diagnosis-facts.yaml";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum IntraNode {
    Nvswitch,
    Pcie,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Rdma {
    ReadWrite,
    Read,
    None,
}

impl From<CatalogRdma> for Rdma {
    fn from(rdma: CatalogRdma) -> Self {
        match rdma {
            CatalogRdma::None => Self::None,
            CatalogRdma::Read => Self::Read,
            CatalogRdma::ReadWrite => Self::ReadWrite,
        }
    }
}

/// One instance type as the diagnosis sees it: catalog facts joined with diagnosis facts.
#[derive(Debug, Clone)]
pub(crate) struct Instance {
    pub name: String,
    /// The catalog's `accelerator` (`A100`, `H100`, ...).
    pub gpu: String,
    /// The catalog's `accelerators`.
    pub gpus: u32,
    /// From the catalog's `nvlink`.
    pub intra_node: IntraNode,
    pub rdma: Rdma,
    /// Joined from the catalog for completeness; no rule reads it yet (the join test does).
    #[cfg_attr(not(test), allow(dead_code))]
    pub max_efa: u32,
    /// `None` when the catalog does not know it. No rule reads it yet (the join test does).
    #[cfg_attr(not(test), allow(dead_code))]
    pub network_gbps: Option<u32>,
    /// aws-ofi-nccl >= 1.16 ships and sets NCCL_TOPO_FILE for this type.
    pub plugin_topo_file: bool,
    pub device_names: Vec<String>,
}

impl Instance {
    fn join(profile: &InstanceProfile, facts: &Facts) -> Self {
        Self {
            name: profile.name.clone(),
            gpu: profile.accelerator.clone(),
            gpus: profile.accelerators,
            intra_node: if profile.nvlink {
                IntraNode::Nvswitch
            } else {
                IntraNode::Pcie
            },
            rdma: profile.rdma.into(),
            max_efa: profile.max_efa,
            network_gbps: profile.network_gbps,
            plugin_topo_file: facts.plugin_topo_file,
            device_names: facts.device_names.clone(),
        }
    }

    pub(crate) fn has_nvlink(&self) -> bool {
        self.intra_node == IntraNode::Nvswitch
    }

    pub(crate) fn rdma_capable(&self) -> bool {
        self.rdma != Rdma::None
    }

    /// Matches `NVIDIA H100 80GB HBM3` against `H100 80GB HBM3`; `L4` must not match `L40S`.
    pub(crate) fn matches_device(&self, device: &str) -> bool {
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

/// One entry of `data/diagnosis-facts.yaml`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Facts {
    /// Checked against the catalog's `nvlink` by the unit tests; no rule reads it yet.
    #[serde(default)]
    #[cfg_attr(not(test), allow(dead_code))]
    nvlink_gbs_per_direction: Option<f64>,
    plugin_topo_file: bool,
    device_names: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FactsFile {
    #[allow(dead_code)]
    source: String,
    /// Kept as a mapping so file order decides the order of [`by_device`] candidates.
    instances: serde_yaml_ng::Mapping,
    #[serde(default)]
    not_supported: serde_yaml_ng::Mapping,
}

#[derive(Debug, Default)]
struct FactsTable {
    instances: Vec<(String, Facts)>,
    not_supported: Vec<(String, String)>,
}

fn parse_facts(text: &str) -> Result<FactsTable, String> {
    let file: FactsFile = serde_yaml_ng::from_str(text).map_err(|e| e.to_string())?;
    let key = |key: &serde_yaml_ng::Value| {
        key.as_str()
            .map(str::to_string)
            .ok_or_else(|| format!("instance key {key:?} is not a string"))
    };
    let instances = file
        .instances
        .iter()
        .map(|(name, facts)| {
            let name = key(name)?;
            let facts = serde_yaml_ng::from_value::<Facts>(facts.clone())
                .map_err(|e| format!("{name}: {e}"))?;
            Ok((name, facts))
        })
        .collect::<Result<_, String>>()?;
    let not_supported = file
        .not_supported
        .iter()
        .map(|(name, reason)| {
            let name = key(name)?;
            let reason = reason
                .as_str()
                .ok_or_else(|| format!("not_supported {name}: the reason must be a string"))?;
            Ok((name, reason.to_string()))
        })
        .collect::<Result<_, String>>()?;
    Ok(FactsTable {
        instances,
        not_supported,
    })
}

static CATALOG: LazyLock<Catalog> = LazyLock::new(Catalog::embedded);

static FACTS: LazyLock<FactsTable> = LazyLock::new(|| {
    // A broken embedded table is a build defect; the unit tests below catch it.
    parse_facts(FACTS_YAML).unwrap_or_default()
});

static INSTANCES: LazyLock<Vec<Instance>> = LazyLock::new(|| {
    FACTS
        .instances
        .iter()
        // An entry without a catalog type is a defect the unit tests below catch.
        .filter_map(|(name, facts)| Some(Instance::join(CATALOG.get(name)?, facts)))
        .collect()
});

pub(crate) fn all() -> &'static [Instance] {
    &INSTANCES
}

pub(crate) fn find(name: &str) -> Option<&'static Instance> {
    let name = name.trim();
    all().iter().find(|instance| instance.name == name)
}

/// Instance types with GPUs named `device` and at least `gpus_per_node` of them; several
/// when the GPU alone does not tell (H200 is in p5e and p5en).
pub(crate) fn by_device(device: &str, gpus_per_node: Option<u32>) -> Vec<&'static Instance> {
    all()
        .iter()
        .filter(|instance| instance.matches_device(device))
        .filter(|instance| gpus_per_node.is_none_or(|count| instance.gpus >= count))
        .collect()
}

/// Why `name` is not diagnosed with its facts, and what to do: the message and fix of the
/// `instance-type-unknown` finding.
pub(crate) fn unknown_type(name: &str) -> (String, String) {
    let name = name.trim();
    if let Some((_, reason)) = FACTS.not_supported.iter().find(|(n, _)| n == name) {
        return (
            format!(
                "{name} is not supported by the diagnosis ({reason}); judged without its facts"
            ),
            format!(
                "trainplace diagnose judges NCCL on NVIDIA types; to judge {name} anyway, move \
                 it from not_supported to instances in {FACTS_PATH} with its facts."
            ),
        );
    }
    if CATALOG.get(name).is_some() {
        return (
            format!(
                "{name} is in trainplace's instance catalog but has no diagnosis facts; judged \
                 without its facts"
            ),
            format!(
                "Add {name} to {FACTS_PATH} (nvlink_gbs_per_direction, plugin_topo_file, \
                 device_names)."
            ),
        );
    }
    (
        format!("{name} is not in trainplace's instance table; judged without its facts"),
        format!(
            "Pass one of the types in {FACTS_PATH}, or add the type: its base facts (GPUs, \
             NVLink, EFA, RDMA) to {CATALOG_PATH} and its diagnosis facts to {FACTS_PATH}."
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const NVIDIA: &str = "nvidia.com/gpu";

    fn facts() -> FactsTable {
        parse_facts(FACTS_YAML).expect("data/diagnosis-facts.yaml parses")
    }

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
    fn every_facts_entry_names_a_catalog_type() {
        let table = facts();
        assert!(!table.instances.is_empty());
        let names = table
            .instances
            .iter()
            .map(|(name, _)| name)
            .chain(table.not_supported.iter().map(|(name, _)| name));
        for name in names {
            assert!(
                CATALOG.get(name).is_some(),
                "{name} in {FACTS_PATH} is not in {CATALOG_PATH}"
            );
        }
        assert_eq!(all().len(), table.instances.len());
    }

    #[test]
    fn every_catalog_nvidia_type_has_facts_or_a_reason() {
        let table = facts();
        let has_facts = |name: &str| table.instances.iter().any(|(n, _)| n == name);
        let reason = |name: &str| {
            table
                .not_supported
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, reason)| reason.as_str())
        };
        for profile in CATALOG.instances() {
            let name = profile.name.as_str();
            assert!(
                !(has_facts(name) && reason(name).is_some()),
                "{name} is both described and not supported in {FACTS_PATH}"
            );
            if let Some(reason) = reason(name) {
                assert!(
                    !reason.trim().is_empty(),
                    "{name}: empty not_supported reason"
                );
            }
            if profile.accelerator_resource == NVIDIA {
                assert!(
                    has_facts(name) || reason(name).is_some(),
                    "NVIDIA type {name} from {CATALOG_PATH} has no entry in {FACTS_PATH} \
                     (add its facts, or list it under not_supported with the reason)"
                );
            } else {
                assert!(!has_facts(name), "{name} is not an NVIDIA type");
            }
        }
    }

    #[test]
    fn facts_agree_with_the_catalog() {
        for (name, facts) in &facts().instances {
            let profile = CATALOG.get(name).expect("checked above");
            assert_eq!(
                facts.nvlink_gbs_per_direction.is_some(),
                profile.nvlink,
                "{name}: nvlink_gbs_per_direction must be set exactly when the catalog says nvlink"
            );
            assert!(!facts.device_names.is_empty(), "{name}: no device_names");
        }
    }

    #[test]
    fn catalog_facts_map_onto_diagnosis_types() {
        let p4d = find("p4d.24xlarge").unwrap();
        assert_eq!((p4d.gpus, p4d.rdma, p4d.max_efa), (8, Rdma::Read, 4));
        assert!(p4d.has_nvlink() && p4d.gpu.starts_with("A100") && p4d.plugin_topo_file);
        let p5 = find("p5.48xlarge").unwrap();
        assert_eq!(
            (p5.rdma, p5.max_efa, p5.network_gbps),
            (Rdma::ReadWrite, 32, Some(3200))
        );
        let g5 = find("g5.12xlarge").unwrap();
        assert_eq!(
            (g5.gpus, g5.intra_node, g5.rdma),
            (4, IntraNode::Pcie, Rdma::None)
        );
        assert!(!g5.rdma_capable());
    }

    #[test]
    fn unknown_types_point_to_the_right_file() {
        let (message, fix) = unknown_type("g4dn.xlarge");
        assert!(message.contains("not in trainplace's instance table"));
        assert!(fix.contains(CATALOG_PATH) && fix.contains(FACTS_PATH));
        let (message, _) = unknown_type("trn1.32xlarge");
        assert!(message.contains("not supported") && message.contains("Neuron"));
        assert!(find("trn1.32xlarge").is_none());
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
