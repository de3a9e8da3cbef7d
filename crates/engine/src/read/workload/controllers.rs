//! Pod-template sites of the controllers beyond the core training operators: KubeRay
//! (RayCluster, RayJob, RayService), Volcano Jobs, SageMaker HyperPod's
//! HyperPodPyTorchJob and Kubeflow Trainer's training runtimes. Each names the label
//! its controller puts on the pods, so zone and host affinity select the job's pods.

use serde_json::Value;

use super::{Kind, Knob, Site, active_pods, count_at, site};
use crate::error::ObjectError;
use crate::read::annotations::{
    LABEL_HYPERPOD_JOB, LABEL_JOBSET_NAME, LABEL_RAY_CLUSTER, LABEL_RAY_ORIGIN,
    LABEL_REPLICATED_JOB, LABEL_VOLCANO_JOB, RAY_NODE, TRAINING,
};
use crate::read::json::Lookup as _;
use crate::read::json::{items, str_at};

/// Where a Ray kind keeps its RayCluster spec.
fn ray_cluster_spec(kind: Kind) -> &'static str {
    match kind {
        Kind::RayJob => "/spec/rayClusterSpec",
        Kind::RayService => "/spec/rayClusterConfig",
        _ => "/spec",
    }
}

/// `maxReplicas`' CRD default: no bound.
const UNBOUNDED: u32 = i32::MAX as u32;

/// KubeRay: the head group and each worker group. A worker group makes
/// `replicas` (held between `minReplicas` and `maxReplicas`) x `numOfHosts` pods; with
/// the in-tree autoscaler on, it may grow to `maxReplicas`, so the job is judged there
/// (unbounded when `maxReplicas` is unset or the CRD's default, 2^31 - 1).
/// https://github.com/ray-project/kuberay/blob/feeaf72facab4881ba2b179248bb67315634e229/ray-operator/apis/ray/v1/raycluster_types.go
///
/// Every pod carries `ray.io/cluster: <RayCluster name>`. A RayJob's or RayService's
/// cluster gets a generated name (`<name>-<random>`), so their templates select all Ray
/// pods (`ray.io/is-ray-node: "yes"`) with `matchLabelKeys: [ray.io/cluster]`: the
/// scheduler narrows the term to the pod's own cluster.
pub(super) fn ray(obj: &Value, kind: Kind) -> Result<Vec<Site>, ObjectError> {
    let base = ray_cluster_spec(kind);
    let Some(cluster) = obj.lookup(base) else {
        // A RayJob that submits to an existing cluster (`clusterSelector`) has no pods.
        return Ok(Vec::new());
    };
    let name = str_at(obj, &["metadata", "name"]).map(String::from);
    let trains = ray_trains(obj, kind);
    let (identity, group) = match (kind, name) {
        (Kind::RayCluster, Some(n)) => (Some((LABEL_RAY_CLUSTER.to_string(), n)), None),
        _ => (
            Some((RAY_NODE.0.to_string(), RAY_NODE.1.to_string())),
            Some(LABEL_RAY_CLUSTER.to_string()),
        ),
    };
    let identity = identity.filter(|_| trains);
    let autoscaling = cluster
        .get("enableInTreeAutoscaling")
        .and_then(Value::as_bool)
        == Some(true);
    let mut out = Vec::new();
    if cluster.get("headGroupSpec").is_some() {
        out.push(site(
            obj,
            format!("{base}/headGroupSpec/template"),
            identity.clone(),
            Vec::new(),
        ));
    }
    for i in 0..items(cluster, &["workerGroupSpecs"]).len() {
        let g = format!("{base}/workerGroupSpecs/{i}");
        out.push(ray_worker_group(obj, &g, autoscaling, identity.clone())?);
    }
    for s in &mut out {
        s.hints.group_label.clone_from(&group);
        if !trains {
            s.hints.identity = None;
        }
    }
    Ok(out)
}

/// Whether a Ray object is a training job. A RayService serves models: its replicas are
/// independent, not one job, unless the owner says it trains.
fn ray_trains(obj: &Value, kind: Kind) -> bool {
    // The RayCluster a RayService makes carries the RayService's labels and annotations,
    // `ray.io/originated-from-crd: RayService` and the RayService as its controller
    // (rayservice_controller.go, constructRayClusterForRayService): it serves as its
    // RayService does. The label alone is anyone's to write: it takes both.
    let made_by_service = str_at(obj, &["metadata", "labels", LABEL_RAY_ORIGIN])
        == Some("RayService")
        && items(obj, &["metadata", "ownerReferences"])
            .iter()
            .any(|o| {
                o.get("controller").and_then(Value::as_bool) == Some(true)
                    && str_at(o, &["kind"]) == Some("RayService")
            });
    let serve = kind == Kind::RayService || made_by_service;
    !serve || str_at(obj, &["metadata", "annotations", TRAINING]) == Some("true")
}

/// One worker group (at pointer `g`): its pods per group (within KubeRay's bounds, or
/// the maximum under autoscaling) times its hosts.
fn ray_worker_group(
    obj: &Value,
    g: &str,
    autoscaling: bool,
    identity: Option<(String, String)>,
) -> Result<Site, ObjectError> {
    let replicas = count_at(obj, &format!("{g}/replicas"), 0)?;
    let min = count_at(obj, &format!("{g}/minReplicas"), 0)?;
    // Unset, the API server fills in the CRD's default (2^31 - 1) before admission:
    // either way, no bound.
    let max = count_at(obj, &format!("{g}/maxReplicas"), UNBOUNDED)?;
    let max_set = max.value != UNBOUNDED;
    let hosts = count_at(obj, &format!("{g}/numOfHosts"), 1)?;
    let now = u64::from(replicas.value.max(min.value)) * u64::from(hosts.value);
    let per_group = if autoscaling {
        max.clone()
    } else {
        // KubeRay holds replicas between the bounds.
        let value = replicas.value.max(min.value).min(max.value);
        let from = if value == replicas.value {
            replicas
        } else if value == min.value {
            min
        } else {
            max.clone()
        };
        Knob {
            pointer: from.pointer,
            value,
        }
    };
    let mut s = site(
        obj,
        format!("{g}/template"),
        identity,
        vec![per_group, hosts],
    );
    if autoscaling && !max_set {
        // No bound: an unknown count (judged as many pods), not an absurd one.
        s.pods = None;
        s.requested = now;
    }
    Ok(s)
}

/// Volcano: each `tasks[]` entry makes `replicas` pods, labelled
/// `volcano.sh/job-name: <job name>`.
/// https://github.com/volcano-sh/volcano/blob/ed72c7c815a9fd547a787134676f73d42e9d049c/pkg/apis/batch/v1alpha1/labels.go
pub(super) fn volcano(obj: &Value) -> Result<Vec<Site>, ObjectError> {
    let identity =
        str_at(obj, &["metadata", "name"]).map(|n| (LABEL_VOLCANO_JOB.to_string(), n.to_string()));
    let mut out = Vec::new();
    for i in 0..items(obj, &["spec", "tasks"]).len() {
        let base = format!("/spec/tasks/{i}");
        out.push(site(
            obj,
            format!("{base}/template"),
            identity.clone(),
            vec![count_at(obj, &format!("{base}/replicas"), 0)?],
        ));
    }
    Ok(out)
}

/// HyperPodPyTorchJob: `spec.replicaSpecs[]`, each with `replicas` pods; the HyperPod
/// training operator labels the pods `HPJob: <job name>` (what the HyperPod SDK lists
/// a job's pods by).
/// https://github.com/aws/sagemaker-hyperpod-cli/blob/011ca927123e02b35a399935bbb3ab1905fe33c7/src/sagemaker/hyperpod/training/hyperpod_pytorch_job.py
pub(super) fn hyperpod(obj: &Value) -> Result<Vec<Site>, ObjectError> {
    let identity =
        str_at(obj, &["metadata", "name"]).map(|n| (LABEL_HYPERPOD_JOB.to_string(), n.to_string()));
    let mut out = Vec::new();
    for i in 0..items(obj, &["spec", "replicaSpecs"]).len() {
        let base = format!("/spec/replicaSpecs/{i}");
        out.push(site(
            obj,
            format!("{base}/template"),
            identity.clone(),
            vec![count_at(obj, &format!("{base}/replicas"), 1)?],
        ));
    }
    Ok(out)
}

/// The replicated job of a Trainer runtime that the trainer nodes run in.
pub(crate) const TRAINER_NODE_JOB: &str = "node";

/// TrainingRuntime / ClusterTrainingRuntime: the JobSet template's replicated jobs.
/// Every TrainJob that uses the runtime becomes a JobSet named after the TrainJob, so
/// affinity selects the replicated job's pods (`jobset.sigs.k8s.io/replicatedjob-name`)
/// with `matchLabelKeys: [jobset.sigs.k8s.io/jobset-name]`: per TrainJob. The `node`
/// job runs `mlPolicy.numNodes` pods (a TrainJob's `numNodes` overrides it).
/// https://github.com/kubeflow/trainer/blob/8c0f5059bd51ec3ba6d6a6a7b2e1471de7bc13b3/manifests/base/runtimes/torch_distributed.yaml
pub(super) fn runtime(obj: &Value) -> Result<Vec<Site>, ObjectError> {
    let mut out = Vec::new();
    let jobs = items(obj, &["spec", "template", "spec", "replicatedJobs"]);
    for (i, job) in jobs.iter().enumerate() {
        let base = format!("/spec/template/spec/replicatedJobs/{i}");
        let name = job.get("name").and_then(Value::as_str).unwrap_or("");
        let knobs = if name == TRAINER_NODE_JOB && obj.lookup("/spec/mlPolicy/numNodes").is_some() {
            vec![count_at(obj, "/spec/mlPolicy/numNodes", 1)?]
        } else {
            vec![
                count_at(obj, &format!("{base}/replicas"), 1)?,
                active_pods(obj, &format!("{base}/template/spec"))?,
            ]
        };
        let identity =
            (!name.is_empty()).then(|| (LABEL_REPLICATED_JOB.to_string(), name.to_string()));
        let mut s = site(
            obj,
            format!("{base}/template/spec/template"),
            identity,
            knobs,
        );
        s.hints.group_label = Some(LABEL_JOBSET_NAME.to_string());
        out.push(s);
    }
    Ok(out)
}
