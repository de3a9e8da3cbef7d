//! The instance catalog: what each instance type has (accelerators, EFA, memory, price)
//! and which NCCL/libfabric environment it needs. One catalog serves the webhook, the
//! CLI and the advisor; the embedded copy is `policies/instances.yaml`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::CatalogError;

/// The catalog compiled into the binary (`policies/instances.yaml`).
pub const EMBEDDED_CATALOG: &str = include_str!("../../../policies/instances.yaml");

/// RDMA support of an instance's EFA devices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rdma {
    None,
    Read,
    ReadWrite,
}

/// Facts about one instance type. Unknown facts are `None`, never guessed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InstanceProfile {
    pub name: String,
    /// Accelerator family used by the advisor (`a100`, `h100`, `trainium`, ...).
    pub family: String,
    pub accelerator: String,
    /// Extended resource the device plugin advertises (`nvidia.com/gpu`, `aws.amazon.com/neuron`).
    pub accelerator_resource: String,
    pub accelerators: u32,
    /// Cores of all its accelerators as the device plugin counts them
    /// (`aws.amazon.com/neuroncore`), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accelerator_cores: Option<u32>,
    pub accelerator_memory_gi_b: Option<u32>,
    pub memory_gi_b: Option<u32>,
    pub intra_node: String,
    /// True when accelerators inside a node talk over NVLink/NVSwitch.
    pub nvlink: bool,
    /// Instances one NVLink domain spans (GB200 NVL72: 18); `None` when NVLink ends
    /// at the instance. Pods of one job in one domain talk over NVLink across nodes,
    /// given IMEX channels (a ComputeDomain).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvlink_domain_instances: Option<u32>,
    /// `vpc.amazonaws.com/efa` the node advertises; 0 = no EFA.
    pub max_efa: u32,
    pub network_gbps: Option<u32>,
    pub rdma: Rdma,
    /// Whether EC2 Capacity Blocks sell this type; `None` = unconfirmed.
    pub capacity_blocks: Option<bool>,
    pub price_per_hour_usd: Option<f64>,
    /// Size of the memory-backed /dev/shm when neither annotation nor policy sets one.
    pub shm_default: String,
    pub source: String,
}

impl InstanceProfile {
    pub fn has_efa(&self) -> bool {
        self.max_efa > 0
    }

    /// Instances in one NVLink domain when it spans more than this instance.
    pub fn nvlink_domain(&self) -> Option<u32> {
        self.nvlink_domain_instances.filter(|n| *n > 1)
    }
}

/// Conditions under which an NCCL env rule applies.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EnvWhen {
    /// The pod requests EFA interfaces.
    pub efa: Option<bool>,
    /// Semver requirement on the aws-ofi-nccl version in use.
    pub plugin: Option<String>,
    /// Instance-type name prefixes.
    #[serde(default)]
    pub instances: Vec<String>,
    /// Accelerator family of the instance (`nvidia`: NCCL, `neuron`: Neuron collectives).
    pub family: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EnvRule {
    pub name: String,
    pub value: String,
    #[serde(default)]
    pub when: EnvWhen,
    pub source: String,
}

/// An extended resource that asks for accelerators. `name` is exact, or a prefix when
/// it ends in `*` (`nvidia.com/mig-*`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AcceleratorResource {
    pub name: String,
    /// Devices of one vendor stack (`nvidia`, `neuron`, `amd`): a pod asking for one
    /// family cannot run on an instance of another.
    pub family: String,
    /// A slice of a device (MIG instance, time-sliced replica, NeuronCore): a pod of
    /// such resources never holds whole devices, whatever the count.
    #[serde(default)]
    pub shared: bool,
    /// Counts cores of devices (NeuronCores): a pod with all of an instance's
    /// `acceleratorCores` holds every device, the whole node.
    #[serde(default)]
    pub cores: bool,
    pub source: String,
}

impl AcceleratorResource {
    pub fn matches(&self, resource: &str) -> bool {
        match self.name.strip_suffix('*') {
            Some(prefix) => resource.starts_with(prefix),
            None => resource == self.name,
        }
    }
}

/// What a DRA device request of a class counts as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Counts {
    /// Accelerators, standing for the extended resource `resource`.
    Accelerator,
    /// EFA interfaces.
    Efa,
    /// A ComputeDomain's IMEX channel: multi-node NVLink, no device count.
    ImexChannel,
}

/// A DRA device class (`deviceClassName` in a ResourceClaim request).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeviceClass {
    pub name: String,
    pub counts: Counts,
    /// The extended resource an accelerator class stands for (`nvidia.com/gpu`).
    pub resource: Option<String>,
    /// Slices of devices (MIG): never whole devices.
    #[serde(default)]
    pub shared: bool,
    pub source: String,
}

/// The on-disk shape of an `InstanceCatalog` file.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CatalogFile {
    pub api_version: String,
    pub kind: String,
    #[serde(default)]
    pub instances: Vec<InstanceProfile>,
    #[serde(default)]
    pub nccl_env: Vec<EnvRule>,
    /// Resource names that ask for accelerators; a file's entries replace the embedded
    /// ones by name and add new ones.
    #[serde(default)]
    pub accelerator_resources: Vec<AcceleratorResource>,
    /// DRA device classes; a file's entries replace the embedded ones by name.
    #[serde(default)]
    pub device_classes: Vec<DeviceClass>,
}

/// A loaded catalog with parsed version requirements.
#[derive(Debug, Clone)]
pub struct Catalog {
    instances: BTreeMap<String, InstanceProfile>,
    accelerator_resources: Vec<AcceleratorResource>,
    device_classes: Vec<DeviceClass>,
    env_rules: Vec<(EnvRule, Option<semver::VersionReq>)>,
}

impl Catalog {
    /// What a resource name asks for, when it asks for accelerators.
    pub fn accelerator(&self, resource: &str) -> Option<&AcceleratorResource> {
        self.accelerator_resources
            .iter()
            .find(|r| r.matches(resource))
    }

    /// What a DRA device class counts as, when the catalog knows it.
    pub fn device_class(&self, name: &str) -> Option<&DeviceClass> {
        self.device_classes.iter().find(|c| c.name == name)
    }

    /// The DRA device classes, in catalog order.
    pub fn device_classes(&self) -> &[DeviceClass] {
        &self.device_classes
    }

    /// The resource names that ask for accelerators, in catalog order.
    pub fn accelerator_resources(&self) -> &[AcceleratorResource] {
        &self.accelerator_resources
    }

    /// The device family of an instance's accelerator resource.
    pub fn family_of(&self, resource: &str) -> Option<&str> {
        self.accelerator(resource).map(|r| r.family.as_str())
    }

    /// The catalog compiled into the binary.
    pub fn embedded() -> Self {
        Self::from_yaml(EMBEDDED_CATALOG, "policies/instances.yaml (embedded)")
            .expect("embedded catalog is validated by the test suite")
    }

    pub fn from_yaml(text: &str, origin: &str) -> Result<Self, CatalogError> {
        let file: CatalogFile = crate::yaml::parse_yaml(text, origin)?;
        let mut catalog = Catalog {
            instances: BTreeMap::new(),
            accelerator_resources: Vec::new(),
            device_classes: Vec::new(),
            env_rules: Vec::new(),
        };
        catalog.merge(file, origin)?;
        Ok(catalog)
    }

    /// Add or replace entries from another catalog file (a policy directory's own).
    pub fn merge(&mut self, file: CatalogFile, origin: &str) -> Result<(), CatalogError> {
        if file.api_version != crate::yaml::API_VERSION || file.kind != "InstanceCatalog" {
            return Err(CatalogError::Invalid {
                origin: origin.to_string(),
                message: format!(
                    "expected apiVersion {} kind InstanceCatalog, found {} {}",
                    crate::yaml::API_VERSION,
                    file.api_version,
                    file.kind
                ),
            });
        }
        for r in file.accelerator_resources {
            self.accelerator_resources
                .retain(|have| have.name != r.name);
            self.accelerator_resources.push(r);
        }
        for c in file.device_classes {
            let resource_ok = match c.counts {
                Counts::Accelerator => c
                    .resource
                    .as_deref()
                    .is_some_and(|r| self.accelerator(r).is_some()),
                Counts::Efa | Counts::ImexChannel => c.resource.is_none(),
            };
            if !resource_ok {
                return Err(CatalogError::Invalid {
                    origin: origin.to_string(),
                    message: format!(
                        "deviceClasses {}: an accelerator class needs `resource` naming one of acceleratorResources; efa and imex-channel classes take none",
                        c.name
                    ),
                });
            }
            self.device_classes.retain(|have| have.name != c.name);
            self.device_classes.push(c);
        }
        for profile in file.instances {
            if profile.accelerators == 0 {
                return Err(CatalogError::Invalid {
                    origin: origin.to_string(),
                    message: format!("instance {}: accelerators must be at least 1", profile.name),
                });
            }
            crate::quantity::parse_bytes(&profile.shm_default).map_err(|e| {
                CatalogError::Invalid {
                    origin: origin.to_string(),
                    message: format!("instance {}: shmDefault: {e}", profile.name),
                }
            })?;
            self.instances.insert(profile.name.clone(), profile);
        }
        if !file.nccl_env.is_empty() {
            let mut rules = Vec::with_capacity(file.nccl_env.len());
            for rule in file.nccl_env {
                let req = match &rule.when.plugin {
                    Some(text) => Some(semver::VersionReq::parse(text).map_err(|e| {
                        CatalogError::Invalid {
                            origin: origin.to_string(),
                            message: format!(
                                "ncclEnv {}: when.plugin {text:?} is not a version requirement: {e}",
                                rule.name
                            ),
                        }
                    })?),
                    None => None,
                };
                rules.push((rule, req));
            }
            self.env_rules = rules;
        }
        Ok(())
    }

    pub fn get(&self, name: &str) -> Option<&InstanceProfile> {
        self.instances.get(name)
    }

    pub fn instances(&self) -> impl Iterator<Item = &InstanceProfile> {
        self.instances.values()
    }

    /// The env vars the catalog prescribes for a container on `instance` with the
    /// given aws-ofi-nccl version, in file order; `when.family` is the instance's
    /// accelerator family (NCCL for `nvidia`, Neuron collectives for `neuron`).
    pub fn nccl_env<'a>(
        &'a self,
        instance: &'a InstanceProfile,
        plugin: &'a semver::Version,
        efa: bool,
    ) -> impl Iterator<Item = &'a EnvRule> + 'a {
        let family = self.family_of(&instance.accelerator_resource);
        self.env_rules.iter().filter_map(move |(rule, req)| {
            let when = &rule.when;
            let family_ok = when.family.as_deref().is_none_or(|f| Some(f) == family);
            let efa_ok = when.efa.is_none_or(|want| want == efa);
            let plugin_ok = req.as_ref().is_none_or(|r| r.matches(plugin));
            let instance_ok = when.instances.is_empty()
                || when.instances.iter().any(|p| instance.name.starts_with(p));
            (efa_ok && plugin_ok && instance_ok && family_ok).then_some(rule)
        })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_catalog_file_must_say_what_it_is() {
        for (head, want) in [
            (
                "apiVersion: trainplace.io/v1alpha1\nkind: Policy\n",
                "kind InstanceCatalog",
            ),
            (
                "apiVersion: v1\nkind: InstanceCatalog\n",
                "expected apiVersion trainplace.io/v1alpha1",
            ),
        ] {
            let err = super::Catalog::from_yaml(&format!("{head}instances: []\n"), "c.yaml")
                .unwrap_err()
                .to_string();
            assert!(err.contains("c.yaml") && err.contains(want), "{err}");
        }
    }

    use super::*;

    #[test]
    fn embedded_catalog_loads_and_has_sources() {
        let c = Catalog::embedded();
        let p5 = c.get("p5.48xlarge").expect("p5 present");
        assert_eq!(p5.accelerators, 8);
        assert_eq!(p5.max_efa, 32);
        assert!(c.instances().all(|p| !p.source.trim().is_empty()));
        assert!(
            c.get("g5.12xlarge")
                .is_some_and(|g| g.capacity_blocks == Some(false))
        );
    }

    #[test]
    fn modern_plugin_gets_no_fi_settings() {
        let c = Catalog::embedded();
        let p5 = c.get("p5.48xlarge").unwrap();
        let v = semver::Version::new(1, 16, 0);
        let names: Vec<_> = c.nccl_env(p5, &v, true).map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["NCCL_SOCKET_IFNAME"]);
        let old = semver::Version::new(1, 5, 0);
        let names: Vec<_> = c
            .nccl_env(p5, &old, true)
            .map(|r| r.name.as_str())
            .collect();
        assert!(names.contains(&"FI_PROVIDER") && names.contains(&"NCCL_BUFFSIZE"));
        let v16 = semver::Version::new(1, 6, 2);
        let names: Vec<_> = c
            .nccl_env(p5, &v16, true)
            .map(|r| r.name.as_str())
            .collect();
        assert!(names.contains(&"FI_EFA_USE_DEVICE_RDMA"));
        assert!(!names.contains(&"FI_PROVIDER"));
    }
}
