//! Ready-to-apply files for a recommendation: eksctl (and, on the Karpenter route,
//! Karpenter), aws CLI, the job in the recommended layout, and an nccl-tests check, all
//! for the one route the plan takes (`crate::recommend::route`). Objects are built as JSON values
//! (so tests validate them against the real schemas) and rendered as YAML.

pub mod awscli;
pub mod block_events;
pub mod eksctl;
pub mod gpu_discovery;
pub mod health;
pub mod jobs;
pub mod karpenter;
pub mod local_zone;
pub mod nccl_tests;
pub mod network;
pub mod node_check;
pub mod node_labels;
pub mod offering_queries;
pub mod operators;
pub mod plugins;
pub mod pod;
pub mod prereqs;
pub mod purchase;
pub mod quota;
pub mod reservation_tag;
pub mod run_steps;
pub mod schedule;
pub mod storage;
pub mod topology;
mod yaml11;

use serde::Serialize;
use serde_json::Value;
use trainplace_engine::Policy;
use trainplace_engine::annotations::RES_NVIDIA_GPU;

use crate::recommend::{CapacityPlan, Recommendation};
use pod::{PodParts, Route};

pub use crate::recommend::route::needs_dra;

/// The Trainium collective check's file.
pub const NCCOM_FILE: &str = "nccom-test-mpijob.yaml";

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Artifact {
    /// File name under `--emit DIR`.
    pub name: String,
    pub content: String,
}

/// The objects behind the YAML artifacts, for validation and the engine check: those
/// of the plan's route only.
#[derive(Debug, Clone)]
pub struct Objects {
    /// The route every object below is for.
    pub route: Route,
    /// Its GPU nodegroups on the eksctl route, only the system nodegroup on Karpenter's.
    pub cluster_config: Value,
    /// The Karpenter route's EC2NodeClass (the first of `karpenter::pools`); `None` on
    /// the eksctl route.
    pub node_class: Option<Value>,
    /// The Karpenter route's NodePool (the first of `karpenter::pools`).
    pub node_pool: Option<Value>,
    /// The job on the plan's route: pinned to the eksctl nodegroups' nodes, or to the
    /// NodePool's nodes (reserved ones for reserved capacity) without hugepages and not
    /// disrupted (`pod.rs`).
    pub job: Value,
    /// The collective check before training, on the job's nodes: nccl-tests on NVIDIA,
    /// nccom-test on Trainium (`nccl_tests.rs`).
    pub nccl_tests: Option<Value>,
    /// The EFA ResourceClaimTemplate the pods claim, when EFA comes through DRA.
    pub efa_claim: Option<Value>,
    /// The ComputeDomain whose IMEX channel the pods claim, on instances whose NVLink
    /// domain spans instances (GB200).
    pub compute_domain: Option<Value>,
    /// The checkpoint StorageClass and claim the job's pods mount (`storage.rs`).
    pub checkpoint_storage: Option<[Value; 2]>,
    /// One pod per GPU node checking NCCL inside the node, on the job's nodes
    /// (`node_check.rs`).
    pub node_check: Option<Value>,
}

/// The ComputeDomain's file, applied before the collective check.
pub const COMPUTE_DOMAIN_FILE: &str = "compute-domain.yaml";

/// NCCL / libfabric env (Neuron collectives' on Trainium) the webhook would add for
/// this instance, so the emitted pods already carry it.
pub fn nccl_env(rec: &Recommendation, policy: &Policy) -> Vec<(String, String)> {
    let p = &rec.instance;
    let plugin = policy.effective(&Default::default()).plugin_version;
    policy
        .catalog
        .nccl_env(p, &plugin, p.max_efa > 0)
        .map(|r| (r.name.clone(), r.value.clone()))
        .collect()
}

/// Whether the plan takes the Karpenter route (`crate::recommend::route`; a plan Karpenter cannot
/// serve is refused before it gets here).
pub fn on_karpenter(rec: &Recommendation) -> bool {
    rec.request.route == Route::Karpenter
}

/// The job's file: `job-FRAMEWORK.yaml`, or `job-FRAMEWORK-karpenter.yaml` on the
/// Karpenter route.
pub fn job_file(rec: &Recommendation) -> String {
    let slug = rec.request.framework.slug();
    if on_karpenter(rec) {
        format!("job-{slug}-karpenter.yaml")
    } else {
        format!("job-{slug}.yaml")
    }
}

pub fn objects(rec: &Recommendation, policy: &Policy) -> Objects {
    let env = nccl_env(rec, policy);
    let parts = PodParts {
        rec,
        nccl_env: &env,
        route: rec.request.route,
    };
    let mut job = jobs::job(&parts, rec.request.framework);
    storage::mount(rec, &mut job);
    let karpenter = on_karpenter(rec);
    Objects {
        route: rec.request.route,
        cluster_config: eksctl::cluster_config(rec),
        node_class: karpenter.then(|| karpenter::node_class(rec)),
        node_pool: karpenter.then(|| karpenter::node_pool(rec)),
        job,
        nccl_tests: Some(if rec.instance.accelerator_resource == RES_NVIDIA_GPU {
            nccl_tests::nccl_tests(&parts)
        } else {
            nccl_tests::nccom_test(&parts)
        }),
        efa_claim: parts.efa_claim_template(),
        compute_domain: parts.compute_domain(),
        checkpoint_storage: storage::applies(rec)
            .then(|| [storage::storage_class(rec), storage::claim(rec)]),
        node_check: plugins::is_nvidia(rec).then(|| node_check::node_check(&parts)),
    }
}

pub fn artifacts(rec: &Recommendation, policy: &Policy) -> Vec<Artifact> {
    let o = objects(rec, policy);
    let mut out = setup_artifacts(rec, &o);
    out.extend(job_artifacts(rec, policy, &o));
    out
}

/// The files that make the cluster: eksctl, Karpenter (on its route), the script, the
/// operators' and the EFA plugin's configuration.
fn setup_artifacts(rec: &Recommendation, o: &Objects) -> Vec<Artifact> {
    let mut eksctl_notes =
        vec!["eksctl ClusterConfig: eksctl create cluster -f (or create nodegroup -f)"];
    if on_karpenter(rec) {
        eksctl_notes.push(
            "the Karpenter route: only the system nodegroup; Karpenter launches the GPU nodes from karpenter.yaml (aws-cli.sh applies it), so no nodegroup takes the reserved instances",
        );
    } else if matches!(rec.capacity, CapacityPlan::CapacityBlock { .. }) {
        eksctl_notes.push(
            "Capacity Block nodegroups: run aws-cli.sh first (it fills in the reservation ids); nodes launch only once a block is active",
        );
    }
    let mut out = vec![Artifact {
        name: "eksctl-cluster.yaml".into(),
        content: yaml(&eksctl_notes, &[&o.cluster_config]),
    }];
    if on_karpenter(rec) {
        let pools = karpenter::pools(rec);
        let docs: Vec<&Value> = pools.iter().flat_map(|(c, p)| [c, p]).collect();
        out.push(Artifact {
            name: "karpenter.yaml".into(),
            content: yaml(
                &["Karpenter EC2NodeClass + NodePool (one pair per placement group of a split job): kubectl apply -f, after karpenter-prerequisites.sh (aws-cli.sh runs both)"],
                &docs,
            ),
        });
        out.push(Artifact {
            name: "karpenter-prerequisites.sh".into(),
            content: prereqs::script(rec),
        });
    }
    out.push(Artifact {
        name: "aws-cli.sh".into(),
        content: awscli::script(rec),
    });
    out.extend(health_artifacts(rec, o));
    if operators::operators(rec).contains(&operators::TRAINING_OPERATOR) {
        out.push(Artifact {
            name: format!("{}/kustomization.yaml", operators::TRAINING_OPERATOR_DIR),
            content: yaml(
                &[
                    "Training Operator v1.9.4 for PyTorchJob: kubectl apply --server-side -k training-operator (aws-cli.sh does)",
                    "without its kubeflow.org/v1 MPIJob CRD and controller: the MPI Operator's v2beta1 MPIJob runs the NCCL check",
                    "(https://kueue.sigs.k8s.io/docs/tasks/run/kubeflow/mpijobs/)",
                ],
                &[&operators::training_operator_kustomization()],
            ),
        });
    }
    if gpu_discovery::needed(rec) {
        let notes = gpu_discovery::notes();
        let notes: Vec<&str> = notes.iter().map(String::as_str).collect();
        out.push(Artifact {
            name: gpu_discovery::VALUES_FILE.into(),
            content: yaml(&notes, &[&gpu_discovery::values(rec)]),
        });
    }
    if let Some(claim) = &o.efa_claim {
        out.push(Artifact {
            name: "efa-claim-template.yaml".into(),
            content: yaml(
                &["EFA through the EFA DRA driver: every interface of the node for each pod; kubectl apply -f before the job (https://docs.aws.amazon.com/eks/latest/userguide/device-management-efa.html)"],
                &[claim],
            ),
        });
    } else if rec.instance.max_efa > 0 {
        let notes = plugins::efa_values_notes(rec);
        let notes: Vec<&str> = notes.iter().map(String::as_str).collect();
        out.push(Artifact {
            name: plugins::VALUES_FILE.into(),
            content: yaml(&notes, &[&plugins::efa_values(rec)]),
        });
    }
    out
}

/// The files that run on it: the ComputeDomain, the job, the collective checks, all on
/// the plan's route.
fn job_artifacts(rec: &Recommendation, policy: &Policy, o: &Objects) -> Vec<Artifact> {
    let env = nccl_env(rec, policy);
    let parts = PodParts {
        rec,
        nccl_env: &env,
        route: rec.request.route,
    };
    let mut out = Vec::new();
    if let Some(domain) = &o.compute_domain {
        out.push(Artifact {
            name: COMPUTE_DOMAIN_FILE.into(),
            content: yaml(
                &["ComputeDomain (NVIDIA DRA driver for GPUs, https://github.com/NVIDIA/k8s-dra-driver-gpu): the IMEX channel the pods claim to reach each other's GPUs over the NVLink domain; kubectl apply -f before the NCCL check and the job"],
                &[domain],
            ),
        });
    }
    let job_line = format!(
        "training job in the recommended layout: one pod per node, all {} and EFA, {} processes per pod",
        crate::shape::accelerator_word(&rec.instance),
        rec.processes_per_pod
    );
    let mut job_notes = vec![job_line.as_str()];
    if rec.request.framework == crate::request::Framework::TrainJob {
        job_notes.push("hostIPC: true must be set in the torch-distributed ClusterTrainingRuntime (TrainJob cannot patch it)");
    }
    let pinned = match rec.capacity {
        _ if on_karpenter(rec) => "",
        CapacityPlan::CapacityBlock { .. } => {
            "pinned to the Capacity Block nodes of the eksctl nodegroups (eks.amazonaws.com/capacityType: CAPACITY_BLOCK): no pod lands on an on-demand node beside the block"
        }
        CapacityPlan::Odcr { .. } => "pinned to the eksctl nodegroup of the reservation",
        _ => "",
    };
    if !pinned.is_empty() {
        job_notes.push(pinned);
    }
    if on_karpenter(rec) {
        job_notes.push(if matches!(rec.capacity, CapacityPlan::CapacityBlock { .. } | CapacityPlan::Odcr { .. }) {
            "the Karpenter route (karpenter.yaml): pinned to the NodePool's reserved nodes (karpenter.sh/capacity-type: reserved), by reservation id when it is known"
        } else {
            "the Karpenter route (karpenter.yaml): pinned to the NodePool's nodes"
        });
        job_notes.push("no hugepages-2Mi requests (Karpenter does not model them: kubernetes-sigs/karpenter#751); karpenter.sh/do-not-disrupt keeps the nodes for the whole run");
    }
    out.push(Artifact {
        name: job_file(rec),
        content: yaml(&job_notes, &[&o.job]),
    });
    out.extend(check_artifacts(rec, &parts, o));
    out
}

/// The collective checks before training: nccom-test on Trainium; on NVIDIA the
/// per-node check and the multi-node nccl-tests, on the plan's route.
fn check_artifacts(rec: &Recommendation, parts: &PodParts<'_>, o: &Objects) -> Vec<Artifact> {
    let mut out = Vec::new();
    if let Some(tests) = o.nccl_tests.as_ref().filter(|_| !plugins::is_nvidia(rec)) {
        out.push(Artifact {
            name: NCCOM_FILE.into(),
            content: yaml(
                &[
                    "nccom-test all-reduce over every NeuronCore of the nodes (Trainium's collectives are Neuron's, not NCCL's)",
                    "the log should end with `Avg bus bandwidth`; `errors found - test failed` means the nodes are not ready",
                ],
                &[tests],
            ),
        });
    } else if let Some(tests) = &o.nccl_tests {
        if let Some(check) = &o.node_check {
            let mut notes = node_check::notes(parts);
            if on_karpenter(rec) {
                notes.push(node_check::karpenter_note(rec));
            }
            let notes: Vec<&str> = notes.iter().map(String::as_str).collect();
            out.push(Artifact {
                name: node_check::file(rec).into(),
                content: yaml(&notes, &[check]),
            });
        }
        let expect = nccl_tests::expectation(parts);
        let mut notes = vec![
            if on_karpenter(rec) {
                "nccl-tests all_reduce_perf over every GPU of the Karpenter job's nodes".to_string()
            } else {
                "nccl-tests all_reduce_perf over every GPU of the nodegroup".to_string()
            },
            expect,
        ];
        if on_karpenter(rec) {
            notes.push(nccl_tests::karpenter_note(rec));
        }
        let notes: Vec<&str> = notes.iter().map(String::as_str).collect();
        out.push(Artifact {
            name: nccl_tests::file(rec).into(),
            content: yaml(&notes, &[tests]),
        });
    }
    out
}

/// Checkpoint storage and the DCGM exporter's values.
fn health_artifacts(rec: &Recommendation, o: &Objects) -> Vec<Artifact> {
    let mut out = Vec::new();
    if let Some([class, claim]) = &o.checkpoint_storage {
        let notes = storage::notes(rec);
        let notes: Vec<&str> = notes.iter().map(String::as_str).collect();
        out.push(Artifact {
            name: storage::STORAGE_FILE.into(),
            content: yaml(&notes, &[class, claim]),
        });
    }
    if plugins::is_nvidia(rec) {
        let notes = health::dcgm_notes(rec);
        let notes: Vec<&str> = notes.iter().map(String::as_str).collect();
        out.push(Artifact {
            name: health::DCGM_VALUES_FILE.into(),
            content: yaml(&notes, &[&health::dcgm_values(rec)]),
        });
    }
    out
}

/// YAML documents with a comment header.
fn yaml(header: &[&str], docs: &[&Value]) -> String {
    let mut s: String = header.iter().map(|h| format!("# {h}\n")).collect();
    for (i, d) in docs.iter().enumerate() {
        if i > 0 {
            s.push_str("---\n");
        }
        s.push_str(&yaml11::quote_timestamps(
            &serde_yaml_ng::to_string(d).unwrap_or_default(),
        ));
    }
    s
}
