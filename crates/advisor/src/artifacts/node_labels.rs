//! The labels EKS and Karpenter put on the nodes they make, which the emitted jobs
//! select and the emitted self-managed nodegroups set themselves.

/// EKS sets these on every managed node: its nodegroup, and its capacity type
/// (`ON_DEMAND`, `SPOT`, `CAPACITY_BLOCK`;
/// <https://docs.aws.amazon.com/eks/latest/APIReference/API_Nodegroup.html>).
pub const LABEL_EKS_NODEGROUP: &str = "eks.amazonaws.com/nodegroup";
pub const LABEL_EKS_CAPACITY_TYPE: &str = "eks.amazonaws.com/capacityType";
/// Karpenter sets these on the nodes it launches: the NodePool, the capacity type
/// (`reserved` for capacity reservations and Capacity Blocks) and the reservation id
/// (<https://karpenter.sh/docs/concepts/scheduling/>, <https://karpenter.sh/docs/tasks/odcrs/>).
pub const LABEL_KARPENTER_NODEPOOL: &str = "karpenter.sh/nodepool";
pub const LABEL_KARPENTER_CAPACITY_TYPE: &str = "karpenter.sh/capacity-type";
/// Pod annotation: Karpenter leaves the pod's node alone while it runs.
pub const DO_NOT_DISRUPT: &str = "karpenter.sh/do-not-disrupt";
