//! Where pod templates live in the objects trainplace understands, how many pods each
//! template makes, and which label the operator will put on those pods. A bare Pod is
//! one site at the object root; workloads have one site per replica spec.

mod controllers;
mod operators;

pub(crate) use controllers::TRAINER_NODE_JOB;

use serde_json::Value;

use crate::error::ObjectError;
use crate::read::annotations::{INSTANCE_TYPE, JOB_IDENTITY_LABELS, KUEUE_QUEUE, LABEL_JOB};
use crate::read::json::Lookup as _;
use crate::read::json::str_at;

/// What the surrounding workload knows about this template (empty for a bare Pod).
#[derive(Debug, Clone, Default)]
pub struct SiteHints {
    /// How many pods the workload creates from this template, when known.
    pub pods: Option<u32>,
    /// The job identity label the operator will put on the pods.
    pub identity: Option<(String, String)>,
    /// `trainplace.io/instance-type` on the workload's own metadata: used when the
    /// template names no instance type itself.
    pub instance_type: Option<String>,
    /// A label whose value splits the workload into independent jobs (a LeaderWorkerSet
    /// group): affinity terms match it with `matchLabelKeys`.
    pub group_label: Option<String>,
    /// The workload (or bare pod) carries Kueue's queue label: Kueue admits and places
    /// it whole.
    pub queued: bool,
    /// The operator appends `PET_NNODES` with the job's pod count to every container
    /// (the training operator's PyTorchJob), so `torchrun --nnodes=$(PET_NNODES)` is
    /// read at that count.
    pub operator_nnodes: bool,
}

impl SiteHints {
    /// The env the operator appends to each container of the template, as far as it
    /// bears on the job's size.
    /// https://github.com/kubeflow/trainer/blob/release-1.9/pkg/controller.v1/pytorch/envvar.go
    pub fn operator_env(&self) -> Vec<(&'static str, String)> {
        match self.pods {
            Some(n) if self.operator_nnodes => vec![("PET_NNODES", n.to_string())],
            _ => Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Pod,
    Job,
    JobSet,
    PyTorchJob,
    MpiJob,
    TrainJob,
    LeaderWorkerSet,
    RayCluster,
    RayJob,
    RayService,
    /// `batch.volcano.sh` Job.
    VolcanoJob,
    /// SageMaker HyperPod's `HyperPodPyTorchJob`.
    HyperPodPyTorchJob,
    PaddleJob,
    /// The training operator's TFJob, XGBoostJob and JAXJob: replica-spec maps like
    /// PyTorchJob's.
    TfJob,
    XgboostJob,
    JaxJob,
    TrainingRuntime,
    ClusterTrainingRuntime,
    /// Something trainplace does not handle; passed through untouched.
    Other,
}

impl Kind {
    /// Bounded label for metrics.
    pub fn metric_label(self) -> &'static str {
        match self {
            Kind::Pod => "Pod",
            Kind::Job => "Job",
            Kind::JobSet => "JobSet",
            Kind::PyTorchJob => "PyTorchJob",
            Kind::MpiJob => "MPIJob",
            Kind::TrainJob => "TrainJob",
            Kind::LeaderWorkerSet => "LeaderWorkerSet",
            Kind::RayCluster => "RayCluster",
            Kind::RayJob => "RayJob",
            Kind::RayService => "RayService",
            Kind::VolcanoJob => "VolcanoJob",
            Kind::HyperPodPyTorchJob => "HyperPodPyTorchJob",
            Kind::PaddleJob => "PaddleJob",
            Kind::TfJob => "TFJob",
            Kind::XgboostJob => "XGBoostJob",
            Kind::JaxJob => "JAXJob",
            Kind::TrainingRuntime => "TrainingRuntime",
            Kind::ClusterTrainingRuntime => "ClusterTrainingRuntime",
            Kind::Other => "other",
        }
    }

    /// Whether its controller makes workloads from its templates (a JobSet's Jobs, an
    /// MPIJob's launcher Job), which carry the template but not the object's own
    /// metadata.
    pub fn makes_child_workloads(self) -> bool {
        matches!(
            self,
            Kind::JobSet | Kind::MpiJob | Kind::RayJob | Kind::RayService
        )
    }

    /// Whether every pod made from this workload's templates is owned by a child
    /// workload its controller makes (a JobSet's Jobs, a RayJob's RayCluster), not by
    /// the workload itself.
    pub fn owns_no_pods(self) -> bool {
        matches!(self, Kind::JobSet | Kind::RayJob | Kind::RayService)
    }

    /// The kind of controller that owns the pods made from this workload's templates.
    pub fn pod_owner_kind(self) -> Option<&'static str> {
        match self {
            Kind::Job | Kind::JobSet => Some("Job"),
            Kind::PyTorchJob => Some("PyTorchJob"),
            Kind::MpiJob => Some("MPIJob"),
            Kind::LeaderWorkerSet => Some("StatefulSet"),
            // A RayJob's or RayService's pods belong to the RayCluster its controller
            // makes, under a generated name: their templates are signed for a
            // RayCluster's pods under the label every Ray pod carries, which vouches for
            // the templates of that RayCluster and no pod (its CREATE signs them again
            // under its own name).
            Kind::RayCluster | Kind::RayJob | Kind::RayService => Some("RayCluster"),
            // Volcano's controller owns its pods under its own kind name, `Job`.
            Kind::VolcanoJob => Some("Job"),
            Kind::HyperPodPyTorchJob => Some("HyperPodPyTorchJob"),
            Kind::PaddleJob => Some("PaddleJob"),
            Kind::TfJob => Some("TFJob"),
            Kind::XgboostJob => Some("XGBoostJob"),
            Kind::JaxJob => Some("JAXJob"),
            // A runtime's pods belong to every TrainJob that uses it: no mark can name them.
            Kind::Pod
            | Kind::TrainJob
            | Kind::TrainingRuntime
            | Kind::ClusterTrainingRuntime
            | Kind::Other => None,
        }
    }

    pub fn is_workload(self) -> bool {
        !matches!(self, Kind::Pod | Kind::Other)
    }
}

/// A number in the object that sets how many pods a template makes (for reshape).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Knob {
    /// JSON Pointer of the field; may be absent in the object (then `value` is the default).
    pub pointer: String,
    pub value: u32,
}

/// One pod template inside an object.
#[derive(Debug, Clone)]
pub struct Site {
    /// JSON Pointer to the `{metadata, spec}` object ("" for a Pod).
    pub pointer: String,
    /// Dotted path of the pod spec, for messages (`spec`, `spec.pytorchReplicaSpecs.Worker.template.spec`).
    pub field: String,
    pub hints: SiteHints,
    /// Pods this template makes, when the workload says.
    pub pods: Option<u32>,
    /// The product of the size knobs, unbounded by u32 (to report absurd sizes).
    pub requested: u64,
    /// The fields whose product is `pods`.
    pub knobs: Vec<Knob>,
}

pub fn kind_of(obj: &Value) -> Result<Kind, ObjectError> {
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
    let api = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    if kind.is_empty() {
        return Err(ObjectError::bad(
            "kind",
            "missing; every object needs apiVersion and kind",
        ));
    }
    let group = api.rsplit_once('/').map_or("", |(g, _)| g);
    Ok(match (group, kind) {
        ("", "Pod") => Kind::Pod,
        ("batch", "Job") => Kind::Job,
        ("jobset.x-k8s.io", "JobSet") => Kind::JobSet,
        ("kubeflow.org", "PyTorchJob") => Kind::PyTorchJob,
        ("kubeflow.org", "MPIJob") => Kind::MpiJob,
        ("trainer.kubeflow.org", "TrainJob") => Kind::TrainJob,
        ("leaderworkerset.x-k8s.io", "LeaderWorkerSet") => Kind::LeaderWorkerSet,
        ("ray.io", "RayCluster") => Kind::RayCluster,
        ("ray.io", "RayJob") => Kind::RayJob,
        ("ray.io", "RayService") => Kind::RayService,
        ("batch.volcano.sh", "Job") => Kind::VolcanoJob,
        ("sagemaker.amazonaws.com", "HyperPodPyTorchJob") => Kind::HyperPodPyTorchJob,
        ("kubeflow.org", "PaddleJob") => Kind::PaddleJob,
        ("kubeflow.org", "TFJob") => Kind::TfJob,
        ("kubeflow.org", "XGBoostJob") => Kind::XgboostJob,
        ("kubeflow.org", "JAXJob") => Kind::JaxJob,
        ("trainer.kubeflow.org", "TrainingRuntime") => Kind::TrainingRuntime,
        ("trainer.kubeflow.org", "ClusterTrainingRuntime") => Kind::ClusterTrainingRuntime,
        _ => Kind::Other,
    })
}

pub(crate) fn count_at(obj: &Value, pointer: &str, default: u32) -> Result<Knob, ObjectError> {
    let value = match obj.lookup(pointer) {
        None | Some(Value::Null) => default,
        Some(v) => v
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| {
                ObjectError::bad(
                    pointer.trim_start_matches('/').replace('/', "."),
                    format!("{v} is not a whole, non-negative count"),
                )
            })?,
    };
    Ok(Knob {
        pointer: pointer.to_string(),
        value,
    })
}

/// The pods a Job spec at `spec` runs at once, as the Job controller computes them
/// (`manageJob` in pkg/controller/job/job_controller.go): `parallelism` (default 1),
/// but never more than `completions` when that is set, in NonIndexed and Indexed mode
/// alike. `completions: 1, parallelism: 4` runs one pod at a time. The knob stays the
/// `parallelism` field (the one reshape rewrites), with the value that bounds it.
/// https://github.com/kubernetes/kubernetes/blob/v1.33.0/pkg/controller/job/job_controller.go
pub(crate) fn active_pods(obj: &Value, spec: &str) -> Result<Knob, ObjectError> {
    let parallelism = count_at(obj, &format!("{spec}/parallelism"), 1)?;
    let completions = match obj.lookup(&format!("{spec}/completions")) {
        None | Some(Value::Null) => None,
        Some(_) => Some(count_at(obj, &format!("{spec}/completions"), 1)?.value),
    };
    Ok(Knob {
        value: completions.map_or(parallelism.value, |c| c.min(parallelism.value)),
        pointer: parallelism.pointer,
    })
}

pub(crate) fn site(
    obj: &Value,
    pointer: String,
    identity: Option<(String, String)>,
    knobs: Vec<Knob>,
) -> Site {
    let field = format!("{}.spec", pointer.trim_start_matches('/').replace('/', "."));
    // A label already on the template names the job best (a Job created by a JobSet).
    let template_identity = obj.lookup(&pointer).and_then(|t| {
        JOB_IDENTITY_LABELS.iter().find_map(|(k, _)| {
            str_at(t, &["metadata", "labels", k]).map(|v| (k.to_string(), v.to_string()))
        })
    });
    // In u64, saturating: replicas x parallelism overflows u32 (65536 x 65536 wraps to
    // 0 there); a count past u32 is unknown, and an unknown count is judged as many pods.
    let requested = knobs
        .iter()
        .fold(1u64, |acc, k| acc.saturating_mul(u64::from(k.value)));
    let pods = u32::try_from(requested).ok();
    Site {
        pointer,
        field,
        hints: SiteHints {
            pods: None,
            identity: template_identity.or(identity),
            instance_type: str_at(obj, &["metadata", "annotations", INSTANCE_TYPE])
                .map(String::from),
            group_label: None,
            queued: false,
            operator_nnodes: false,
        },
        pods,
        requested,
        knobs,
    }
}

/// Stands for the name of a workload created with `generateName` while its sites are
/// located; replaced by [`LABEL_JOB`] and a name derived from the object.
const UNNAMED: &str = "trainplace.io/unnamed";

/// The kind and pod-template sites of an object.
///
/// A workload created with `generateName` has no name at admission, so its pods' job
/// label is unknown: each template that would have been keyed on the name is keyed on
/// [`LABEL_JOB`] instead, with a value derived from the object (written on the
/// templates with the layout, so every pod of the job carries it).
pub fn locate(obj: &Value) -> Result<(Kind, Vec<Site>), ObjectError> {
    let (kind, mut sites) = locate_unqueued(obj)?;
    let queued = queued(obj);
    for s in &mut sites {
        s.hints.queued = queued;
    }
    Ok((kind, sites))
}

/// Whether `obj` carries Kueue's queue label.
pub(crate) fn queued(obj: &Value) -> bool {
    str_at(obj, &["metadata", "labels", KUEUE_QUEUE]).is_some_and(|q| !q.is_empty())
}

fn locate_unqueued(obj: &Value) -> Result<(Kind, Vec<Site>), ObjectError> {
    let kind = kind_of(obj)?;
    let unnamed = kind.is_workload()
        && str_at(obj, &["metadata", "name"]).is_none()
        && obj.get("metadata").is_some_and(Value::is_object);
    if !unnamed {
        return locate_named(obj, kind);
    }
    let mut named = obj.clone();
    named["metadata"]["name"] = Value::String(UNNAMED.into());
    let (kind, mut sites) = locate_named(&named, kind)?;
    let generated = generated_name(obj);
    for s in &mut sites {
        if s.hints.identity.as_ref().is_some_and(|(_, v)| v == UNNAMED) {
            s.hints.identity = Some((LABEL_JOB.to_string(), generated.clone()));
        }
    }
    Ok((kind, sites))
}

/// A job name for an unnamed workload: a digest of its `generateName` and spec, so a
/// second pass over the same object finds the same name (and the label it wrote).
fn generated_name(obj: &Value) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(
        str_at(obj, &["metadata", "generateName"])
            .unwrap_or("")
            .as_bytes(),
    );
    h.update([0]);
    h.update(
        obj.get("spec")
            .map(Value::to_string)
            .unwrap_or_default()
            .as_bytes(),
    );
    let digest = h.finalize();
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("g{hex}")
}

fn locate_named(obj: &Value, kind: Kind) -> Result<(Kind, Vec<Site>), ObjectError> {
    let name = str_at(obj, &["metadata", "name"]);
    let id = |label: &str| name.map(|n| (label.to_string(), n.to_string()));
    let sites = match kind {
        Kind::Pod => vec![Site {
            pointer: String::new(),
            field: "spec".into(),
            hints: SiteHints::default(),
            pods: None,
            requested: 1,
            knobs: Vec::new(),
        }],
        Kind::Job => vec![site(
            obj,
            "/spec/template".into(),
            id("batch.kubernetes.io/job-name"),
            vec![active_pods(obj, "/spec")?],
        )],
        Kind::JobSet => operators::jobset(obj, name)?,
        Kind::PyTorchJob
        | Kind::MpiJob
        | Kind::PaddleJob
        | Kind::TfJob
        | Kind::XgboostJob
        | Kind::JaxJob => operators::kubeflow(obj, kind, name)?,
        Kind::LeaderWorkerSet => operators::leader_worker_set(obj, name)?,
        Kind::RayCluster | Kind::RayJob | Kind::RayService => controllers::ray(obj, kind)?,
        Kind::VolcanoJob => controllers::volcano(obj)?,
        Kind::HyperPodPyTorchJob => controllers::hyperpod(obj)?,
        Kind::TrainingRuntime | Kind::ClusterTrainingRuntime => controllers::runtime(obj)?,
        // TrainJob has no pod template; it goes through its own adapter.
        Kind::TrainJob | Kind::Other => Vec::new(),
    };
    Ok((kind, sites))
}
