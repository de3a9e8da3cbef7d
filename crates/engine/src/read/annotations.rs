//! The public contract: annotation and label names trainplace reads and writes.

pub const ALLOW_PARTIAL_NODE: &str = "trainplace.io/allow-partial-node";
use crate::read::json::Lookup as _;
pub const ALLOW_MULTI_AZ: &str = "trainplace.io/allow-multi-az";
pub const SKIP: &str = "trainplace.io/skip";
pub const INSTANCE_TYPE: &str = "trainplace.io/instance-type";
pub const SHM_SIZE: &str = "trainplace.io/shm-size";
pub const NCCL_DEBUG: &str = "trainplace.io/nccl-debug";
pub const RESHAPE: &str = "trainplace.io/reshape";
pub const TRAINING: &str = "trainplace.io/training";
/// How long the job expects to run (`36h`): checked against the Capacity Block it runs on.
pub const EXPECTED_DURATION: &str = "trainplace.io/expected-duration";
/// Karpenter labels nodes of a capacity reservation with its id.
/// <https://karpenter.sh/docs/concepts/nodeclasses/> (capacityReservationSelectorTerms)
pub const LABEL_RESERVATION_ID: &str = "karpenter.k8s.aws/capacity-reservation-id";
/// Annotations that change a verdict: covered by the admission mark.
pub const OPT_INS: [&str; 4] = [ALLOW_PARTIAL_NODE, ALLOW_MULTI_AZ, SKIP, INSTANCE_TYPE];
/// Written by trainplace: one line per reason, naming every change made for it (capped at
/// `layout::MUTATED_TEXT_LIMIT`).
pub const MUTATED: &str = "trainplace.io/mutated";

pub const LABEL_INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";
pub const LABEL_INSTANCE_TYPE_BETA: &str = "beta.kubernetes.io/instance-type";

/// The EC2 type a SageMaker HyperPod node's instance-type label names (`ml.p5.48xlarge`:
/// p5.48xlarge's facts), `None` for any other value.
pub fn hyperpod_type(label: &str) -> Option<&str> {
    label.strip_prefix("ml.")
}
pub const LABEL_ZONE: &str = "topology.kubernetes.io/zone";
pub const LABEL_ZONE_BETA: &str = "failure-domain.beta.kubernetes.io/zone";
/// AWS's zone id (`use1-az1`), the same zone under a name that is stable across accounts.
/// <https://docs.aws.amazon.com/eks/latest/userguide/> (well-known node labels on EKS)
pub const LABEL_ZONE_ID: &str = "topology.k8s.aws/zone-id";
/// Every node label that names a zone.
pub const ZONE_KEYS: [&str; 3] = [LABEL_ZONE, LABEL_ZONE_BETA, LABEL_ZONE_ID];
pub const LABEL_HOSTNAME: &str = "kubernetes.io/hostname";
/// A node's place in the EC2 network hierarchy, as EKS labels it: layer 1 is the
/// broadest (least selective) network node, layer 3 the bottom for most instance types,
/// and layer 4 exists only on types whose topology has four layers, where it is the
/// bottom. Nodes that share a value are under the same network node.
/// <https://docs.aws.amazon.com/eks/latest/userguide/ml-workload-topology.html>,
/// <https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/how-ec2-instance-topology-works.html>
pub const NETWORK_LAYERS: [&str; 4] = [
    "topology.k8s.aws/network-node-layer-1",
    "topology.k8s.aws/network-node-layer-2",
    "topology.k8s.aws/network-node-layer-3",
    "topology.k8s.aws/network-node-layer-4",
];
/// The weight of the scheduler preference for sharing each layer's network node
/// (layers 1 to 4): the more selective the layer, the more it counts; a node under the
/// same layer-3 node as a job's pods also shares layers 2 and 1, so scores add up.
pub const NETWORK_LAYER_WEIGHTS: [u8; 4] = [10, 20, 40, 80];
/// The label that queues a workload in Kueue (its LocalQueue's name).
/// <https://kueue.sigs.k8s.io/docs/concepts/local_queue/>
pub const KUEUE_QUEUE: &str = "kueue.x-k8s.io/queue-name";
/// Kueue Topology Aware Scheduling's pod-template annotations: place the PodSet in one
/// domain of this level (required), or in the smallest domain that fits, from this
/// level up (preferred); a template carries at most one of the three.
/// <https://kueue.sigs.k8s.io/docs/concepts/topology_aware_scheduling/>,
/// kubernetes-sigs/kueue apis/kueue/v1beta2/topology_types.go
pub const KUEUE_REQUIRED_TOPOLOGY: &str = "kueue.x-k8s.io/podset-required-topology";
pub const KUEUE_PREFERRED_TOPOLOGY: &str = "kueue.x-k8s.io/podset-preferred-topology";
pub const KUEUE_UNCONSTRAINED_TOPOLOGY: &str = "kueue.x-k8s.io/podset-unconstrained-topology";
const KUEUE_TOPOLOGIES: [&str; 3] = [
    KUEUE_REQUIRED_TOPOLOGY,
    KUEUE_PREFERRED_TOPOLOGY,
    KUEUE_UNCONSTRAINED_TOPOLOGY,
];

/// Whether a pod template already carries one of Kueue's three topology annotations:
/// its author chose, and trainplace writes none.
pub(crate) fn chose_kueue_topology(template: &serde_json::Value) -> bool {
    let annotations = template.lookup("/metadata/annotations");
    KUEUE_TOPOLOGIES
        .iter()
        .any(|k| annotations.and_then(|a| a.get(*k)).is_some())
}

pub const RES_NVIDIA_GPU: &str = "nvidia.com/gpu";
pub const RES_NEURON: &str = "aws.amazon.com/neuron";
pub const RES_EFA: &str = "vpc.amazonaws.com/efa";
/// The EFA DRA driver's (DRANET) device class on EKS: EFA claimed through
/// `resourceClaims` where nodes advertise no `vpc.amazonaws.com/efa`.
/// <https://docs.aws.amazon.com/eks/latest/userguide/device-management-efa.html>
pub const DRA_CLASS_EFA: &str = "efa.networking.k8s.aws";
/// The node label NVIDIA's GPU feature discovery sets to a node's NVLink domain
/// (clique): pods held on one value share one NVLink domain across instances (GB200).
/// <https://github.com/NVIDIA/k8s-dra-driver-gpu> (ComputeDomain status cliqueID)
pub const LABEL_CLIQUE: &str = "nvidia.com/gpu.clique";
/// Accelerator resources trainplace recognises in a container.
pub const ACCELERATOR_RESOURCES: [&str; 2] = [RES_NVIDIA_GPU, RES_NEURON];

/// Labels that name the job a pod belongs to, most specific framework first. The
/// value is what zone affinity and one-pod-per-node anti-affinity key on.
/// The label whose value tells one LeaderWorkerSet group (replica) from another.
pub const LWS_GROUP_KEY: &str = "leaderworkerset.sigs.k8s.io/group-key";
/// The label whose value tells one LeaderWorkerSet subgroup from another.
pub const LWS_SUBGROUP_KEY: &str = "leaderworkerset.sigs.k8s.io/subgroup-key";
/// A LeaderWorkerSet's exclusive placement, per group and per subgroup: LWS's pod
/// webhook gives a group's (or subgroup's) first pod a required pod affinity and
/// anti-affinity on the topology key these name.
/// <https://github.com/kubernetes-sigs/lws/blob/main/api/leaderworkerset/v1/leaderworkerset_types.go> (ExclusiveKeyAnnotationKey, SubGroupExclusiveKeyAnnotationKey)
pub const LWS_EXCLUSIVE: &str = "leaderworkerset.sigs.k8s.io/exclusive-topology";
pub const LWS_SUBGROUP_EXCLUSIVE: &str = "leaderworkerset.sigs.k8s.io/subgroup-exclusive-topology";
/// KubeRay puts this on every pod of a RayCluster (head and workers).
pub const LABEL_RAY_CLUSTER: &str = "ray.io/cluster";
/// KubeRay labels the pods of a serving cluster (a RayService's) for its serve Service
/// from their creation (`BuildPod` with the serve service enabled), then by health.
/// <https://github.com/ray-project/kuberay/blob/master/ray-operator/controllers/ray/common/pod.go>
pub const LABEL_RAY_SERVE: &str = "ray.io/serve";
/// JobSet's exclusive placement: each child Job in a topology domain of its own.
/// <https://github.com/kubernetes-sigs/jobset/blob/main/api/jobset/v1alpha2/jobset_types.go> (ExclusiveKey)
pub const JOBSET_EXCLUSIVE: &str = "alpha.jobset.sigs.k8s.io/exclusive-topology";
/// KubeRay puts this on every Ray pod, of whatever cluster.
/// <https://github.com/ray-project/kuberay/blob/feeaf72facab4881ba2b179248bb67315634e229/ray-operator/controllers/ray/common/pod.go> (labelPod)
pub const LABEL_RAY_NODE: &str = "ray.io/is-ray-node";
/// That label at the one value KubeRay writes.
pub const RAY_NODE: (&str, &str) = (LABEL_RAY_NODE, "yes");
/// KubeRay labels the RayCluster a RayJob or RayService makes with the kind it came from.
pub const LABEL_RAY_ORIGIN: &str = "ray.io/originated-from-crd";
/// Volcano puts this on every pod of a Volcano Job.
pub const LABEL_VOLCANO_JOB: &str = "volcano.sh/job-name";
/// SageMaker HyperPod's training operator puts this on the pods of a HyperPodPyTorchJob.
/// <https://github.com/aws/sagemaker-hyperpod-cli/blob/011ca927123e02b35a399935bbb3ab1905fe33c7/src/sagemaker/hyperpod/training/hyperpod_pytorch_job.py> (list_pods)
pub const LABEL_HYPERPOD_JOB: &str = "HPJob";
/// JobSet labels every pod with its JobSet's name and its replicated job's name.
pub const LABEL_JOBSET_NAME: &str = "jobset.sigs.k8s.io/jobset-name";
pub const LABEL_REPLICATED_JOB: &str = "jobset.sigs.k8s.io/replicatedjob-name";
/// trainplace writes this on the pods (and templates) of a job that names its
/// rendezvous (torchrun's endpoint, a master address) when the job has no label that
/// spans all its pods (bare pods, one batch Job per rank): every pod that meets at
/// one endpoint is one job. The value is a digest of the namespace and endpoint.
pub const LABEL_RENDEZVOUS: &str = "trainplace.io/rendezvous";
/// The job's name for trainplace: written on every training template of a workload
/// created with `generateName` (no name yet at admission), or set by users on pods
/// that no operator labels.
pub const LABEL_JOB: &str = "trainplace.io/job";
/// Argo Workflows labels every pod of a workflow with its name.
/// <https://argo-workflows.readthedocs.io/en/latest/fields/> (workflows.argoproj.io/workflow)
pub const LABEL_ARGO_WORKFLOW: &str = "workflows.argoproj.io/workflow";
pub const JOB_IDENTITY_LABELS: [(&str, &str); 13] = [
    (LABEL_RENDEZVOUS, "rendezvous"),
    (LABEL_JOB, "trainplace job"),
    ("jobset.sigs.k8s.io/jobset-name", "JobSet"),
    ("training.kubeflow.org/job-name", "Kubeflow training job"),
    (
        "leaderworkerset.sigs.k8s.io/group-key",
        "LeaderWorkerSet group",
    ),
    ("leaderworkerset.sigs.k8s.io/name", "LeaderWorkerSet"),
    ("trainer.kubeflow.org/trainjob-name", "Kubeflow TrainJob"),
    ("batch.kubernetes.io/job-name", "batch Job"),
    ("job-name", "batch Job"),
    (LABEL_RAY_CLUSTER, "Ray cluster"),
    (LABEL_VOLCANO_JOB, "Volcano job"),
    (LABEL_HYPERPOD_JOB, "HyperPod PyTorch job"),
    (LABEL_ARGO_WORKFLOW, "Argo workflow"),
];
/// A pod of an Indexed Job carries this; with a job name it marks a multi-pod job.
pub const LABEL_COMPLETION_INDEX: &str = "batch.kubernetes.io/job-completion-index";

/// The user kube-scheduler authenticates as.
pub const SCHEDULER_USER: &str = "system:kube-scheduler";

/// The annotation kube-scheduler writes on the ResourceClaim it creates for a pod's
/// extended resources backed by DRA (KEP-5004).
pub const EXTENDED_RESOURCE_CLAIM: &str = "resource.kubernetes.io/extended-resource-claim";
