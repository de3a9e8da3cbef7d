//! Pods that take part of a node: ranks that could share NVLink talk over the network.

use super::input::{RuleInput, opted_in};
use super::words::{count, count64};
use crate::facts::policy::Mode;
use crate::judge::classify::Shape;
use crate::judge::finding::{Finding, Rule};
use crate::read::annotations::{ALLOW_PARTIAL_NODE, RES_NVIDIA_GPU, RESHAPE};
use trainplace_catalog::InstanceProfile;
use trainplace_catalog::bandwidth::Expectations;

/// The measured cost of the wrong layout (docs/measurements.md: 4 x H200, NCCL all-reduce busbw).
/// What ranks on one node lose when they are separate pods, for the path they take:
/// with EFA, NET/Libfabric with GPUDirect RDMA over the pod's share of the node's
/// interfaces (the field notes' measurement of that path); without, TCP (the all-reduce
/// measurement of that path).
pub(crate) fn path_cost(inst: &InstanceProfile, efa: u32) -> String {
    let per_interface = inst
        .network_gbps
        .filter(|_| inst.max_efa > 0)
        .map(|n| f64::from(n) / f64::from(inst.max_efa));
    let inside = inside_node(inst);
    match per_interface {
        Some(gbps) if efa > 0 => {
            let share = gbps * f64::from(efa);
            format!(
                "ranks on one node talk over EFA (NET/Libfabric with GPUDirect RDMA, {efa} of the node's {} interfaces: {share:.0} Gbps, {:.0} GB/s, per pod) instead of {}{inside}: tensor- and pipeline-parallel traffic inside the node and small messages lose the most (the runs: docs/measurements.md)",
                inst.max_efa,
                share / 8.0,
                inst.intra_node
            )
        }
        _ => format!(
            "ranks on one node talk over TCP instead of {}{inside} ({MEASURED})",
            inst.intra_node
        ),
    }
}

/// What one node of `inst` reaches inside, from the expected-busbw table (a measured
/// row for its own GPU count, or the estimate and its formula), when the table has it.
fn inside_node(inst: &InstanceProfile) -> String {
    Expectations::shared()
        .lookup(&inst.name, 1, Some(inst.accelerators))
        .map(|e| {
            format!(
                " ({:.0}-{:.0} GB/s all-reduce busbw inside one {}, {})",
                e.low,
                e.high,
                inst.name,
                // The figure and its basis; the range's margins are in the table.
                e.cited().split(';').next().unwrap_or_default()
            )
        })
        .unwrap_or_default()
}

pub const MEASURED: &str = "measured on another host, 4 x H200: one pod with all GPUs reached 338.7 GB/s all-reduce over NVLink, 1-GPU pods ~3.3 GB/s over TCP, with or without hostIPC; docs/measurements.md";

pub(super) fn partial_node(input: &RuleInput<'_>, inst: &InstanceProfile, out: &mut Vec<Finding>) {
    let s = input.shape;
    if s.per_pod == 0 || (s.per_pod >= inst.accelerators && !s.shared) {
        return;
    }
    let site = &input.view.base;
    let g = inst.accelerators;
    let what = device_word(s);
    let what = what.as_str();
    if !s.multi_pod {
        out.push(Finding {
            rule: Rule::PartialNode,
            mode: Mode::Warn,
            site: site.clone(),
            found: format!(
                "a single-pod job uses {} of {g} on {}.",
                count(s.per_pod, what),
                inst.name
            ),
            fix: format!(
                "fine for one pod; for more pods, use {} per pod.",
                count(g, what)
            ),
            opt_in: None,
            why: None,
        });
        return;
    }
    let pods_text = match s.pods {
        Some(n) => format!("{} x {}", count(n, "pod"), count(s.per_pod, what)),
        None => format!("pods of {}", count(s.per_pod, what)),
    };
    let recommended = recommended(s, inst, what);
    let found = format!(
        "{pods_text} on {} ({g} per node) split ranks that could share a node across pods.",
        inst.name
    );
    out.extend(opted_in(
        Finding {
            rule: Rule::PartialNode,
            mode: input.eff.mode_partial_node(),
            site: site.clone(),
            found,
            fix: format!("use {recommended}."),
            opt_in: Some(ALLOW_PARTIAL_NODE),
            why: Some(format!("{}.", path_cost(inst, s.efa))),
        },
        input.partial_opt_in,
        input.eff.policy,
    ));
}

/// What the pod counts in: slices of a shared device, GPUs, or other accelerators.
fn device_word(s: &Shape<'_>) -> String {
    if s.shared {
        format!("{} slice", s.accel_resource)
    } else if s.accel_resource == RES_NVIDIA_GPU {
        "GPU".to_string()
    } else {
        "accelerator".to_string()
    }
}

/// The layout to use instead: whole nodes, or one node when the job fits on it.
fn recommended(s: &Shape<'_>, inst: &InstanceProfile, what: &str) -> String {
    let g = inst.accelerators;
    match s.pods {
        _ if s.shared => format!(
            "one pod per node with all {g} whole devices ({} instead of slices)",
            inst.accelerator_resource
        ),
        Some(n) => {
            // u64: pods x GPUs per pod cannot overflow it.
            let total = u64::from(n) * u64::from(s.per_pod);
            let g64 = u64::from(g);
            if total <= g64 {
                format!(
                    "1 pod x {} on one node, so every rank talks over NVLink",
                    count64(total, what)
                )
            } else if total.is_multiple_of(g64) {
                format!(
                    "{} x {} (annotation {RESHAPE}: \"true\" rewrites it)",
                    count64(total / g64, "pod"),
                    count(g, what)
                )
            } else {
                format!(
                    "{} x {} ({} do not fill whole nodes; this rounds up)",
                    count64(total.div_ceil(g64), "pod"),
                    count(g, what),
                    count64(total, what)
                )
            }
        }
        None => format!("one pod per node with all {}", count(g, what)),
    }
}
