//! NCCL INFO logs: every transport string, host grouping, rank mapping, every finding.

mod common;

use common::{fixture, opts, opts_full, rules};
use rstest::rstest;
use trainplace_diagnose::{EnvSource, InputKind, Severity, TransportClass, diagnose};

const E: Severity = Severity::Error;
const W: Severity = Severity::Warning;
const I: Severity = Severity::Info;

#[rstest]
#[case::p2p_cumem("p5_1pod_8gpu_p2p_cumem.log", "P2P/CUMEM", TransportClass::P2p, 8)]
#[case::p2p_cumem_read(
    "p4d_1pod_8gpu_p2p_cumem_read.log",
    "P2P/CUMEM/read",
    TransportClass::P2p,
    8
)]
#[case::p2p_ipc("nccl218_p2p_ipc.log", "P2P/IPC", TransportClass::P2p, 8)]
#[case::p2p_ipc_read("nccl218_p2p_ipc_read.log", "P2P/IPC/read", TransportClass::P2p, 8)]
#[case::p2p_direct_pointer("p2p_direct_pointer.log", "P2P/direct pointer", TransportClass::P2p, 4)]
#[case::shm("p5_shm_direct.log", "SHM/direct/direct", TransportClass::Shm, 4)]
#[case::shm_seed("seed001_shm_socket.log", "SHM/direct/direct", TransportClass::Shm, 3)]
#[case::libfabric_gdrdma(
    "p5_2node_efa_gdrdma.log",
    "NET/Libfabric/0/GDRDMA",
    TransportClass::NetEfa,
    2
)]
#[case::libfabric_gdrdma_seed(
    "seed003_p4d_4pods_1gpu.log",
    "NET/Libfabric/0/GDRDMA",
    TransportClass::NetEfa,
    6
)]
#[case::libfabric_plain(
    "p5_2node_efa_no_gdr.log",
    "NET/Libfabric/1",
    TransportClass::NetEfa,
    2
)]
#[case::aws_libfabric(
    "stale_env_ofi174.log",
    "NET/AWS Libfabric/1/GDRDMA",
    TransportClass::NetEfa,
    1
)]
#[case::socket(
    "p4d_2node_net_socket.log",
    "NET/Socket/0",
    TransportClass::NetSocket,
    2
)]
#[case::socket_seed("seed001_shm_socket.log", "NET/Socket/0", TransportClass::NetSocket, 4)]
#[case::ib_gdrdma("ib_cluster_net_ib.log", "NET/IB/0/GDRDMA", TransportClass::NetIb, 1)]
#[case::ib_plain("ib_cluster_net_ib.log", "NET/IB/1", TransportClass::NetIb, 1)]
fn every_transport_string_is_recognised(
    #[case] name: &str,
    #[case] label: &str,
    #[case] class: TransportClass,
    #[case] min_pairs: usize,
) {
    let report = diagnose(&fixture(name), None, &opts(None)).expect("report");
    let log = report.nccl_log.expect("nccl log summary");
    let uses: Vec<_> = log
        .hosts
        .iter()
        .flat_map(|host| &host.transports)
        .filter(|t| t.label == label)
        .collect();
    assert!(!uses.is_empty(), "{label} not found in {name}");
    assert!(
        uses.iter().all(|t| t.class == class),
        "{label} misclassified"
    );
    let pairs: usize = uses.iter().map(|t| t.pairs).sum();
    assert!(pairs >= min_pairs, "{label}: {pairs} pairs < {min_pairs}");
}

#[rstest]
#[case::healthy_nvlink("p5_1pod_8gpu_p2p_cumem.log", None, None, vec![], 0)]
#[case::healthy_two_nodes("p5_2node_efa_gdrdma.log", None, None, vec![], 0)]
#[case::healthy_prefixed("kubectl_prefix_timestamps.log", None, None, vec![], 0)]
#[case::partial_node_when_type_known("kubectl_prefix_timestamps.log", Some("p5.48xlarge"), None, vec![(W, "partial-node-pods")], 0)]
#[case::seed_one_gpu_per_pod("seed003_p4d_4pods_1gpu.log", None, None,
    vec![(I, "nccl-proto-forced"), (I, "nccl-topo-file"), (E, "one-gpu-per-pod")], 1)]
#[case::seed_one_gpu_per_pod_unknown_type("seed003_p4d_4pods_1gpu.log", Some("g4dn.xlarge"), None,
    vec![(I, "instance-type-unknown"), (I, "nccl-proto-forced"), (I, "nccl-topo-file"), (W, "one-gpu-per-pod")], 0)]
#[case::seed_shm_and_socket("seed001_shm_socket.log", None, None,
    vec![(W, "shm-between-local-gpus"), (E, "net-socket")], 1)]
#[case::seed_shm_on_nvlink_type("seed001_shm_socket.log", Some("p4d.24xlarge"), None,
    vec![(E, "net-socket"), (E, "shm-between-local-gpus")], 1)]
#[case::shm_on_p5("p5_shm_direct.log", None, None, vec![(E, "shm-between-local-gpus")], 1)]
#[case::shm_expected_on_pcie("p5_shm_direct.log", Some("g5.48xlarge"), None, vec![(I, "shm-between-local-gpus")], 0)]
#[case::p2p_read_note("p4d_1pod_8gpu_p2p_cumem_read.log", None, None,
    vec![(I, "nccl-proto-forced"), (I, "nccl-topo-file"), (I, "p2p-read")], 0)]
#[case::p2p_read_old_format("nccl218_p2p_ipc_read.log", None, None, vec![(I, "p2p-read")], 0)]
#[case::socket_between_nodes("p4d_2node_net_socket.log", None, None,
    vec![(I, "p2p-read"), (W, "nccl-warn"), (E, "net-socket")], 1)]
#[case::no_gdrdma("p5_2node_efa_no_gdr.log", None, None, vec![(W, "no-gdrdma")], 0)]
#[case::no_gdrdma_not_expected_on_g5("p5_2node_efa_no_gdr.log", Some("g5.48xlarge"), None, vec![], 0)]
#[case::same_host_net("same_host_over_net.log", None, None, vec![(W, "p2p-disabled"), (E, "same-host-over-net")], 1)]
#[case::stale_env("stale_env_ofi174.log", None, None,
    vec![(W, "nccl-proto-forced"), (W, "nccl-topo-file"), (W, "stale-env"), (W, "stale-env"), (W, "stale-env")], 0)]
#[case::stale_env_plugin_16("stale_env_ofi174.log", Some("p5.48xlarge"), Some("1.6.4"),
    vec![(W, "nccl-proto-forced"), (W, "nccl-topo-file"), (W, "stale-env"), (W, "stale-env")], 0)]
#[case::ib_cluster("ib_cluster_net_ib.log", None, None, vec![], 0)]
// `Using network Socket` alone (no plugin in the image, one node, every pair over P2P)
// is not a fault.
#[case::socket_net_unused_on_one_node("single_node_nvlink_socket_net_unused.log", None, None, vec![], 0)]
fn findings_and_exit_code(
    #[case] name: &str,
    #[case] instance: Option<&str>,
    #[case] ofi: Option<&str>,
    #[case] expected: Vec<(Severity, &str)>,
    #[case] exit: i32,
) {
    let report = diagnose(&fixture(name), None, &opts_full(instance, None, ofi)).expect("report");
    let mut expected = expected;
    expected.sort();
    assert_eq!(rules(&report), expected, "{name}");
    assert_eq!(report.exit_code(), exit, "{name}");
    for finding in &report.findings {
        assert!(!finding.fix.is_empty(), "{} has no fix", finding.rule);
        if finding.rule != "instance-type-unknown" {
            assert!(
                !finding.evidence.is_empty(),
                "{} has no evidence",
                finding.rule
            );
        }
    }
}

#[test]
fn evidence_points_at_the_real_line() {
    let text = fixture("seed001_shm_socket.log");
    let report = diagnose(&text, None, &opts(None)).expect("report");
    let socket = report
        .findings
        .iter()
        .find(|f| f.rule == "net-socket")
        .expect("net-socket");
    let lines: Vec<&str> = text.lines().collect();
    for evidence in &socket.evidence {
        assert_eq!(lines[evidence.line - 1].trim_end(), evidence.text);
        assert!(evidence.text.contains("NET/Socket"));
    }
    let shm = report
        .findings
        .iter()
        .find(|f| f.rule == "shm-between-local-gpus")
        .unwrap();
    assert_eq!(shm.evidence.len() + shm.more_evidence, 6);
}

#[test]
fn seed_rank_to_local_rank_mapping() {
    let report = diagnose(&fixture("seed001_shm_socket.log"), None, &opts(None)).unwrap();
    let log = report.nccl_log.unwrap();
    assert_eq!(log.hosts.len(), 1);
    let host = &log.hosts[0];
    assert_eq!(host.host, "llama-3-8b-node-0-0");
    assert_eq!(host.processes, 4);
    let mapping: Vec<(u32, u32)> = host.ranks.iter().map(|r| (r.rank, r.local_rank)).collect();
    assert_eq!(mapping, [(0, 0), (1, 1), (2, 2), (3, 3)]);
}

#[test]
fn old_bus_id_format_falls_back_to_the_device_index() {
    let report = diagnose(&fixture("nccl218_p2p_ipc.log"), None, &opts(None)).unwrap();
    let log = report.nccl_log.unwrap();
    assert_eq!(log.nccl_version.as_deref(), Some("2.18.5+cuda12.2"));
    let mapping: Vec<(u32, u32)> = log.hosts[0]
        .ranks
        .iter()
        .map(|r| (r.rank, r.local_rank))
        .collect();
    assert_eq!(mapping, (0..8).map(|r| (r, r)).collect::<Vec<_>>());
}

#[test]
fn interleaved_prefixed_pods_group_by_host() {
    let report = diagnose(&fixture("kubectl_prefix_timestamps.log"), None, &opts(None)).unwrap();
    let log = report.nccl_log.unwrap();
    let hosts: Vec<_> = log.hosts.iter().map(|h| h.host.as_str()).collect();
    assert_eq!(hosts, ["train-worker-0", "train-worker-1"]);
    for host in &log.hosts {
        let shape = host.comm.expect("comm shape");
        assert_eq!((shape.n_ranks, shape.n_nodes, shape.local_ranks), (4, 2, 2));
        let labels: Vec<_> = host.transports.iter().map(|t| t.label.as_str()).collect();
        assert_eq!(labels, ["P2P/CUMEM", "NET/Libfabric/1/GDRDMA"]);
    }
}

#[test]
fn seed_log_identity_lines() {
    let report = diagnose(&fixture("seed003_p4d_4pods_1gpu.log"), None, &opts(None)).unwrap();
    let log = report.nccl_log.unwrap();
    assert_eq!(log.nccl_version.as_deref(), Some("2.27.3+cuda12.9"));
    assert_eq!(log.aws_ofi_nccl_version.as_deref(), Some("1.16.2"));
    assert_eq!(log.libfabric_version.as_deref(), Some("2.1"));
    assert_eq!(log.platform.as_deref(), Some("p4d.24xlarge"));
    assert_eq!(log.networks, ["Libfabric"]);
    // The plugin added these; the user did not set them.
    let plugin: Vec<_> = log
        .env
        .iter()
        .filter(|e| e.source == EnvSource::Plugin)
        .map(|e| e.name.as_str())
        .collect();
    assert!(plugin.contains(&"NCCL_PROTO") && plugin.contains(&"NCCL_TOPO_FILE"));
}

#[test]
fn stale_env_messages_name_the_variable_and_version() {
    let report = diagnose(&fixture("stale_env_ofi174.log"), None, &opts(None)).unwrap();
    let stale: Vec<&str> = report
        .findings
        .iter()
        .filter(|f| f.rule == "stale-env")
        .map(|f| f.message.as_str())
        .collect();
    for name in ["FI_PROVIDER", "FI_EFA_USE_DEVICE_RDMA", "RDMAV_FORK_SAFE"] {
        assert!(
            stale.iter().any(|m| m.starts_with(name)),
            "{name} not reported: {stale:?}"
        );
    }
    assert!(stale.iter().any(|m| m.contains("1.7.4")));
}

#[test]
fn gdr_zero_next_to_gdrdma_connections_is_not_a_finding() {
    // The seed's p4d log prints `GDR 0` in the ring summary while every connection says
    // GDRDMA; the connection lines are what NCCL used.
    let text = fixture("seed003_p4d_4pods_1gpu.log");
    assert!(text.contains("GDR 0"));
    let report = diagnose(&text, Some(InputKind::NcclLog), &opts(None)).unwrap();
    assert!(!report.has_rule("no-gdrdma"));
}

#[test]
fn log_without_connection_lines_says_so() {
    let text = "host-a:1:2 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\nhost-a:1:2 [0] NCCL INFO Bootstrap: Using eth0:10.0.0.1<0>\n";
    let report = diagnose(text, None, &opts(None)).unwrap();
    assert_eq!(rules(&report), [(I, "no-transport-lines")]);
}

#[test]
fn renumbered_sub_communicator_is_not_mistaken_for_same_host() {
    // One pod's log: world ranks 0 and 1 live on host-a; a data-parallel sub-communicator
    // numbers world rank 8 (host-b, device 0) as rank 1. Its NET link is between nodes.
    let text = "\
host-a:10:10 [0] NCCL INFO comm 0x1 rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0
host-a:11:11 [1] NCCL INFO comm 0x2 rank 1 nRanks 16 nNodes 2 localRanks 8 localRank 1 MNNVL 0
host-a:11:12 [1] NCCL INFO Channel 00/0 : 1[1] -> 2[2] via P2P/CUMEM
host-a:10:13 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Libfabric/0/GDRDMA
";
    let report = diagnose(text, None, &opts(None)).unwrap();
    assert!(
        !report.has_rule("same-host-over-net"),
        "{:?}",
        rules(&report)
    );
    // The same line with the device index of world rank 1 is the real thing.
    let same = text.replace("1[0] [send]", "1[1] [send]");
    let report = diagnose(&same, None, &opts(None)).unwrap();
    assert!(report.has_rule("same-host-over-net"));
}

#[test]
fn per_pair_transports_list_channels() {
    let report = diagnose(&fixture("seed001_shm_socket.log"), None, &opts(None)).unwrap();
    let host = &report.nccl_log.unwrap().hosts[0];
    let pair = host
        .pairs
        .iter()
        .find(|p| (p.src, p.dst) == (3, 2))
        .expect("3 -> 2");
    assert_eq!(pair.transport, "SHM/direct/direct");
    assert_eq!(pair.channels, [0, 1]);
    let socket: Vec<_> = host
        .pairs
        .iter()
        .filter(|p| p.class == TransportClass::NetSocket)
        .collect();
    assert_eq!(socket.len(), 4);
}

fn net_socket(report: &trainplace_diagnose::Report) -> &trainplace_diagnose::Finding {
    report
        .findings
        .iter()
        .find(|f| f.rule == "net-socket")
        .expect("net-socket")
}

#[test]
fn socket_finding_quotes_the_measured_cost_and_the_missing_plugin() {
    let text = fixture("p4d_2node_net_socket.log");
    let report = diagnose(&text, None, &opts(None)).expect("report");
    let socket = net_socket(&report);
    for number in ["88x", "338.6", "3.9", "docs/measurements.md"] {
        assert!(
            socket.message.contains(number),
            "{number}: {}",
            socket.message
        );
    }
    let plugin = socket
        .evidence
        .iter()
        .find(|e| e.text.contains("Could not find: libnccl-net.so"))
        .expect("the missing-plugin line is quoted");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[plugin.line - 1].trim_end(), plugin.text);
    assert!(
        socket
            .evidence
            .iter()
            .any(|e| e.text.contains("via NET/Socket"))
    );
}

#[test]
fn socket_network_across_nodes_fires_without_channel_lines() {
    // A log cut before the connection lines still shows a 2-node communicator on Socket.
    let text: String = fixture("p4d_2node_net_socket.log")
        .lines()
        .filter(|line| !line.contains(" Channel "))
        .map(|line| format!("{line}\n"))
        .collect();
    let report = diagnose(&text, None, &opts(None)).expect("report");
    let socket = net_socket(&report);
    assert_eq!(socket.severity, Severity::Error);
    assert!(socket.message.contains("2 nodes"), "{}", socket.message);
    assert!(
        socket
            .evidence
            .iter()
            .any(|e| e.text.contains("Using network Socket"))
    );
}

#[test]
fn single_node_socket_network_is_no_finding_but_stays_visible() {
    let report = diagnose(
        &fixture("single_node_nvlink_socket_net_unused.log"),
        None,
        &opts(Some("p5.48xlarge")),
    )
    .expect("report");
    assert!(!report.has_rule("net-socket"));
    let log = report.nccl_log.expect("log summary");
    assert_eq!(log.networks, ["Socket"]);
    assert!(
        log.hosts[0]
            .transports
            .iter()
            .all(|t| t.class == TransportClass::P2p)
    );
}
