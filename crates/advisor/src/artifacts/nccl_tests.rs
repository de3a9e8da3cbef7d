//! The collective check of the new nodes before training: an nccl-tests MPIJob
//! (all_reduce_perf across every GPU, with the bus bandwidth to expect) on NVIDIA, and
//! an nccom-test MPIJob (all-reduce across every NeuronCore) on Trainium, whose
//! collectives are Neuron's, not NCCL's.

use serde_json::Value;

use super::jobs::{mpi_object, mpirun};
use super::pod::PodParts;
use crate::images::{ALL_REDUCE_PERF, GPU_IMAGE};

/// The nccl-tests MPIJob's file, for the eksctl nodegroups' nodes.
pub const NCCL_TESTS_FILE: &str = "nccl-tests-mpijob.yaml";

/// The same check on the Karpenter route: the nodes `job-*-karpenter.yaml` selects.
pub const KARPENTER_NCCL_TESTS_FILE: &str = "nccl-tests-mpijob-karpenter.yaml";

/// The nccl-tests file on the plan's route.
pub fn file(rec: &crate::recommend::Recommendation) -> &'static str {
    if super::on_karpenter(rec) {
        KARPENTER_NCCL_TESTS_FILE
    } else {
        NCCL_TESTS_FILE
    }
}

/// The Karpenter file's extra header line.
pub fn karpenter_note(rec: &crate::recommend::Recommendation) -> String {
    format!(
        "the Karpenter route (karpenter.yaml): on the nodes {} selects; kubectl apply -f {KARPENTER_NCCL_TESTS_FILE} before that job (aws-cli.sh run does)",
        super::job_file(rec)
    )
}

pub fn nccl_tests(parts: &PodParts<'_>) -> Value {
    let name = format!("{}-nccl-tests", parts.job());
    let mut launch = mpirun(parts.rec.shape.total_gpus, parts.rec.processes_per_pod);
    launch.extend(
        [
            "-x",
            "NCCL_DEBUG=INFO",
            "-x",
            "NCCL_DEBUG_SUBSYS=INIT,NET",
            ALL_REDUCE_PERF,
            "-b",
            "8",
            "-e",
            "1G",
            "-f",
            "2",
            "-g",
            "1",
            "-c",
            "1",
            "-n",
            "100",
        ]
        .map(str::to_string),
    );
    let launch: Vec<&str> = launch.iter().map(String::as_str).collect();
    // The pinned DLC image carries EFA, aws-ofi-nccl, OpenMPI and all_reduce_perf.
    mpi_object(parts, &name, GPU_IMAGE, &launch)
}

/// The header line saying what busbw to expect.
pub fn expectation(parts: &PodParts<'_>) -> String {
    let b = &parts.rec.bandwidth;
    let transport = if parts.rec.shape.nodes > 1 {
        "the log should show NET/OFI (aws-ofi-nccl over EFA), not NET/Socket"
    } else {
        "the log should show P2P transports inside the node"
    };
    match (b.busbw_low_gbs, b.busbw_high_gbs) {
        (Some(low), Some(high)) => format!(
            "expect all_reduce_perf peak busbw {low}..{high} GB/s ({}); {transport}; check with `trainplace diagnose`",
            b.busbw_source.as_deref().unwrap_or("")
        ),
        _ => format!(
            "no busbw expectation for this type; {transport}; check with `trainplace diagnose`"
        ),
    }
}

/// File the script writes the nccom-test launcher's log to.
pub const NCCOM_LOG: &str = "nccom-test.log";

/// nccom-test (aws-neuronx-tools, in the Neuron DLC image the job runs) all-reduce over
/// every NeuronCore of every node, fp32, 8 B to 1 GB. Multi-node runs are started on
/// one of the instances, with `NEURON_RT_ROOT_COMM_ID` set to that instance's address
/// and a free port and the instances given with `--hosts`
/// (<https://awsdocs-neuron.readthedocs-hosted.com/en/latest/tools/neuron-sys-tools/nccom-test.html>):
/// the MPIJob's CPU-only launcher reads the workers from the hostfile the MPI operator
/// mounts and starts nccom-test on the first worker over the operator's ssh, passing
/// the Neuron / libfabric env that ssh sessions do not inherit.
pub fn nccom_test(parts: &PodParts<'_>) -> Value {
    let name = format!("{}-nccom-test", parts.job());
    let ranks = parts.rec.shape.nodes * parts.rec.processes_per_pod;
    let env: Vec<String> = parts
        .nccl_env
        .iter()
        .map(|(n, v)| format!("{n}={v}"))
        .collect();
    let script = format!(
        "HOSTS=$(cut -d' ' -f1 /etc/mpi/hostfile | tr '\\n' ' '); FIRST=${{HOSTS%% *}}; ssh -o StrictHostKeyChecking=no \"$FIRST\" \"{} NEURON_RT_ROOT_COMM_ID=$FIRST:44444 nccom-test -r {ranks} -N {} -b 8 -e 1GB -f 2 -n 50 -w 5 -d fp32 allr --hosts $HOSTS\"",
        env.join(" "),
        parts.rec.shape.nodes
    );
    let mut job = mpi_object(parts, &name, &parts.rec.image, &["true"]);
    job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["command"] =
        serde_json::json!(["sh", "-c", script]);
    job
}
