//! The operators that run what the plan emits, pinned, installed from their release
//! manifests: without one, `kubectl apply` of the job fails with "no matches for kind".
//!
//! - MPI Operator v0.8.0 (`kubeflow.org/v2beta1` MPIJob): the collective check
//!   (nccl-tests, nccom-test) of every plan and the MPIJob framework
//!   (<https://github.com/kubeflow/mpi-operator/tree/v0.8.0>, `deploy/v2beta1/mpi-operator.yaml`).
//! - Training Operator v1.9.4 (`kubeflow.org/v1` PyTorchJob), the standalone overlay
//!   (<https://github.com/kubeflow/trainer/tree/v1.9.4/manifests/overlays/standalone>). It
//!   also ships a `kubeflow.org/v1` MPIJob CRD of the same name as the MPI Operator's: a
//!   cluster runs one of the two. Kueue's MPIJob page says to enable every Training
//!   Operator job but MPIJob when both are installed
//!   (<https://kueue.sigs.k8s.io/docs/tasks/run/kubeflow/mpijobs/>; kubeflow/trainer#1972),
//!   so `training-operator/kustomization.yaml` deletes that CRD from the overlay and starts
//!   the operator with `--enable-scheme=pytorchjob`.
//! - JobSet v0.12.0 (`jobset.x-k8s.io/v1alpha2`)
//!   (<https://github.com/kubernetes-sigs/jobset/releases/tag/v0.12.0>, `manifests.yaml`).
//! - Kubeflow Trainer v2.3.0 (`trainer.kubeflow.org/v1alpha1` TrainJob): the manager
//!   overlay (which brings JobSet) and the runtimes overlay with `torch-distributed`
//!   (<https://github.com/kubeflow/trainer/blob/v2.3.0/docs/operator-guides/installation.md>).
//!
//! LeaderWorkerSet and Kueue are not installed: no emitted object is a LeaderWorkerSet,
//! and the plan does not queue (its job carries no `kueue.x-k8s.io/queue-name`).

use serde_json::{Value, json};

use crate::recommend::Recommendation;
use crate::request::Framework;

/// An operator: what `kubectl apply --server-side` reads (`-f URL` or `-k PATH`), and the
/// Deployment that must be available before the kinds it runs are applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operator {
    pub name: &'static str,
    pub version: &'static str,
    /// The kinds it runs, `group/version Kind`.
    pub kinds: &'static [&'static str],
    /// `-f URL` or `-k PATH_OR_URL`.
    pub apply: &'static str,
    pub namespace: &'static str,
    pub deployment: &'static str,
}

pub const MPI_OPERATOR: Operator = Operator {
    name: "MPI Operator",
    version: "v0.8.0",
    kinds: &["kubeflow.org/v2beta1 MPIJob"],
    apply: "-f https://raw.githubusercontent.com/kubeflow/mpi-operator/v0.8.0/deploy/v2beta1/mpi-operator.yaml",
    namespace: "mpi-operator",
    deployment: "mpi-operator",
};

/// The directory of the Training Operator's kustomization (emitted beside the script).
pub const TRAINING_OPERATOR_DIR: &str = "training-operator";
/// The upstream overlay that kustomization reads.
pub const TRAINING_OPERATOR_OVERLAY: &str =
    "https://github.com/kubeflow/trainer.git/manifests/overlays/standalone?ref=v1.9.4";

pub const TRAINING_OPERATOR: Operator = Operator {
    name: "Training Operator",
    version: "v1.9.4",
    kinds: &["kubeflow.org/v1 PyTorchJob"],
    apply: "-k training-operator",
    namespace: "kubeflow",
    deployment: "training-operator",
};

pub const JOBSET: Operator = Operator {
    name: "JobSet",
    version: "v0.12.0",
    kinds: &["jobset.x-k8s.io/v1alpha2 JobSet"],
    apply: "-f https://github.com/kubernetes-sigs/jobset/releases/download/v0.12.0/manifests.yaml",
    namespace: "jobset-system",
    deployment: "jobset-controller-manager",
};

pub const TRAINER: Operator = Operator {
    name: "Kubeflow Trainer",
    version: "v2.3.0",
    kinds: &["trainer.kubeflow.org/v1alpha1 TrainJob"],
    apply: "-k https://github.com/kubeflow/trainer.git/manifests/overlays/manager?ref=v2.3.0",
    namespace: "kubeflow-system",
    deployment: "kubeflow-trainer-controller-manager",
};

/// The Trainer's built-in runtimes (`torch-distributed`, which the TrainJob names).
pub const TRAINER_RUNTIMES: &str =
    "-k https://github.com/kubeflow/trainer.git/manifests/overlays/runtimes?ref=v2.3.0";

/// The operators the plan's objects need, in install order: the job's, then the MPI
/// Operator for the collective check (last, so its MPIJob CRD is the one that stays).
pub fn operators(rec: &Recommendation) -> Vec<Operator> {
    let mut out = match rec.request.framework {
        Framework::PyTorchJob => vec![TRAINING_OPERATOR],
        Framework::JobSet => vec![JOBSET],
        Framework::TrainJob => vec![TRAINER],
        Framework::MPIJob => Vec::new(),
    };
    out.push(MPI_OPERATOR);
    out
}

/// The Training Operator's kustomization: the upstream overlay without its MPIJob CRD,
/// running PyTorchJob only (the MPI Operator runs MPIJob).
pub fn training_operator_kustomization() -> Value {
    json!({
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [TRAINING_OPERATOR_OVERLAY],
        "patches": [
            {"patch": "$patch: delete\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: mpijobs.kubeflow.org\n"},
            {
                "target": {"kind": "Deployment", "name": TRAINING_OPERATOR.deployment},
                "patch": "- op: add\n  path: /spec/template/spec/containers/0/args\n  value: [--enable-scheme=pytorchjob]\n",
            },
        ],
    })
}

/// Shell lines: apply each operator and wait until its Deployment is available (on the
/// system nodes: the GPU nodes are tainted). Server-side apply, as the upstream
/// instructions say (the CRDs are too large for a client-side apply's annotation).
pub fn install_lines(rec: &Recommendation) -> Vec<String> {
    let mut out = Vec::new();
    for op in operators(rec) {
        out.push(format!(
            "# {} {} ({}).",
            op.name,
            op.version,
            op.kinds.join(", ")
        ));
        out.push(format!("kubectl apply --server-side {}", op.apply));
        if op == TRAINER {
            out.push(format!(
                "kubectl -n {} rollout status deployment/{} --timeout=10m",
                op.namespace, op.deployment
            ));
            out.push(format!("kubectl apply --server-side {TRAINER_RUNTIMES}"));
        }
        out.push(format!(
            "kubectl -n {} rollout status deployment/{} --timeout=10m",
            op.namespace, op.deployment
        ));
    }
    out
}
