//! Device plugins the job needs on its nodes, and why they land there.
//!
//! The GPU nodes carry one taint, the accelerator resource (`nvidia.com/gpu` or
//! `aws.amazon.com/neuron`), so only pods that ask for accelerators run there. Every
//! device plugin must tolerate it, or its DaemonSet has DESIRED 0 on those nodes and the
//! job pods wait forever on `Insufficient vpc.amazonaws.com/efa`:
//!
//! - EFA, eks-charts `aws-efa-k8s-device-plugin` chart v0.5.30 (image v0.5.20): the
//!   DaemonSet tolerates only `CriticalAddonsOnly` plus `values.tolerations`, which
//!   defaults to `[]`
//!   (<https://github.com/aws/eks-charts/blob/master/stable/aws-efa-k8s-device-plugin/values.yaml>,
//!   templates/daemonset.yaml). We install it with `efa-device-plugin-values.yaml`.
//! - EFA, eksctl's bundled plugin (installed when `efaEnabled: true`): tolerates only
//!   `CriticalAddonsOnly` and `aws.amazon.com/efa`, and eksctl adds no tolerations for
//!   the nodegroup's taints to it; its affinity lists no p6 types
//!   (<https://github.com/eksctl-io/eksctl/blob/main/pkg/addons/assets/efa-device-plugin.yaml>,
//!   pkg/addons/device_plugin.go `EFADevicePlugin.SetTolerations`). We replace it
//!   with the chart.
//! - NVIDIA, eksctl's bundled plugin: eksctl adds a toleration for every taint of the
//!   NVIDIA nodegroups (pkg/addons/device_plugin.go `NvidiaDevicePlugin.SetTolerations`).
//! - NVIDIA, chart `nvdp/nvidia-device-plugin` 0.20.0: tolerates `nvidia.com/gpu` and
//!   runs on nodes labelled `nvidia.com/gpu.present=true` (or NFD's PCI label)
//!   (<https://github.com/NVIDIA/k8s-device-plugin/blob/main/deployments/helm/nvidia-device-plugin/values.yaml>).
//!   Our nodes carry that label.
//! - Neuron, eksctl's bundled plugin and the Neuron Helm chart: tolerate
//!   `aws.amazon.com/neuron` (eksctl pkg/addons/assets/neuron-device-plugin.yaml;
//!   <https://github.com/aws-neuron/neuron-helm-charts/releases/tag/1.9.0>).

use serde_json::{Value, json};
use trainplace_engine::annotations::RES_NVIDIA_GPU;

use crate::recommend::Recommendation;

/// eks-charts repository and the EFA chart version (appVersion v0.5.20).
pub const EKS_CHARTS_REPO: &str = "https://aws.github.io/eks-charts";
pub const EFA_CHART_VERSION: &str = "v0.5.30";
/// The DaemonSet eksctl installs for `efaEnabled: true` (kube-system).
pub const EKSCTL_EFA_DAEMONSET: &str = "aws-efa-k8s-device-plugin";
/// NVIDIA device plugin chart (<https://github.com/NVIDIA/k8s-device-plugin>, README).
pub const NVIDIA_CHART_REPO: &str = "https://nvidia.github.io/k8s-device-plugin";
pub const NVIDIA_CHART_VERSION: &str = "0.20.0";
/// Node label the NVIDIA chart's default affinity selects on.
pub const NVIDIA_PRESENT_LABEL: &str = "nvidia.com/gpu.present";
/// Neuron Helm chart 1.9.0 (Neuron SDK 2.31.0; device plugin 2.31.0.0).
pub const NEURON_CHART: &str = "oci://public.ecr.aws/neuron/neuron-helm-chart";
pub const NEURON_CHART_VERSION: &str = "1.9.0";
pub const VALUES_FILE: &str = "efa-device-plugin-values.yaml";

pub fn is_nvidia(rec: &Recommendation) -> bool {
    rec.instance.accelerator_resource == RES_NVIDIA_GPU
}

/// The one taint on the job's nodes: the accelerator resource.
pub fn node_taints(rec: &Recommendation) -> Value {
    json!([{"key": rec.instance.accelerator_resource, "value": "true", "effect": "NoSchedule"}])
}

/// Labels every node of the job carries besides the group name.
pub fn node_labels(rec: &Recommendation) -> Vec<(&'static str, &'static str)> {
    if is_nvidia(rec) {
        vec![(NVIDIA_PRESENT_LABEL, "true")]
    } else {
        Vec::new()
    }
}

/// Helm values for the eks-charts EFA chart: tolerate the node taint.
pub fn efa_values(rec: &Recommendation) -> Value {
    json!({"tolerations": [
        {"key": rec.instance.accelerator_resource, "operator": "Exists", "effect": "NoSchedule"},
    ]})
}

/// Header of the values file: what it is for and why.
pub fn efa_values_notes(rec: &Recommendation) -> Vec<String> {
    vec![
        format!(
            "Helm values for eks-charts aws-efa-k8s-device-plugin {EFA_CHART_VERSION} ({EKS_CHARTS_REPO})."
        ),
        format!(
            "Why: the {} nodes are tainted {}=true:NoSchedule. The chart tolerates only CriticalAddonsOnly",
            rec.instance.name, rec.instance.accelerator_resource
        ),
        "plus these values (default tolerations: []), and eksctl's bundled EFA plugin tolerates only".into(),
        "CriticalAddonsOnly and aws.amazon.com/efa: without this toleration the plugin's DaemonSet has".into(),
        "DESIRED 0 on the GPU nodes, no node advertises vpc.amazonaws.com/efa, and every job pod stays".into(),
        "Pending with `Insufficient vpc.amazonaws.com/efa`.".into(),
        format!(
            "helm upgrade --install aws-efa-k8s-device-plugin eks/aws-efa-k8s-device-plugin --version {EFA_CHART_VERSION} -n kube-system -f {VALUES_FILE}"
        ),
    ]
}

/// Shell lines that install the EFA plugin from the chart (replacing eksctl's copy).
pub fn efa_install(rec: &Recommendation) -> Vec<String> {
    if rec.instance.max_efa == 0 {
        return Vec::new();
    }
    if rec.efa_dra {
        return vec![
            "# EFA comes through the EFA DRA driver (DRANET): install it as the EKS guide says (Kubernetes >= 1.34, managed or self-managed node groups; not Karpenter or Auto Mode), no EFA device plugin: https://docs.aws.amazon.com/eks/latest/userguide/device-management-efa.html".into(),
        ];
    }
    vec![
        format!(
            "# eksctl's bundled EFA plugin does not tolerate the {} taint: replace it with the chart and {VALUES_FILE}.",
            rec.instance.accelerator_resource
        ),
        format!(
            "kubectl -n kube-system delete daemonset {EKSCTL_EFA_DAEMONSET} --ignore-not-found"
        ),
        format!("helm repo add eks {EKS_CHARTS_REPO} --force-update"),
        format!(
            "helm upgrade --install aws-efa-k8s-device-plugin eks/aws-efa-k8s-device-plugin --version {EFA_CHART_VERSION} -n kube-system -f {VALUES_FILE} --wait"
        ),
    ]
}

/// Shell lines that install the accelerator's device plugin (the Karpenter route;
/// eksctl installs these itself for managed nodegroups).
pub fn accelerator_install(rec: &Recommendation) -> Vec<String> {
    if is_nvidia(rec) {
        vec![
            format!("helm repo add nvdp {NVIDIA_CHART_REPO} --force-update"),
            format!(
                "helm upgrade --install nvdp nvdp/nvidia-device-plugin --version {NVIDIA_CHART_VERSION} -n kube-system --wait"
            ),
        ]
    } else {
        vec![
            "# Neuron device plugin (whole-node pods need no Neuron scheduler extension; install it with --set scheduler.enabled=true for pods that take part of a node).".into(),
            format!(
                "helm upgrade --install neuron-helm-chart {NEURON_CHART} --version {NEURON_CHART_VERSION} -n kube-system --set npd.enabled=false --wait"
            ),
        ]
    }
}
