//! GPU health telemetry on the job's nodes: NVIDIA's DCGM exporter (GPU errors, XID,
//! ECC, thermals, NVLink counters as Prometheus metrics), installed from NVIDIA's Helm
//! chart, pinned (`dcgm-exporter` 4.8.2, DCGM 4.5.3,
//! <https://github.com/NVIDIA/dcgm-exporter/blob/main/deployment/Chart.yaml>; repository
//! <https://nvidia.github.io/dcgm-exporter/helm-charts>, README).
//!
//! The chart's DaemonSet tolerates only the control-plane taint and selects no nodes
//! by default (`deployment/values.yaml`: `tolerations`, `nodeSelector`); our GPU nodes
//! are tainted with the accelerator resource, so the values tolerate that taint and
//! select the job's instance type. The chart's ServiceMonitor is on by default and
//! needs the Prometheus Operator's CRD: it is off here (turn it on where that operator
//! runs).
//!
//! Trainium has no DCGM: Neuron's telemetry is `neuron-monitor` (aws-neuronx-tools,
//! <https://awsdocs-neuron.readthedocs-hosted.com/en/latest/tools/neuron-sys-tools/neuron-monitor-user-guide.html>);
//! the script says it is skipped and where to get it. Node faults on both are the EKS
//! node monitoring agent's (`eksctl.rs`), which node auto repair acts on.

use serde_json::{Value, json};

use crate::recommend::Recommendation;

pub const DCGM_CHART_REPO: &str = "https://nvidia.github.io/dcgm-exporter/helm-charts";
pub const DCGM_CHART_VERSION: &str = "4.8.2";
pub const DCGM_VALUES_FILE: &str = "dcgm-exporter-values.yaml";
pub const DCGM_NAMESPACE: &str = "gpu-monitoring";
pub const NEURON_MONITOR_GUIDE: &str = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/tools/neuron-sys-tools/neuron-monitor-user-guide.html";

/// Helm values: on the job's nodes (instance type), through their taints, no
/// ServiceMonitor.
pub fn dcgm_values(rec: &Recommendation) -> Value {
    let mut tolerations = vec![
        json!({"key": rec.instance.accelerator_resource, "operator": "Exists", "effect": "NoSchedule"}),
    ];
    if rec.instance.max_efa > 0 {
        tolerations.push(
            json!({"key": super::pod::RES_EFA, "operator": "Exists", "effect": "NoSchedule"}),
        );
    }
    json!({
        "nodeSelector": {"node.kubernetes.io/instance-type": rec.instance.name},
        "tolerations": tolerations,
        "serviceMonitor": {"enabled": false},
    })
}

pub fn dcgm_notes(rec: &Recommendation) -> Vec<String> {
    vec![
        format!("Helm values for NVIDIA dcgm-exporter {DCGM_CHART_VERSION} ({DCGM_CHART_REPO}): GPU health metrics on port 9400 of every {} node", rec.instance.name),
        format!("the chart tolerates only the control-plane taint by default: these values tolerate the nodes' {} taint and select the instance type", rec.instance.accelerator_resource),
        "serviceMonitor off: it needs the Prometheus Operator's CRD; set serviceMonitor.enabled=true where it runs".into(),
    ]
}

/// Shell lines (set-up stage) installing the exporter, or saying why not (Trainium).
pub fn install_lines(rec: &Recommendation, out: &mut Vec<String>) {
    out.push(String::new());
    if !super::plugins::is_nvidia(rec) {
        out.push(format!("# {{STEP}} GPU health: DCGM is NVIDIA's and does not apply to {}; Neuron's telemetry is neuron-monitor ({NEURON_MONITOR_GUIDE}), not installed here. Node faults are the EKS node monitoring agent's (node auto repair).", rec.instance.name));
        return;
    }
    out.push(format!("# {{STEP}} GPU health: NVIDIA DCGM exporter {DCGM_CHART_VERSION} on the {} nodes ({DCGM_VALUES_FILE}); idempotent.", rec.instance.name));
    out.push(format!(
        "helm repo add gpu-helm-charts {DCGM_CHART_REPO} --force-update"
    ));
    out.push(format!("helm upgrade --install dcgm-exporter gpu-helm-charts/dcgm-exporter --version {DCGM_CHART_VERSION} -n {DCGM_NAMESPACE} --create-namespace -f {DCGM_VALUES_FILE}"));
}
