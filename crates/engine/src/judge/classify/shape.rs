//! What classifying a pod template yields: its shape (accelerators, EFA, pods, zones,
//! target instance type), and where the target came from.

use super::zones::Zones;
use crate::read::devices::Channel;
use trainplace_catalog::InstanceProfile;

/// Where the target instance type came from (shown in explanations).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InstanceSource {
    /// The pod is bound already: `spec.nodeName` names a node of this type.
    NodeName,
    /// Its `kubernetes.io/hostname` node selector names a node of this type.
    Hostname,
    NodeSelector,
    NodeAffinity,
    Annotation,
    PolicyDefault,
    /// The only GPU instance type in the cluster.
    Inventory,
    /// The node selection's Karpenter or node group labels reach only this type.
    Selection,
    /// The pod claims a ComputeDomain IMEX channel or is held in an NVLink clique: only
    /// the catalog's multi-node NVLink type (GB200) has those.
    NvlinkDomain,
}

impl InstanceSource {
    pub fn describe(self) -> &'static str {
        match self {
            InstanceSource::NodeName => "the node spec.nodeName names",
            InstanceSource::Hostname => "the node its kubernetes.io/hostname selector names",
            InstanceSource::NodeSelector => "nodeSelector",
            InstanceSource::NodeAffinity => "required node affinity",
            InstanceSource::Annotation => "annotation trainplace.io/instance-type",
            InstanceSource::PolicyDefault => "the policy default for this namespace",
            InstanceSource::Inventory => "the only GPU instance type in the cluster",
            InstanceSource::Selection => {
                "the node selection's Karpenter or node group labels (the only catalog type they reach)"
            }
            InstanceSource::NvlinkDomain => {
                "the pod's ComputeDomain channel or NVLink clique affinity (only multi-node NVLink instances have them)"
            }
        }
    }
}

#[derive(Debug, Clone)]
pub enum Target<'c> {
    Known(&'c InstanceProfile, InstanceSource),
    Unknown(String, InstanceSource),
    /// Required node affinity allows several types; trainplace will not guess.
    Several(Vec<String>),
    None,
}

#[derive(Debug, Clone)]
pub struct Shape<'c> {
    pub accel_resource: String,
    pub per_pod: u32,
    /// The accelerators are slices of devices (MIG, time-slicing, NeuronCores): never a
    /// whole node, whatever the count.
    pub shared: bool,
    pub efa: u32,
    /// Pods in the job, when known.
    pub pods: Option<u32>,
    pub multi_pod: bool,
    pub identity: Option<(String, String)>,
    /// See [`SiteHints::group_label`](crate::read::workload::SiteHints::group_label).
    pub group_label: Option<String>,
    pub target: Target<'c>,
    pub zones: Zones,
    /// Accelerators counted from DRA claims.
    pub accel_claimed: bool,
    /// EFA interfaces counted from DRA claims (`efa.networking.k8s.aws`).
    pub efa_claimed: bool,
    /// Why nodes of the target type cannot grant `vpc.amazonaws.com/efa` (EFA through
    /// DRA, or no EFA device plugin), when so: trainplace must not add it.
    pub efa_resource_absent: Option<String>,
    /// The pod's ComputeDomain IMEX channel claim.
    pub channel: Option<Channel>,
    /// A required pod affinity on the NVLink clique label already holds the job.
    pub clique_held: bool,
    /// The EKS network layer labels Kueue places this job by: the levels of a Kueue
    /// Topology in the cluster, when the job is queued by Kueue (else empty).
    pub kueue_layers: Vec<&'static str>,
    /// Where the job can sit in the network, when the inventory has the type's nodes
    /// with network labels (a multi-pod job of a known type and size).
    pub network_fit: Option<crate::facts::network_fit::NetworkFit>,
}

#[derive(Debug, Clone)]
pub enum Class<'c> {
    NotTraining,
    Training(Box<Shape<'c>>),
}
