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

/// The pass threshold (GB/s) and where it comes from.
pub fn threshold(parts: &PodParts<'_>) -> Option<(f64, String)> {
    let p = &parts.rec.instance;
    Expectations::embedded()
        .lookup(&p.name, 1, Some(p.accelerators))
        .map(|e| {
            let source = if e.source.starts_with(e.basis.label()) {
                e.source.clone()
            } else {
                format!("{}: {}", e.basis.label(), e.source)
            };
            (e.low, source)
        })
}

/// The pod's script: run all_reduce_perf, print its peak out-of-place busbw (column 8
/// of a data row), fail below the threshold.
fn script(parts: &PodParts<'_>) -> String {
    let gpus = parts.rec.instance.accelerators;
    let min = threshold(parts).map_or(0.0, |(low, _)| low);
    format!(
        "{ALL_REDUCE_PERF} -b 256M -e 4G -f 2 -g {gpus} -c 1 -n 50 | tee /tmp/nccl.log; \
         awk -v min={min} -v node=\"$NODE_NAME\" '$1 ~ /^[0-9]+$/ && NF >= 12 {{ if ($8 + 0 > peak) peak = $8 + 0 }} \
         END {{ printf \"node %s: peak busbw %.1f GB/s (pass at %.1f)\\n\", node, peak, min; exit (peak > 0 && peak >= min) ? 0 : 1 }}' /tmp/nccl.log"
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
    let pass = match threshold(parts) {
        Some((low, source)) => {
            format!("a pod fails when its peak busbw is below {low} GB/s ({source})")
        }
        None => {
            "no single-node busbw figure for this type: only nccl-tests' data check (-c 1) judges"
                .into()
        }
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
