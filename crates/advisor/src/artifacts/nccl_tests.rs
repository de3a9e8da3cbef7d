//! An nccl-tests MPIJob that checks the new nodes: all_reduce_perf across every GPU,
//! with the bus bandwidth to expect.

use serde_json::Value;

use super::jobs::{mpi_object, mpirun};
use super::pod::PodParts;
use crate::images::{ALL_REDUCE_PERF, GPU_IMAGE};

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
