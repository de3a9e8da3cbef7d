//! A per-node NCCL check before the job: an Indexed Job of one pod per GPU node, in
//! the job's layout (every GPU and EFA interface of the node, one pod per node, the
//! same selectors), each running nccl-tests `all_reduce_perf` over its node's GPUs in
//! one process (`-g`), NVLink or PCIe only. A pod fails when its peak out-of-place
//! busbw is below the low end of the single-node range in the engine's
//! expected-bandwidth table (`crates/catalog/data/expected-busbw.yaml`, the range
//! `trainplace diagnose` judges by), so one slow or broken node is named before the
//! multi-node check and the job spend the block's hours on it. Types without a
//! single-node row are judged by nccl-tests' own data check only (`-c 1`: a wrong
//! result fails the run).

use serde_json::{Value, json};
use trainplace_catalog::bandwidth::Expectations;

use super::pod::PodParts;
use crate::images::{ALL_REDUCE_PERF, GPU_IMAGE};
use crate::recommend::Recommendation;

pub const NODE_CHECK_FILE: &str = "nccl-node-check.yaml";
/// The check on the Karpenter route: the nodes `job-*-karpenter.yaml` selects (the
/// plan's NodePools, reserved nodes for reserved capacity), with its pods' Karpenter
/// settings (no hugepages, not disrupted), named apart from the eksctl route's, which
/// selects the eksctl nodegroups' labels.
pub const KARPENTER_NODE_CHECK_FILE: &str = "nccl-node-check-karpenter.yaml";

/// The check's file on the plan's route.
pub fn file(rec: &Recommendation) -> &'static str {
    if super::on_karpenter(rec) {
        KARPENTER_NODE_CHECK_FILE
    } else {
        NODE_CHECK_FILE
    }
}

/// The Karpenter file's extra header line.
pub fn karpenter_note(rec: &Recommendation) -> String {
    format!(
        "the Karpenter route (karpenter.yaml): on the nodes {} selects; kubectl apply -f {KARPENTER_NODE_CHECK_FILE} before that job (aws-cli.sh run does)",
        super::job_file(rec)
    )
}

pub fn name(job: &str) -> String {
    format!("{job}-node-check")
}

/// A pass threshold (GB/s) and where it comes from.
#[derive(Debug, Clone, PartialEq)]
pub struct Floor {
    pub low: f64,
    pub source: String,
}

/// The node's floors: one, or one per NVLink SHARP state where the table has rows for
/// each (a healthy 8 x H100 node reaches about 370 GB/s without NVLS and 480 with it, so
/// one floor would pass a slow node or fail a healthy one). The pod reads the state
/// from NCCL's log.
#[derive(Debug, Clone, PartialEq)]
pub struct Floors {
    /// NVLS off, or whatever the state when the table does not depend on it.
    pub off: Option<Floor>,
    /// NVLS on, when the table has a row for it.
    pub on: Option<Floor>,
    /// The floor is for NVLS off only, and NVLS on has none (GB200).
    pub off_only: bool,
}

pub fn floors(parts: &PodParts<'_>) -> Floors {
    let p = &parts.rec.instance;
    let table = Expectations::shared();
    let floor = |nvls| {
        table
            .lookup_nvls(&p.name, 1, Some(p.accelerators), nvls)
            .map(|e| {
                (
                    e.nvls,
                    Floor {
                        low: e.low,
                        source: e.cited(),
                    },
                )
            })
    };
    let off = floor(Some(false));
    let on = floor(Some(true)).filter(|(state, _)| *state == Some(true));
    Floors {
        off_only: on.is_none() && off.as_ref().is_some_and(|(state, _)| *state == Some(false)),
        off: off.map(|(_, f)| f),
        on: on.map(|(_, f)| f),
    }
}

/// The pod's script: run all_reduce_perf with NCCL's INIT log (which says whether NVLS
/// is in use: `NVLS multicast support is [not] available on dev N`), print its peak
/// out-of-place busbw (column 8 of a data row), fail below the floor for that state.
fn script(parts: &PodParts<'_>) -> String {
    let gpus = parts.rec.instance.accelerators;
    let f = floors(parts);
    let off = f.off.as_ref().map_or(0.0, |f| f.low);
    let on = f.on.as_ref().map_or(off, |f| f.low);
    format!(
        "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV {ALL_REDUCE_PERF} -b 256M -e 4G -f 2 -g {gpus} -c 1 -n 50 | tee /tmp/nccl.log; \
         awk -v off={off} -v on={on} -v node=\"$NODE_NAME\" '/NVLS multicast support is available/ {{ yes = 1 }} /NVLS multicast support is not available|NCCL_NVLS_ENABLE set by environment to 0/ {{ no = 1 }} \
         $1 ~ /^[0-9]+$/ && NF >= 12 {{ if ($8 + 0 > peak) peak = $8 + 0 }} \
         END {{ nvls = yes && !no; min = nvls ? on : off; printf \"node %s: NVLS %s, peak busbw %.1f GB/s (pass at %.1f)\\n\", node, nvls ? \"on\" : \"off\", peak, min; exit (peak > 0 && peak >= min) ? 0 : 1 }}' /tmp/nccl.log"
    )
}

pub fn node_check(parts: &PodParts<'_>) -> Value {
    let nodes = parts.rec.shape.nodes;
    let env =
        [json!({"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}})];
    let container = parts.device_container("nccl", GPU_IMAGE, &["sh", "-c", &script(parts)], &env);
    let mut template = parts.template(container);
    template["spec"]["restartPolicy"] = json!("Never");
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name(parts.job()), "namespace": parts.rec.request.names.namespace},
        "spec": {
            "completionMode": "Indexed",
            "completions": nodes,
            "parallelism": nodes,
            "backoffLimitPerIndex": 0,
            "ttlSecondsAfterFinished": 86400,
            "template": template,
        },
    })
}

pub fn notes(parts: &PodParts<'_>) -> Vec<String> {
    let f = floors(parts);
    let pass = match (&f.off, &f.on) {
        (Some(off), Some(on)) => format!(
            "a pod fails when its peak busbw is below {} GB/s with NVLink SHARP ({}) or {} GB/s without ({}); it reads the state from NCCL's log",
            on.low, on.source, off.low, off.source
        ),
        (Some(off), None) if f.off_only => format!(
            "a pod fails when its peak busbw is below {} GB/s ({}); with NVLink SHARP in use there is no published figure for this type, so the same floor judges, and a slow node may pass",
            off.low, off.source
        ),
        (Some(off), None) => {
            format!(
                "a pod fails when its peak busbw is below {} GB/s ({})",
                off.low, off.source
            )
        }
        _ => "no single-node busbw figure for this type: only nccl-tests' data check (-c 1) judges"
            .into(),
    };
    vec![
        format!(
            "Per-node NCCL check: one pod per {} node (Indexed Job), all_reduce_perf over the node's {} GPUs in one process, before the multi-node check and the job",
            parts.rec.instance.name, parts.rec.instance.accelerators
        ),
        pass,
        "a failed index names the node in its log (`node NAME: peak busbw ...`): cordon it and let the nodegroup replace it".into(),
    ]
}

/// Shell lines (run stage): apply, wait (at most an hour) until the Job is Complete or
/// Failed (an Indexed Job with a failed index is marked Failed once every index has
/// finished), print each node's figure, stop on a failure; delete the Job on success so its pods do not
/// hold the nodes.
pub fn run_lines(rec: &Recommendation, out: &mut Vec<String>) {
    let ns = &rec.request.names.namespace;
    let job = name(&rec.request.names.job);
    let file = file(rec);
    out.push(format!(
        "# {{STEP}} Check each GPU node alone before they work together: {file}, one pod per node."
    ));
    out.push(format!(
        "kubectl -n {ns} delete job {job} --ignore-not-found --wait"
    ));
    out.push(format!("kubectl apply -f {file}"));
    out.push("TRIES=0".into());
    out.push(format!("until kubectl -n {ns} get job {job} -o jsonpath='{{.status.conditions[*].type}}' | grep -qE 'Complete|Failed'; do TRIES=$((TRIES + 1)); if [ \"$TRIES\" -gt 360 ]; then echo 'the per-node check did not finish in 60 minutes' >&2; exit 1; fi; sleep 10; done"));
    out.push(format!(
        "kubectl -n {ns} logs -l job-name={job} --tail=1 --prefix"
    ));
    out.push(format!("if [ -n \"$(kubectl -n {ns} get job {job} -o jsonpath='{{.status.failedIndexes}}')\" ]; then echo 'a GPU node failed its NCCL check (its log line above): replace it before training' >&2; exit 1; fi"));
    out.push(format!("kubectl -n {ns} delete job {job} --wait"));
    out.push(String::new());
}
