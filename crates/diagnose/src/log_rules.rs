//! Layout faults visible in an NCCL log: which transport connects which ranks, judged
//! against where those ranks run and what the instance type offers.

use crate::context::LogContext;
use crate::env_rules;
use crate::finding::{Evidence, Finding, Severity};
use crate::nccl_log::{ConnRecord, LogSummary};
use crate::options::Options;
use crate::transport::TransportClass;

const ONE_POD_PER_NODE: &str = "Run one pod per node that requests all GPUs of the node \
(nvidia.com/gpu) and all its EFA interfaces (vpc.amazonaws.com/efa), and start one process \
per GPU inside it (torchrun --nproc_per_node = GPUs per node); ranks in one pod then talk \
over NVLink/PCIe P2P instead of the network.";

pub(crate) fn check(summary: &LogSummary, opts: &Options) -> Vec<Finding> {
    let ctx = LogContext::new(summary, opts);
    let mut findings = Vec::new();
    findings.extend(same_host_over_net(summary));
    findings.extend(one_gpu_per_pod(summary, &ctx));
    findings.extend(net_socket(summary));
    findings.extend(shm_between_local_gpus(summary, &ctx));
    findings.extend(p2p_read(summary, &ctx));
    findings.extend(no_gdrdma(summary, &ctx));
    findings.extend(env_rules::check(summary, &ctx, opts.aws_ofi_nccl_version));
    findings.extend(nccl_warnings(summary));
    if summary.connections.is_empty() {
        findings.push(Finding::new(
            Severity::Info,
            "no-transport-lines",
            "the log has no `Channel ... via ...` lines, so transports cannot be judged".into(),
            "Set NCCL_DEBUG=INFO (NCCL_DEBUG_SUBSYS including INIT) and capture the log from \
             the start of the job, when communicators connect."
                .into(),
        ));
    }
    findings
}

fn evidence<'a>(records: impl Iterator<Item = &'a ConnRecord>) -> Vec<Evidence> {
    records.map(|r| Evidence::new(r.line, &r.raw)).collect()
}

fn of_class(summary: &LogSummary, class: TransportClass) -> impl Iterator<Item = &ConnRecord> {
    summary
        .connections
        .iter()
        .filter(move |record| record.conn.transport.class == class)
}

fn distinct_pairs<'a>(records: impl Iterator<Item = &'a ConnRecord>) -> usize {
    let mut pairs: Vec<(u32, u32)> = records.map(|r| (r.conn.src, r.conn.dst)).collect();
    pairs.sort_unstable();
    pairs.dedup();
    pairs.len()
}

/// A NET connection whose peer rank was seen printing from the same host.
fn same_host_over_net(summary: &LogSummary) -> Option<Finding> {
    let same_host = |record: &&ConnRecord| {
        let conn = &record.conn;
        let me = conn.printing_rank();
        let (peer, peer_local) = if me == conn.src {
            (conn.dst, conn.dst_local)
        } else {
            (conn.src, conn.src_local)
        };
        peer != me && summary.rank_is_on(peer, peer_local, &record.host)
    };
    let hits: Vec<&ConnRecord> = summary
        .connections
        .iter()
        .filter(|record| record.conn.transport.class.is_net())
        .filter(same_host)
        .collect();
    if hits.is_empty() {
        return None;
    }
    Some(
        Finding::new(
            Severity::Error,
            "same-host-over-net",
            format!(
                "{} rank pair(s) on the same host connect over the network ({}) instead of \
                 P2P or SHM",
                distinct_pairs(hits.iter().copied()),
                hits[0].conn.transport.label
            ),
            format!(
                "{ONE_POD_PER_NODE} If the processes already share a pod, remove \
                 NCCL_P2P_DISABLE/NCCL_SHM_DISABLE and give the pod hostIPC: true."
            ),
        )
        .with_evidence(evidence(hits.into_iter())),
    )
}

/// Every rank alone on its NCCL node: one GPU per pod, the seeds' 4-pod x 1-GPU run.
fn one_gpu_per_pod(summary: &LogSummary, ctx: &LogContext) -> Option<Finding> {
    let world = summary.world()?;
    if world.n_ranks < 2 || world.n_nodes < 2 {
        return None;
    }
    let gpus = ctx.instance.map(|instance| instance.gpus);
    if gpus.is_some_and(|gpus| world.local_ranks >= gpus) {
        return None;
    }
    let lines = summary
        .shapes
        .iter()
        .filter(|(_, shape)| *shape == world)
        .map(|(line, _)| line.clone());
    let shape = format!(
        "nRanks {} nNodes {} localRanks {}",
        world.n_ranks, world.n_nodes, world.local_ranks
    );
    let net = summary
        .connections
        .iter()
        .find(|record| record.conn.transport.class.is_net())
        .map(|record| format!(" (they use {})", record.conn.transport.label))
        .unwrap_or_default();
    let (severity, rule, message) = match (gpus, world.local_ranks) {
        (Some(gpus), 1) => (
            Severity::Error,
            "one-gpu-per-pod",
            format!(
                "{shape}: each pod holds one GPU of a {gpus}-GPU {}, so GPUs that share an \
                 instance talk over the network{net}",
                ctx.name()
            ),
        ),
        (Some(gpus), local) => (
            Severity::Warning,
            "partial-node-pods",
            format!(
                "{shape}: each pod holds {local} of the {gpus} GPUs of {}; pods that share an \
                 instance talk over the network{net}",
                ctx.name()
            ),
        ),
        (None, 1) => (
            Severity::Warning,
            "one-gpu-per-pod",
            format!(
                "{shape}: every rank is alone on its node{net}; if the nodes have more than one \
                 GPU, pods that share an instance talk over the network (instance type unknown: \
                 pass --instance-type to judge)"
            ),
        ),
        (None, _) => return None,
    };
    Some(Finding::new(severity, rule, message, ONE_POD_PER_NODE.into()).with_evidence(lines))
}

/// What TCP costs, as measured (docs/measurements.md, 4 x H200 on one host, all-reduce
/// 256 MiB bf16 busbw): NCCL over NET/Socket vs over NVLink.
const SOCKET_COST: &str = "TCP measured 88x slower than NVLink (docs/measurements.md: \
3.9 vs 338.6 GB/s all-reduce busbw)";

/// Rank pairs that connect over NET/Socket (TCP). `Using network Socket` alone is no
/// fault: NCCL prints it whenever no net plugin loaded, also on one node where every pair
/// uses P2P or SHM. It counts only when the communicator spans nodes and the connection
/// lines are missing, since inter-node pairs then have no other way to connect.
fn net_socket(summary: &LogSummary) -> Option<Finding> {
    let sockets: Vec<&ConnRecord> = of_class(summary, TransportClass::NetSocket).collect();
    let socket_network: Vec<Evidence> = summary
        .network_lines
        .iter()
        .filter(|line| line.text.contains("Using network Socket"))
        .cloned()
        .collect();
    let spanning = summary.world().filter(|world| world.n_nodes > 1);
    let message = match (sockets.is_empty(), spanning) {
        (false, _) => format!(
            "{} rank pair(s) connect over NET/Socket (TCP): EFA is not in use; {SOCKET_COST}",
            distinct_pairs(sockets.iter().copied())
        ),
        (true, Some(world)) if !socket_network.is_empty() && summary.connections.is_empty() => {
            format!(
                "the communicator spans {} nodes and NCCL chose network Socket, so rank pairs \
                 across nodes connect over TCP (the log has no connection lines to count \
                 them): EFA is not in use; {SOCKET_COST}",
                world.n_nodes
            )
        }
        _ => return None,
    };
    let shapes: Vec<Evidence> = match (sockets.is_empty(), spanning) {
        (true, Some(world)) => summary
            .shapes
            .iter()
            .filter(|(_, shape)| *shape == world)
            .map(|(line, _)| line.clone())
            .take(1)
            .collect(),
        _ => Vec::new(),
    };
    let plugin = if summary.ofi_lines.is_empty() {
        " The log has no `NET/OFI` line: aws-ofi-nccl was not loaded (check the image ships it \
         and LD_LIBRARY_PATH / NCCL_NET_PLUGIN find it)."
    } else {
        " aws-ofi-nccl printed `NET/OFI` lines but NCCL did not use it: look for its WARN \
         lines (no EFA device in the pod, fi_info -p efa empty)."
    };
    // The missing-plugin line says why, so it leads; one copy is enough (every rank prints it).
    let evidence = summary
        .plugin_missing
        .first()
        .cloned()
        .into_iter()
        .chain(evidence(sockets.into_iter()))
        .chain(shapes)
        .chain(socket_network);
    Some(
        Finding::new(
            Severity::Error,
            "net-socket",
            message,
            format!(
                "Request vpc.amazonaws.com/efa (requests = limits, all interfaces of the type) \
                 and add IPC_LOCK; the EFA security group must allow all traffic to and from \
                 itself.{plugin} A healthy log shows `NET/OFI Initializing aws-ofi-nccl` and \
                 `via NET/Libfabric/<n>/GDRDMA`."
            ),
        )
        .with_evidence(evidence),
    )
}

fn shm_between_local_gpus(summary: &LogSummary, ctx: &LogContext) -> Option<Finding> {
    let shm: Vec<&ConnRecord> = of_class(summary, TransportClass::Shm).collect();
    let first = shm.first()?;
    let pairs = distinct_pairs(shm.iter().copied());
    let (severity, verdict) = match ctx.instance {
        Some(instance) if instance.has_nvlink() => (
            Severity::Error,
            format!(
                "{} has NVLink, so P2P is blocked (SHM measured 13x slower than NVLink, \
                 docs/measurements.md)",
                ctx.name()
            ),
        ),
        Some(_) => (
            Severity::Info,
            format!(
                "expected on {}: its GPUs connect through the CPU (NODE/SYS in topo), where \
                 NCCL does not use P2P by default",
                ctx.name()
            ),
        ),
        None => (
            Severity::Warning,
            "P2P is not used; on NVLink types this is 13x slower (docs/measurements.md). Instance type \
             unknown: pass --instance-type to judge"
                .to_string(),
        ),
    };
    Some(
        Finding::new(
            severity,
            "shm-between-local-gpus",
            format!(
                "{pairs} GPU pair(s) on one host use {} (through host memory): {verdict}",
                first.conn.transport.label
            ),
            "Let P2P work: give the pod hostIPC: true and keep all GPU processes of a node in \
             one pod; on NVSwitch hosts (p4d, p5*, p6) NVIDIA Fabric Manager must run on the \
             node; do not set NCCL_P2P_DISABLE=1 or an NCCL_P2P_LEVEL below the link \
             `nvidia-smi topo -m` shows."
                .into(),
        )
        .with_evidence(evidence(shm.into_iter())),
    )
}

fn p2p_read(summary: &LogSummary, ctx: &LogContext) -> Option<Finding> {
    let reads: Vec<&ConnRecord> = of_class(summary, TransportClass::P2p)
        .filter(|record| record.conn.transport.read)
        .collect();
    reads.first()?;
    let note = match ctx.instance {
        Some(instance) if instance.gpu.starts_with("A100") => format!(
            "expected on {}: NCCL reads over NVLink on A100 by default, and Nitro hosts run P2P \
             in read mode",
            ctx.name()
        ),
        Some(_) => format!(
            "read mode on {} is not NCCL's default; it is set by NCCL_P2P_READ_ENABLE or the \
             virtualisation layer",
            ctx.name()
        ),
        None => "expected on p4d/p4de (A100 over NVLink) and on Nitro hosts".into(),
    };
    Some(
        Finding::new(
            Severity::Info,
            "p2p-read",
            format!(
                "{} GPU pair(s) use P2P in read mode: {note}",
                distinct_pairs(reads.iter().copied())
            ),
            "Nothing to fix: read mode still uses NVLink. Measure with nccl-tests before \
             changing NCCL_P2P_READ_ENABLE."
                .into(),
        )
        .with_evidence(evidence(reads.into_iter())),
    )
}

/// GDRDMA on the connection lines is what NCCL used. A `GDR 0` in the ring summary next to
/// GDRDMA connections (as in the seeds' p4d log) is not a fault, so it only counts when no
/// connection shows GDRDMA.
fn no_gdrdma(summary: &LogSummary, ctx: &LogContext) -> Option<Finding> {
    let rdma_net: Vec<&ConnRecord> = summary
        .connections
        .iter()
        .filter(|r| {
            matches!(
                r.conn.transport.class,
                TransportClass::NetEfa | TransportClass::NetIb
            )
        })
        .collect();
    if rdma_net.iter().any(|record| record.conn.transport.gdr) {
        return None;
    }
    let gdr_off: Vec<Evidence> = summary
        .gdr_flags
        .iter()
        .filter(|(_, on)| !on)
        .map(|(line, _)| line.clone())
        .collect();
    if rdma_net.is_empty() && gdr_off.is_empty() {
        return None;
    }
    let severity = match ctx.instance {
        Some(instance) if !instance.rdma_capable() => return None,
        Some(_) => Severity::Warning,
        None => Severity::Info,
    };
    let capable = match ctx.instance {
        Some(_) => format!("{} supports GPUDirect RDMA", ctx.name()),
        None => "p4d, p5*, p6, g6 and g6e support GPUDirect RDMA (instance type unknown)".into(),
    };
    Some(
        Finding::new(
            severity,
            "no-gdrdma",
            format!(
                "network transfers run without GPUDirect RDMA (no GDRDMA, or GDR 0); {capable}"
            ),
            "Use aws-ofi-nccl >= 1.7 with libfabric >= 1.18 (no FI_* needed), keep IPC_LOCK, \
             and do not set NCCL_NET_GDR_LEVEL or NCCL_NET_GDR_READ=0; on plugin 1.6.x set \
             FI_EFA_USE_DEVICE_RDMA=1 on p4/p5."
                .into(),
        )
        .with_evidence(evidence(rdma_net.into_iter()).into_iter().chain(gdr_off)),
    )
}

fn nccl_warnings(summary: &LogSummary) -> Option<Finding> {
    summary.warnings.first()?;
    Some(
        Finding::new(
            Severity::Warning,
            "nccl-warn",
            format!("NCCL printed {} WARN line(s)", summary.warnings.len()),
            "Read the WARN lines: they usually name the device or setting NCCL gave up on.".into(),
        )
        .with_evidence(summary.warnings.iter().cloned()),
    )
}
