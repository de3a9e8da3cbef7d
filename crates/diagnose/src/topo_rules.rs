//! What the topology matrices say about the layout: NVLink missing where the type has it,
//! a pod holding part of a node, GPU pairs that go through the CPU. The instance type is
//! the user's flag, else the one type whose GPUs `nvidia-smi -L` names.

use crate::catalog::{self, Instance};
use crate::finding::{Finding, Severity};
use crate::options::Options;
use crate::topo::TopoSummary;

/// Findings for every matrix; the same finding on several matrices is one finding with
/// each matrix's header as evidence.
pub(crate) fn check(summaries: &[TopoSummary], opts: &Options) -> Vec<Finding> {
    let mut findings: Vec<Finding> = Vec::new();
    for summary in summaries {
        let instance = match opts.instance_type {
            Some(_) => opts
                .instance()
                .map(|instance| (instance, instance.name.clone())),
            None => from_gpu_model(summary),
        };
        for finding in check_one(summary, instance) {
            match findings
                .iter_mut()
                .find(|f| f.rule == finding.rule && f.message == finding.message)
            {
                Some(known) => {
                    *known = known.clone().with_evidence(finding.evidence);
                    known.more_evidence += finding.more_evidence;
                }
                None => findings.push(finding),
            }
        }
    }
    findings
}

/// The one catalog type with this many GPUs of this model, named with where it came from.
fn from_gpu_model(summary: &TopoSummary) -> Option<(&'static Instance, String)> {
    let model = summary.gpu_model.as_deref()?;
    let gpus = u32::try_from(summary.gpus).ok().filter(|gpus| *gpus > 0)?;
    match catalog::by_device(model, Some(gpus)).as_slice() {
        [only] => Some((
            *only,
            format!("{} (from the GPU name `{model}`)", only.name),
        )),
        _ => None,
    }
}

fn check_one(summary: &TopoSummary, instance: Option<(&Instance, String)>) -> Vec<Finding> {
    let mut findings = Vec::new();
    let evidence = summary.header_line.clone();
    if let Some((instance, name)) = instance {
        if instance.has_nvlink() && !summary.links.is_empty() && !summary.nvlink {
            findings.push(
                Finding::new(
                    Severity::Warning,
                    "topo-nvlink-missing",
                    format!("{name} has NVSwitch NVLink, but no GPU pair shows NV#: NVLink is not usable"),
                    "Check NVIDIA Fabric Manager runs on the node (nvidia-smi -q | grep -i fabric) \
                     and that the driver matches it."
                        .into(),
                )
                .with_evidence(evidence.clone()),
            );
        }
        if summary.gpus > 0 && (summary.gpus as u32) < instance.gpus {
            findings.push(
                Finding::new(
                    Severity::Warning,
                    "topo-partial-node",
                    format!(
                        "this pod sees {} of the {} GPUs of {name}: its ranks reach the other GPUs only over the network",
                        summary.gpus, instance.gpus
                    ),
                    format!("Request nvidia.com/gpu: {} (the whole node) in one pod per node.", instance.gpus),
                )
                .with_evidence(evidence.clone()),
            );
        }
    }
    if !summary.links.is_empty() && !summary.p2p_possible {
        findings.push(
            Finding::new(
                Severity::Info,
                "topo-p2p-through-cpu",
                format!(
                    "GPU pairs over {} go through the CPU: NCCL picks SHM for them by default",
                    summary.worst_link.clone().unwrap_or_default()
                ),
                "Expected on PCIe-only types; keep all GPUs of a node in one pod so they use SHM, not the network."
                    .into(),
            )
            .with_evidence(evidence),
        );
    }
    findings
}
