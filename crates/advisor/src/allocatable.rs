//! What a job pod may request besides devices: CPU and memory it can count on, and the
//! 2 MiB hugepages libfabric's EFA provider uses.
//!
//! Allocatable CPU and memory per type: Karpenter v1.14 instance-type reference
//! (`cpu`, `memory` resources, i.e. after kube-reserved and eviction thresholds)
//! <https://github.com/aws/karpenter-provider-aws/blob/main/website/content/en/v1.14/reference/instance-types.md>
//! Hugepages and the 32000Mi process memory: AWS's EKS nccl-tests sample
//! (HUGEPAGES_2MI=5120Mi, MEMORY=32000Mi),
//! <https://github.com/aws-samples/awsome-distributed-training/tree/main/micro-benchmarks/nccl-tests>

use serde_json::{Map, Value, json};
use trainplace_catalog::InstanceProfile;

/// The extended resource name of 2 MiB hugepages.
pub const HUGEPAGES: &str = "hugepages-2Mi";
/// 2 MiB hugepages for libfabric's EFA provider, per pod (the AWS sample's value).
pub const HUGEPAGES_2MI: &str = "5120Mi";
/// Memory for the training processes besides /dev/shm (the AWS sample's value).
const PROCESS_MEMORY_MI: u64 = 32_000;
/// Share of the node's allocatable CPU and memory the job pod asks for: the rest is
/// left to DaemonSets (device plugins, CNI, kube-proxy, monitoring).
const SHARE_PERCENT: u64 = 90;

/// (allocatable CPU millicores, allocatable memory MiB), Karpenter v1.14 reference.
fn allocatable(name: &str) -> Option<(u64, u64)> {
    Some(match name {
        "p4d.24xlarge" | "p4de.24xlarge" => (95_690, 1_082_712),
        "p5.48xlarge" | "p5e.48xlarge" | "trn2.48xlarge" => (191_450, 1_938_410),
        "p5en.48xlarge" | "p6-b200.48xlarge" => (191_450, 1_937_332),
        "p6-b300.48xlarge" => (191_450, 3_877_198),
        "p5.4xlarge" => (15_890, 240_830),
        "g5.48xlarge" => (191_450, 723_299),
        "g5.12xlarge" => (47_810, 173_400),
        "g6.48xlarge" => (191_450, 718_987),
        "g6e.12xlarge" => (47_810, 360_157),
        "g6e.24xlarge" => (95_690, 721_682),
        "g6e.48xlarge" => (191_450, 1_449_132),
        "g4dn.12xlarge" => (47_810, 178_933),
        "trn1.32xlarge" | "trn1n.32xlarge" => (127_610, 481_894),
        "g6e.xlarge" => (3_920, 29_317),
        "g6.xlarge" | "g5.xlarge" => (3_920, 14_162),
        _ => return None,
    })
}

/// MiB of a `NNGi` / `NNMi` quantity (the catalog's shm sizes); `None` otherwise.
fn mebibytes(q: &str) -> Option<u64> {
    if let Some(g) = q.strip_suffix("Gi") {
        g.parse::<u64>().ok().map(|g| g * 1024)
    } else {
        q.strip_suffix("Mi").and_then(|m| m.parse().ok())
    }
}

/// Extra `requests` (cpu, memory, hugepages) and `limits` (hugepages: must equal the
/// request) for a whole-node job pod. Memory covers the memory-backed /dev/shm, which
/// counts against the pod's memory. No memory limit: training may use the node's RAM.
pub fn extra_resources(p: &InstanceProfile) -> (Map<String, Value>, Map<String, Value>) {
    let mut requests = Map::new();
    let mut limits = Map::new();
    let want = mebibytes(&p.shm_default).unwrap_or(0) + PROCESS_MEMORY_MI;
    if let Some((cpu, mem)) = allocatable(&p.name) {
        let cpu_cores = cpu * SHARE_PERCENT / 100 / 1000;
        requests.insert("cpu".into(), json!(cpu_cores.max(1).to_string()));
        let cap = mem * SHARE_PERCENT / 100;
        requests.insert("memory".into(), json!(format!("{}Mi", want.min(cap))));
    } else if p.max_efa > 0 {
        // A type the table lacks (p6e-gb200): the API server refuses a pod that asks for
        // hugepages without cpu or memory ("HugePages require cpu or memory",
        // https://github.com/kubernetes/kubernetes/blob/v1.34.4/pkg/apis/core/validation/validation.go),
        // so it still asks for the memory its processes and /dev/shm use, capped at
        // [`SHARE_PERCENT`] of the instance's memory when the catalog has it.
        let cap = p
            .memory_gi_b
            .map_or(u64::MAX, |g| u64::from(g) * 1024 * SHARE_PERCENT / 100);
        requests.insert("memory".into(), json!(format!("{}Mi", want.min(cap))));
    }
    if p.max_efa > 0 {
        requests.insert(HUGEPAGES.into(), json!(HUGEPAGES_2MI));
        limits.insert(HUGEPAGES.into(), json!(HUGEPAGES_2MI));
    }
    (requests, limits)
}
