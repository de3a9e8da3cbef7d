//! The training job manifest, one per framework, in the recommended layout.

use serde_json::{Value, json};

use trainplace_engine::annotations::EXPECTED_DURATION;

use super::pod::{MASTER_PORT, PodParts};
use crate::request::Framework;

/// The script users replace with their own entry point.
const TRAIN_SCRIPT: &str = "/workspace/train.py";

pub fn job(parts: &PodParts<'_>, framework: Framework) -> Value {
    match framework {
        Framework::PyTorchJob => pytorchjob(parts),
        Framework::TrainJob => trainjob(parts),
        Framework::JobSet => jobset(parts),
        Framework::MPIJob => mpijob(parts),
    }
}

/// The job's name and namespace, and how long it runs: the webhook's
/// `capacity-block-ends` rule checks that against the block it lands on.
fn meta(parts: &PodParts<'_>) -> Value {
    json!({"name": parts.job(), "namespace": parts.rec.request.names.namespace,
        "annotations": {EXPECTED_DURATION: format!("{}h", parts.rec.request.job_hours)}})
}

fn nproc(parts: &PodParts<'_>) -> u32 {
    parts.rec.processes_per_pod
}

/// kubeflow.org/v1 PyTorchJob: the operator sets PET_NNODES / PET_NODE_RANK /
/// PET_MASTER_ADDR; `nprocPerNode` and `--nproc_per_node` give one process per GPU
/// (per logical NeuronCore on Trainium).
fn pytorchjob(parts: &PodParts<'_>) -> Value {
    let nproc_flag = format!("--nproc_per_node={}", nproc(parts));
    let cmd = ["torchrun", nproc_flag.as_str(), TRAIN_SCRIPT];
    let image = &parts.rec.image;
    let template = parts.template(parts.device_container("pytorch", image, &cmd, &[]));
    let nodes = parts.rec.shape.nodes;
    let mut replicas = serde_json::Map::new();
    replicas.insert(
        "Master".into(),
        json!({"replicas": 1, "restartPolicy": "OnFailure", "template": template}),
    );
    if nodes > 1 {
        replicas.insert(
            "Worker".into(),
            json!({"replicas": nodes - 1, "restartPolicy": "OnFailure", "template": template}),
        );
    }
    json!({
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": meta(parts),
        "spec": {"nprocPerNode": nproc(parts).to_string(), "pytorchReplicaSpecs": replicas},
    })
}

/// jobset.x-k8s.io/v1alpha2 JobSet: one indexed Job of N pods; torchrun reads PET_*.
fn jobset(parts: &PodParts<'_>) -> Value {
    let nodes = parts.rec.shape.nodes;
    let name = parts.job();
    let env = [
        json!({"name": "PET_NNODES", "value": nodes.to_string()}),
        json!({"name": "PET_NPROC_PER_NODE", "value": nproc(parts).to_string()}),
        json!({"name": "PET_NODE_RANK", "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}}),
        json!({"name": "PET_MASTER_ADDR", "value": format!("{name}-node-0-0.{name}")}),
        json!({"name": "PET_MASTER_PORT", "value": MASTER_PORT.to_string()}),
    ];
    let image = &parts.rec.image;
    let template =
        parts.template(parts.device_container("trainer", image, &["torchrun", TRAIN_SCRIPT], &env));
    json!({
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": meta(parts),
        "spec": {
            "network": {"enableDNSHostnames": true},
            "replicatedJobs": [{
                "name": "node",
                "replicas": 1,
                "template": {"spec": {
                    "parallelism": nodes,
                    "completions": nodes,
                    "completionMode": "Indexed",
                    "backoffLimit": 0,
                    "template": template,
                }},
            }],
        },
    })
}

/// trainer.kubeflow.org/v1alpha1 TrainJob on the `torch-distributed` runtime. The
/// runtime patch carries the layout the TrainJob API cannot express directly; hostIPC
/// is not patchable and must be set in the ClusterTrainingRuntime.
fn trainjob(parts: &PodParts<'_>) -> Value {
    let t = parts.template(json!({}));
    let spec = &t["spec"];
    let container = json!({
        "name": "node",
        "env": parts.env(&[]),
        "securityContext": {"capabilities": {"add": ["IPC_LOCK"]}},
        "volumeMounts": [{"name": super::pod::SHM_VOLUME, "mountPath": "/dev/shm"}],
    });
    let mut patch_spec = json!({
        "containers": [container],
        "volumes": spec["volumes"],
        "tolerations": spec["tolerations"],
        "nodeSelector": spec["nodeSelector"],
        "affinity": spec["affinity"],
    });
    if let Some(claims) = spec.get("resourceClaims") {
        patch_spec["resourceClaims"] = claims.clone();
    }
    json!({
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": meta(parts),
        "spec": {
            "runtimeRef": {"name": "torch-distributed"},
            "trainer": {
                "image": parts.rec.image,
                "command": ["torchrun", TRAIN_SCRIPT],
                "numNodes": parts.rec.shape.nodes,
                "numProcPerNode": nproc(parts),
                "resourcesPerNode": parts.device_resources(),
            },
            "runtimePatches": [{
                "manager": "trainplace.io/advisor",
                "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [{
                    "name": "node",
                    "template": {"spec": {"template": {
                        "metadata": t["metadata"],
                        "spec": patch_spec,
                    }}},
                }]}}},
            }],
        },
    })
}

/// kubeflow.org/v2beta1 MPIJob: workers run sshd; the launcher (no GPUs) runs mpirun.
fn mpijob(parts: &PodParts<'_>) -> Value {
    let mut launch = mpirun(parts.rec.shape.nodes * nproc(parts), nproc(parts));
    launch.extend(["python".to_string(), TRAIN_SCRIPT.to_string()]);
    let launch: Vec<&str> = launch.iter().map(String::as_str).collect();
    mpi_object(parts, parts.job(), &parts.rec.image, &launch)
}

/// How every MPI launcher here starts its ranks: `np` in all, `per_node` on each
/// worker, no CPU binding, and PATH and LD_LIBRARY_PATH passed on to ranks that sshd
/// starts without the container's env. The command to run follows.
pub fn mpirun(np: impl std::fmt::Display, per_node: impl std::fmt::Display) -> Vec<String> {
    let (np, per_node) = (np.to_string(), per_node.to_string());
    [
        "mpirun",
        "--allow-run-as-root",
        "-np",
        &np,
        "-npernode",
        &per_node,
        "--bind-to",
        "none",
        "-x",
        "PATH",
        "-x",
        "LD_LIBRARY_PATH",
    ]
    .map(str::to_string)
    .to_vec()
}

/// An MPIJob with one sshd worker per node and a CPU-only launcher running `launch`.
/// Ranks start through sshd on the workers and do not see the worker container's env:
/// the NCCL / libfabric env travels with `mpirun -x NAME=VALUE` from the launcher.
pub fn mpi_object(parts: &PodParts<'_>, name: &str, image: &str, launch: &[&str]) -> Value {
    let mut command: Vec<String> = launch.iter().take(1).map(|s| s.to_string()).collect();
    for (n, v) in parts.nccl_env {
        command.push("-x".into());
        command.push(format!("{n}={v}"));
    }
    command.extend(launch.iter().skip(1).map(|s| s.to_string()));
    let launch = command;
    let mut meta = json!({"name": name, "namespace": parts.rec.request.names.namespace});
    if name == parts.job() {
        meta["annotations"] =
            json!({EXPECTED_DURATION: format!("{}h", parts.rec.request.job_hours)});
    }
    let worker =
        parts.template(parts.device_container("worker", image, &["/usr/sbin/sshd", "-De"], &[]));
    json!({
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": meta,
        "spec": {
            "slotsPerWorker": nproc(parts),
            "runPolicy": {"cleanPodPolicy": "Running"},
            "mpiImplementation": "OpenMPI",
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": {"spec": {
                    "restartPolicy": "OnFailure",
                    "containers": [{"name": "launcher", "image": image, "command": launch}],
                }}},
                "Worker": {"replicas": parts.rec.shape.nodes, "template": worker},
            },
        },
    })
}
