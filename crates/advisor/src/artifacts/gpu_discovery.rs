//! What writes the `nvidia.com/gpu.clique` label a multi-node NVLink job (GB200) keeps its
//! pods together by: NVIDIA GPU Feature Discovery (GFD). GFD reads each GPU's fabric
//! cluster UUID and clique id from NVML and labels the node
//! `nvidia.com/gpu.clique=<clusterUUID>.<cliqueId>`
//! (<https://github.com/NVIDIA/k8s-device-plugin/blob/v0.20.0/internal/lm/imex.go>; the
//! label table in
//! <https://github.com/NVIDIA/k8s-device-plugin/blob/v0.20.0/docs/gpu-feature-discovery/README.md>).
//! Neither EKS, the AL2023 NVIDIA AMI, eksctl's NVIDIA device plugin nor the NVIDIA DRA
//! driver writes it, so without GFD the job's pods, which require it, stay Pending.
//!
//! GFD is installed from the NVIDIA device plugin chart with the device plugin off
//! (eksctl installs its own) and GFD on, as that README's standalone install does
//! (`--set devicePlugin.enabled=false`). The chart brings Node Feature Discovery (its
//! `nfd` dependency, enabled with `gfd.enabled`), whose worker on each GPU node turns
//! GFD's feature file into the labels. The chart's GFD DaemonSet tolerates `nvidia.com/gpu`
//! with any value, but the NFD worker's default toleration is `nvidia.com/gpu=present`,
//! not our nodes' `nvidia.com/gpu=true` (values.yaml of chart 0.20.0): without
//! [`values`] the worker never runs on the GPU nodes and no label is written.

use serde_json::{Value, json};

use super::plugins::{NVIDIA_CHART_REPO, NVIDIA_CHART_VERSION};
use crate::recommend::Recommendation;

pub const VALUES_FILE: &str = "gpu-feature-discovery-values.yaml";
pub const NAMESPACE: &str = "gpu-feature-discovery";
pub const RELEASE: &str = "gfd";
/// The node label GFD writes and the job's pods keep together by.
pub use trainplace_engine::annotations::LABEL_CLIQUE as CLIQUE_LABEL;

/// Whether the plan needs GFD: the job's pods select on the clique label.
pub fn needed(rec: &Recommendation) -> bool {
    rec.instance.nvlink_domain_instances.is_some()
}

/// Helm values: GFD on, the device plugin off, the NFD worker tolerating the GPU taint.
pub fn values(rec: &Recommendation) -> Value {
    json!({
        "devicePlugin": {"enabled": false},
        "gfd": {"enabled": true},
        "nfd": {"worker": {"tolerations": [
            {"key": rec.instance.accelerator_resource, "operator": "Exists", "effect": "NoSchedule"},
        ]}},
    })
}

pub fn notes() -> Vec<String> {
    vec![
        format!(
            "Helm values for the NVIDIA device plugin chart {NVIDIA_CHART_VERSION} ({NVIDIA_CHART_REPO}) installed as GPU Feature Discovery only:"
        ),
        format!(
            "GFD writes {CLIQUE_LABEL} (the GPUs' NVLink fabric clique), which the job's pods require; nothing else in the plan writes it"
        ),
        "(https://github.com/NVIDIA/k8s-device-plugin/blob/v0.20.0/internal/lm/imex.go). The device plugin stays eksctl's; the NFD".into(),
        "worker that publishes GFD's labels must tolerate the GPU nodes' taint (the chart's default tolerates only nvidia.com/gpu=present).".into(),
        format!(
            "helm upgrade --install {RELEASE} nvdp/nvidia-device-plugin --version {NVIDIA_CHART_VERSION} -n {NAMESPACE} --create-namespace -f {VALUES_FILE} --wait"
        ),
    ]
}

/// Shell lines (set-up stage): install GFD.
pub fn install_lines(rec: &Recommendation, out: &mut Vec<String>) {
    if !needed(rec) {
        return;
    }
    out.push(String::new());
    out.push(format!(
        "# {{STEP}} GPU Feature Discovery ({VALUES_FILE}): it labels each GPU node {CLIQUE_LABEL}, which the job's pods require."
    ));
    out.push(format!(
        "helm repo add nvdp {NVIDIA_CHART_REPO} --force-update"
    ));
    out.push(format!(
        "helm upgrade --install {RELEASE} nvdp/nvidia-device-plugin --version {NVIDIA_CHART_VERSION} -n {NAMESPACE} --create-namespace -f {VALUES_FILE} --wait"
    ));
}

/// Shell lines (run stage, before the ComputeDomain): every GPU node of the job carries
/// the clique label, and one clique holds them all; else stop and say why.
pub fn check_lines(rec: &Recommendation, out: &mut Vec<String>) {
    if !needed(rec) {
        return;
    }
    let groups = super::eksctl::nodegroup_names(rec).join(",");
    let nodes = rec.shape.nodes;
    out.push(format!(
        "# {{STEP}} The job's {nodes} nodes carry {CLIQUE_LABEL} (written by GPU Feature Discovery) and share one clique."
    ));
    out.push(format!(
        "CLIQUES=$(kubectl get nodes -l 'trainplace.io/nodegroup in ({groups})' -o jsonpath='{{range .items[*]}}{{.metadata.labels.nvidia\\.com/gpu\\.clique}}{{\"\\n\"}}{{end}}')"
    ));
    out.push(format!(
        "if [ \"$(printf '%s\\n' \"$CLIQUES\" | grep -c .)\" -lt {nodes} ]; then echo 'fewer than {nodes} of the job'\"'\"'s nodes carry {CLIQUE_LABEL}: is GPU Feature Discovery running on them (kubectl -n {NAMESPACE} get pods)?' >&2; exit 1; fi"
    ));
    out.push(
        "if [ \"$(printf '%s\\n' \"$CLIQUES\" | grep . | sort -u | wc -l)\" -gt 1 ]; then echo \"the job's nodes are in more than one NVLink clique: $(printf '%s\\n' \"$CLIQUES\" | sort | uniq -c | tr '\\n' ' ')\" >&2; exit 1; fi".into(),
    );
    out.push(String::new());
}
