//! Where the controllers beyond the core training operators keep their pod templates,
//! as CEL `sites` entries (the engine's `workload::controllers`): KubeRay's head and
//! worker groups, Volcano tasks, HyperPod replica specs and the replicated jobs of
//! Kubeflow Trainer's training runtimes. Each entry is `{t, n, u, f, id}` as in
//! `sites`.

use crate::read::annotations::{
    LABEL_HYPERPOD_JOB, LABEL_RAY_CLUSTER, LABEL_RAY_NODE, LABEL_RAY_ORIGIN, LABEL_REPLICATED_JOB,
    LABEL_VOLCANO_JOB, TRAINING,
};
use crate::read::workload::TRAINER_NODE_JOB;
use crate::vap::ident::{template_id, workload_id};
use crate::vap::text::{fill, lit};

/// `maxReplicas`' CRD default (2^31 - 1): no bound.
const UNBOUNDED: i64 = i32::MAX as i64;

/// `trains`: false only for a Ray cluster that serves models (a RayService, or the
/// RayCluster a RayService made: the origin label and the RayService as controller)
/// unless the owner annotates `trainplace.io/training: "true"`.
pub(crate) fn trains() -> String {
    let origin = lit(LABEL_RAY_ORIGIN);
    let tr = lit(TRAINING);
    format!(
        "!(object.kind == 'RayService' || (has(object.metadata.labels) && {origin} in object.metadata.labels && object.metadata.labels[{origin}] == 'RayService' && has(object.metadata.ownerReferences) && object.metadata.ownerReferences.exists(o, has(o.controller) && o.controller == true && has(o.kind) && o.kind == 'RayService')))\n|| (has(object.metadata.annotations) && {tr} in object.metadata.annotations && object.metadata.annotations[{tr}] == 'true')"
    )
}

/// A Ray template's job label: training clusters as `workload::site` (a named
/// RayCluster's `ray.io/cluster`, else every Ray node); serving ones only a
/// recognised job label already on the template.
fn ray_id(t: &str) -> String {
    let fallback = format!(
        "(object.kind == 'RayCluster' && has(object.metadata.name) ? [{}, object.metadata.name] : [{}, 'yes'])",
        lit(LABEL_RAY_CLUSTER),
        lit(LABEL_RAY_NODE)
    );
    format!(
        "(variables.trains ? {} : {})",
        template_id(t, "variables.jobLabels", &fallback),
        template_id(t, "variables.podJobLabels", "[]")
    )
}

/// KubeRay: the head (one pod) and each worker group: `replicas` held between
/// `minReplicas` and `maxReplicas`, times `numOfHosts`; with the in-tree autoscaler,
/// `maxReplicas` x `numOfHosts`, and an unknown count (`u`) when `maxReplicas` is
/// unbounded (then `n` is the size it starts at).
fn ray(c: &str, field: &str) -> String {
    let head = format!("{c}.headGroupSpec");
    let worker = fill(
        "{'t': g.template,
  'n': (@AUTO@ ? (@MAX@ == @UNB@ ? @NOW@ : @MAX@) : (@NOW@ > @MAX@ ? @MAX@ : @NOW@)) * (has(g.numOfHosts) ? g.numOfHosts : 1),
  'u': @AUTO@ && @MAX@ == @UNB@,
  'f': '@F@workerGroupSpecs[' + (has(g.groupName) ? g.groupName : '') + '].template.spec',
  'id': @ID@}",
        &[
            (
                "AUTO",
                &format!(
                    "(has({c}.enableInTreeAutoscaling) && {c}.enableInTreeAutoscaling == true)"
                ),
            ),
            ("NOW", "[has(g.replicas) ? g.replicas : 0, has(g.minReplicas) ? g.minReplicas : 0].max()"),
            // Before `UNB`: `MAX` holds `@UNB@`.
            ("MAX", "(has(g.maxReplicas) ? g.maxReplicas : @UNB@)"),
            ("UNB", &UNBOUNDED.to_string()),
            ("F", field),
            ("ID", &ray_id("g.template")),
        ],
    );
    format!(
        "(has({head}) && has({head}.template) ? [{{'t': {head}.template, 'n': 1, 'u': false, 'f': '{field}headGroupSpec.template.spec', 'id': {hid}}}] : [])
 + (has({c}.workerGroupSpecs) ? {c}.workerGroupSpecs.filter(g, has(g.template)).map(g, {worker}) : [])",
        hid = ray_id(&format!("{head}.template")),
    )
}

/// The Ray kinds: a RayCluster's spec, a RayJob's `rayClusterSpec` (none when it
/// submits to an existing cluster), a RayService's `rayClusterConfig`.
pub(crate) fn ray_kinds() -> String {
    format!(
        "object.kind == 'RayCluster' ? (has(object.spec) ? {rc} : [])\n: object.kind == 'RayJob' ? (has(object.spec) && has(object.spec.rayClusterSpec) ? {rj} : [])\n: (has(object.spec) && has(object.spec.rayClusterConfig) ? {rs} : [])",
        rc = ray("object.spec", "spec."),
        rj = ray("object.spec.rayClusterSpec", "spec.rayClusterSpec."),
        rs = ray("object.spec.rayClusterConfig", "spec.rayClusterConfig."),
    )
}

/// Volcano: each `tasks[]` entry makes `replicas` pods (default 0).
pub(crate) fn volcano() -> String {
    format!(
        "(has(object.spec.tasks) ? object.spec.tasks.filter(r, has(r.template)).map(r, {{'t': r.template, 'n': has(r.replicas) ? r.replicas : 0, 'u': false, 'f': 'spec.tasks[' + (has(r.name) ? r.name : '') + '].template.spec', 'id': {id}}}) : [])",
        id = workload_id("r.template", LABEL_VOLCANO_JOB)
    )
}

/// HyperPodPyTorchJob: `spec.replicaSpecs[]`, `replicas` pods each (default 1).
pub(crate) fn hyperpod() -> String {
    format!(
        "(has(object.spec.replicaSpecs) ? object.spec.replicaSpecs.filter(r, has(r.template)).map(r, {{'t': r.template, 'n': has(r.replicas) ? r.replicas : 1, 'u': false, 'f': 'spec.replicaSpecs[' + (has(r.name) ? r.name : '') + '].template.spec', 'id': {id}}}) : [])",
        id = workload_id("r.template", LABEL_HYPERPOD_JOB)
    )
}

/// TrainingRuntime / ClusterTrainingRuntime: the JobSet template's replicated jobs;
/// the `node` job runs `mlPolicy.numNodes` pods when the runtime sets it. Pods carry
/// their replicated job's name.
pub(crate) fn runtime() -> String {
    let js = "object.spec.template.spec";
    let t = "r.template.spec.template";
    let node = lit(TRAINER_NODE_JOB);
    let fallback = format!(
        "(has(r.name) && r.name != '' ? [{}, r.name] : [])",
        lit(LABEL_REPLICATED_JOB)
    );
    format!(
        "(has(object.spec.template) && has({js}) && has({js}.replicatedJobs) ? {js}.replicatedJobs.filter(r, has(r.template) && has(r.template.spec) && has(r.template.spec.template)).map(r, {{'t': {t},
  'n': has(r.name) && r.name == {node} && has(object.spec.mlPolicy) && has(object.spec.mlPolicy.numNodes) ? object.spec.mlPolicy.numNodes : (has(r.replicas) ? r.replicas : 1) * {active},
  'u': false, 'f': 'spec.template.spec.replicatedJobs[' + (has(r.name) ? r.name : '') + '].template.spec.template.spec', 'id': {id}}}) : [])",
        active = crate::vap::ident::active_pods("r.template.spec"),
        id = template_id(t, "variables.jobLabels", &fallback)
    )
}
