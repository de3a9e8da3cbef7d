//! The pod template in the recommended layout (docs/rules.md, "What it writes"): one pod per node with all
//! accelerators and all EFA, hostIPC, IPC_LOCK, memory-backed /dev/shm, tolerations,
//! instance type and zone pinned, one pod per node. Written so the webhook engine has
//! nothing left to change.

use serde_json::{Value, json};

use trainplace_engine::annotations::{
    DRA_CLASS_EFA, LABEL_CLIQUE, LABEL_RESERVATION_ID, NETWORK_LAYER_WEIGHTS, NETWORK_LAYERS,
};

use crate::recommend::{CapacityPlan, Recommendation};

pub const RES_EFA: &str = "vpc.amazonaws.com/efa";
/// The pod's claim on the EFA ResourceClaimTemplate, when EFA comes through DRA.
pub const EFA_CLAIM: &str = "efa";
pub const SHM_VOLUME: &str = "dshm";
/// The pod's claim on its ComputeDomain's IMEX channel (multi-node NVLink, GB200).
pub const CHANNEL_CLAIM: &str = "compute-domain-channel";
/// Label the advisor puts on every pod of the job; anti-affinity selects on it.
pub const JOB_LABEL: &str = "trainplace.io/job";
pub const MASTER_PORT: u32 = 29500;

/// Which nodes the job's pods are pinned to: those of the eksctl nodegroups or those
/// Karpenter launches from `karpenter.yaml` (the plan's route, `crate::recommend::route`).
pub use crate::request::Route;

pub use super::node_labels::{
    DO_NOT_DISRUPT, LABEL_EKS_CAPACITY_TYPE, LABEL_EKS_NODEGROUP, LABEL_KARPENTER_CAPACITY_TYPE,
    LABEL_KARPENTER_NODEPOOL,
};

/// Everything a pod template needs besides its container command.
pub struct PodParts<'a> {
    pub rec: &'a Recommendation,
    /// NCCL / libfabric env from the catalog for this instance (name, value).
    pub nccl_env: &'a [(String, String)],
    pub route: Route,
}

impl PodParts<'_> {
    pub fn job(&self) -> &str {
        &self.rec.request.names.job
    }

    /// Every accelerator and every EFA interface of the node (`requests` = `limits`),
    /// plus CPU, memory (covering /dev/shm) and EFA hugepages (`allocatable.rs`).
    pub fn device_resources(&self) -> Value {
        let p = &self.rec.instance;
        let mut map = serde_json::Map::new();
        map.insert(p.accelerator_resource.clone(), json!(p.accelerators));
        if p.max_efa > 0 && !self.rec.efa_dra {
            map.insert(RES_EFA.into(), json!(p.max_efa));
        }
        let (mut extra_requests, mut extra_limits) = crate::allocatable::extra_resources(p);
        if self.route == Route::Karpenter {
            // Karpenter does not model hugepages: a pod requesting them matches no
            // instance type and no node is launched
            // (https://github.com/kubernetes-sigs/karpenter/issues/751). libfabric's EFA
            // provider then uses regular pages.
            extra_requests.remove(crate::allocatable::HUGEPAGES);
            extra_limits.remove(crate::allocatable::HUGEPAGES);
        }
        let mut requests = map.clone();
        requests.extend(extra_requests);
        let mut limits = map;
        limits.extend(extra_limits);
        let mut resources = json!({"requests": requests, "limits": limits});
        let mut claims = Vec::new();
        if self.rec.efa_dra {
            claims.push(json!({"name": EFA_CLAIM}));
        }
        if self.nvlink_domain() {
            claims.push(json!({"name": CHANNEL_CLAIM}));
        }
        if !claims.is_empty() {
            resources["claims"] = json!(claims);
        }
        resources
    }

    /// Whether the instance's NVLink domain spans instances (GB200 NVL72): then the
    /// pods reach each other's GPUs over NVLink only with an IMEX channel, which a
    /// ComputeDomain of the NVIDIA DRA driver gives (<https://github.com/NVIDIA/k8s-dra-driver-gpu>),
    /// and must share one domain (`nvidia.com/gpu.clique`).
    pub fn nvlink_domain(&self) -> bool {
        self.rec.instance.nvlink_domain_instances.is_some()
    }

    /// The job's ComputeDomain: one IMEX domain over the job's nodes, whose channel's
    /// ResourceClaimTemplate the pods claim.
    pub fn compute_domain(&self) -> Option<Value> {
        self.nvlink_domain().then(|| {
            json!({
                "apiVersion": "resource.nvidia.com/v1beta1",
                "kind": "ComputeDomain",
                "metadata": {"name": format!("{}-compute-domain", self.job()), "namespace": self.rec.request.names.namespace},
                "spec": {
                    "numNodes": self.rec.shape.nodes,
                    "channel": {"resourceClaimTemplate": {"name": self.channel_template()}},
                },
            })
        })
    }

    fn channel_template(&self) -> String {
        format!("{}-compute-domain-channel", self.job())
    }

    /// The ResourceClaimTemplate of the job's EFA when EFA comes through the EFA DRA
    /// driver: every interface of the node (`allocationMode: All`); the driver pairs
    /// them with their GPUs.
    pub fn efa_claim_template(&self) -> Option<Value> {
        self.rec.efa_dra.then(|| {
            json!({
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaimTemplate",
                "metadata": {"name": self.efa_template_name(), "namespace": self.rec.request.names.namespace},
                "spec": {"spec": {"devices": {"requests": [
                    {"name": "efa", "exactly": {"deviceClassName": DRA_CLASS_EFA, "allocationMode": "All"}}
                ]}}},
            })
        })
    }

    fn efa_template_name(&self) -> String {
        format!("{}-efa", self.job())
    }

    pub fn env(&self, extra: &[Value]) -> Vec<Value> {
        self.nccl_env
            .iter()
            .map(|(n, v)| json!({"name": n, "value": v}))
            .chain(extra.iter().cloned())
            .collect()
    }

    /// A device container: all accelerators, IPC_LOCK, /dev/shm.
    pub fn device_container(
        &self,
        name: &str,
        image: &str,
        command: &[&str],
        extra_env: &[Value],
    ) -> Value {
        json!({
            "name": name,
            "image": image,
            "command": command,
            "env": self.env(extra_env),
            "resources": self.device_resources(),
            "securityContext": {"capabilities": {"add": ["IPC_LOCK"]}},
            "volumeMounts": [{"name": SHM_VOLUME, "mountPath": "/dev/shm"}],
        })
    }

    pub fn tolerations(&self) -> Value {
        let p = &self.rec.instance;
        let mut keys = vec![p.accelerator_resource.clone()];
        if p.max_efa > 0 {
            keys.push(RES_EFA.into());
        }
        keys.iter()
            .map(|k| json!({"key": k, "operator": "Exists", "effect": "NoSchedule"}))
            .collect()
    }

    /// Instance type and zone, and for reserved capacity the nodes of what was bought:
    /// Capacity Block nodes of the plan's nodegroups (eksctl) or Karpenter's reserved
    /// nodes of the plan's NodePool, so no pod lands on an on-demand node beside the
    /// block, and `trainplace check` can tie the job to the block it runs on.
    pub fn node_selector(&self) -> Value {
        let mut sel = json!({
            "node.kubernetes.io/instance-type": self.rec.instance.name,
            "topology.kubernetes.io/zone": self.rec.availability_zone,
        });
        let block = matches!(self.rec.capacity, CapacityPlan::CapacityBlock { .. });
        let reserved = block || matches!(self.rec.capacity, CapacityPlan::Odcr { .. });
        match self.route {
            Route::Eksctl if block => {
                sel[LABEL_EKS_CAPACITY_TYPE] = json!("CAPACITY_BLOCK");
            }
            Route::Karpenter => {
                if reserved {
                    sel[LABEL_KARPENTER_CAPACITY_TYPE] = json!("reserved");
                }
                // Several NodePools (one per placement group): the node affinity names them.
                if let [pool] = super::karpenter::pool_names(self.rec).as_slice() {
                    sel[LABEL_KARPENTER_NODEPOOL] = json!(pool);
                }
            }
            Route::Eksctl => {}
        }
        sel
    }

    /// Required node affinity beside the selector: the plan's nodegroups (eksctl), or
    /// the reservation ids when they are known (Karpenter; blocks the account holds, an
    /// ODCR).
    fn node_affinity(&self) -> Option<Value> {
        let term = |key: &str, values: Vec<String>| {
            json!({"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": key, "operator": "In", "values": values}]}
            ]}})
        };
        match (self.route, &self.rec.capacity) {
            (Route::Eksctl, CapacityPlan::CapacityBlock { .. } | CapacityPlan::Odcr { .. }) => {
                let groups = super::eksctl::nodegroup_names(self.rec);
                (!groups.is_empty()).then(|| term(LABEL_EKS_NODEGROUP, groups))
            }
            (Route::Karpenter, CapacityPlan::Odcr { reservation_id }) => {
                Some(term(LABEL_RESERVATION_ID, vec![reservation_id.clone()]))
            }
            (
                Route::Karpenter,
                CapacityPlan::CapacityBlock {
                    blocks: Some(plan), ..
                },
            ) if plan.offerings.iter().all(|o| o.held) => Some(term(
                LABEL_RESERVATION_ID,
                plan.offerings.iter().map(|o| o.id.clone()).collect(),
            )),
            (Route::Karpenter, _) => {
                let pools = super::karpenter::pool_names(self.rec);
                (pools.len() > 1).then(|| term(LABEL_KARPENTER_NODEPOOL, pools))
            }
            _ => None,
        }
    }

    pub fn anti_affinity(&self) -> Value {
        let mut a = json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": {JOB_LABEL: self.job()}},
            "topologyKey": "kubernetes.io/hostname",
        }]}});
        if let Some(n) = self.node_affinity() {
            a["nodeAffinity"] = n;
        }
        if self.nvlink_domain() {
            // Every pod in one NVLink domain, where the IMEX channel reaches.
            a["podAffinity"] = json!({"requiredDuringSchedulingIgnoredDuringExecution": [{
                "labelSelector": {"matchLabels": {JOB_LABEL: self.job()}},
                "topologyKey": LABEL_CLIQUE,
            }]});
        }
        {
            // The job's pods under the same network nodes, most selective layer first, as
            // trainplace's webhook writes them (the EKS network-node-layer labels); on a
            // one-node job too, whose pods the webhook cannot tell from a larger job's.
            let terms: Vec<Value> = (0..NETWORK_LAYERS.len())
                .rev()
                .map(|i| {
                    json!({"weight": NETWORK_LAYER_WEIGHTS[i], "podAffinityTerm": {
                        "labelSelector": {"matchLabels": {JOB_LABEL: self.job()}},
                        "topologyKey": NETWORK_LAYERS[i],
                    }})
                })
                .collect();
            a["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] = json!(terms);
        }
        a
    }

    pub fn shm_volume(&self) -> Value {
        json!({"name": SHM_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": self.rec.instance.shm_default}})
    }

    /// `{metadata, spec}` of a device pod.
    pub fn template(&self, container: Value) -> Value {
        let mut metadata = json!({"labels": {JOB_LABEL: self.job()}});
        if self.route == Route::Karpenter {
            // Karpenter does not voluntarily disrupt (drift, consolidation, expiry) a
            // node running such a pod (https://karpenter.sh/docs/concepts/disruption/).
            metadata["annotations"] = json!({DO_NOT_DISRUPT: "true"});
        }
        let mut t = json!({
            "metadata": metadata,
            "spec": {
                "hostIPC": true,
                "containers": [container],
                "volumes": [self.shm_volume()],
                "tolerations": self.tolerations(),
                "nodeSelector": self.node_selector(),
                "affinity": self.anti_affinity(),
            },
        });
        let mut claims = Vec::new();
        if self.rec.efa_dra {
            claims.push(
                json!({"name": EFA_CLAIM, "resourceClaimTemplateName": self.efa_template_name()}),
            );
        }
        if self.nvlink_domain() {
            claims.push(json!({"name": CHANNEL_CLAIM, "resourceClaimTemplateName": self.channel_template()}));
        }
        if !claims.is_empty() {
            t["spec"]["resourceClaims"] = json!(claims);
        }
        t
    }
}
