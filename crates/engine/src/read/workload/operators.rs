//! Pod-template sites of the core training operators: JobSet, the Kubeflow training
//! operator's PyTorchJob, MPIJob, PaddleJob, TFJob, XGBoostJob and JAXJob, and
//! LeaderWorkerSet.

use serde_json::Value;

use super::{Kind, Knob, Site, active_pods, count_at, site};
use crate::error::ObjectError;
use crate::read::annotations::LWS_GROUP_KEY;
use crate::read::json::Lookup as _;
use crate::read::json::{escape, items};

/// The workload's own job label, `label: NAME`, when it has a name.
fn id(name: Option<&str>, label: &str) -> Option<(String, String)> {
    name.map(|n| (label.to_string(), n.to_string()))
}

/// A JobSet: one site per replicated Job, of `replicas` x the Job's active pods.
pub(super) fn jobset(obj: &Value, name: Option<&str>) -> Result<Vec<Site>, ObjectError> {
    let id = |label: &str| id(name, label);
    let mut out = Vec::new();
    for i in 0..items(obj, &["spec", "replicatedJobs"]).len() {
        let base = format!("/spec/replicatedJobs/{i}");
        out.push(site(
            obj,
            format!("{base}/template/spec/template"),
            id("jobset.sigs.k8s.io/jobset-name"),
            vec![
                count_at(obj, &format!("{base}/replicas"), 1)?,
                active_pods(obj, &format!("{base}/template/spec"))?,
            ],
        ));
    }
    one_identity(&mut out, id("jobset.sigs.k8s.io/jobset-name"));
    Ok(out)
}

/// A Kubeflow training operator job: one site per replica spec (Master, Worker, ...).
pub(super) fn kubeflow(
    obj: &Value,
    kind: Kind,
    name: Option<&str>,
) -> Result<Vec<Site>, ObjectError> {
    let id = |label: &str| id(name, label);
    let specs = match kind {
        Kind::PyTorchJob => "pytorchReplicaSpecs",
        Kind::PaddleJob => "paddleReplicaSpecs",
        // https://github.com/kubeflow/trainer/tree/release-1.9/pkg/apis/kubeflow.org/v1
        Kind::TfJob => "tfReplicaSpecs",
        Kind::XgboostJob => "xgbReplicaSpecs",
        Kind::JaxJob => "jaxReplicaSpecs",
        _ => "mpiReplicaSpecs",
    };
    let mut out = Vec::new();
    if let Some(map) = obj
        .lookup(&format!("/spec/{specs}"))
        .and_then(Value::as_object)
    {
        for role in map.keys() {
            let base = format!("/spec/{specs}/{}", escape(role));
            let mut pods = count_at(obj, &format!("{base}/replicas"), 1)?;
            // An elastic PyTorchJob's Workers grow to `elasticPolicy.maxReplicas` (the
            // operator scales them through an HPA): the job is judged at its largest.
            // https://github.com/kubeflow/trainer/blob/release-1.9/pkg/apis/kubeflow.org/v1/pytorch_types.go
            if kind == Kind::PyTorchJob && role == "Worker" {
                let max = count_at(obj, "/spec/elasticPolicy/maxReplicas", 0)?;
                if max.value > pods.value {
                    pods = max;
                }
            }
            out.push(site(
                obj,
                format!("{base}/template"),
                id("training.kubeflow.org/job-name"),
                vec![pods],
            ));
        }
    }
    one_identity(&mut out, id("training.kubeflow.org/job-name"));
    for s in &mut out {
        s.hints.operator_nnodes = kind == Kind::PyTorchJob;
    }
    Ok(out)
}

/// A LeaderWorkerSet: the leader and worker templates of one group.
pub(super) fn leader_worker_set(obj: &Value, name: Option<&str>) -> Result<Vec<Site>, ObjectError> {
    let id = |label: &str| id(name, label);
    // Replicas are independent groups (model replicas), not one job: the job is
    // one group of `size` pods (the leader and size - 1 workers), and zone and
    // host affinity are keyed per group.
    let size = count_at(obj, "/spec/leaderWorkerTemplate/size", 1)?;
    let has_leader = obj
        .lookup("/spec/leaderWorkerTemplate/leaderTemplate")
        .is_some();
    let ident = id("leaderworkerset.sigs.k8s.io/name");
    let mut out = Vec::new();
    let workers = if has_leader {
        out.push(site(
            obj,
            "/spec/leaderWorkerTemplate/leaderTemplate".into(),
            ident.clone(),
            Vec::new(),
        ));
        Knob {
            pointer: size.pointer.clone(),
            value: size.value.saturating_sub(1),
        }
    } else {
        size
    };
    out.push(site(
        obj,
        "/spec/leaderWorkerTemplate/workerTemplate".into(),
        ident,
        vec![workers],
    ));
    one_identity(&mut out, id("leaderworkerset.sigs.k8s.io/name"));
    for s in &mut out {
        s.hints.group_label = Some(LWS_GROUP_KEY.to_string());
    }
    Ok(out)
}

/// When a workload's templates carry different job labels of their own (a Master
/// labelled one way, the Workers another), they would be held apart: every template
/// is keyed on the workload's own label instead.
fn one_identity(sites: &mut [Site], workload: Option<(String, String)>) {
    let Some(workload) = workload else {
        return;
    };
    let first = sites.first().and_then(|s| s.hints.identity.clone());
    if sites.iter().any(|s| s.hints.identity != first) {
        for s in sites {
            s.hints.identity = Some(workload.clone());
        }
    }
}
