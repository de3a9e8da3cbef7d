//! `trainplace diagnose`: exit codes for layout faults and bad input, and flag validation
//! (the clap layer in src/cli/diagnose.rs). Fixtures live in crates/diagnose/fixtures/.

use std::io::Write;
use std::path::PathBuf;

use clap::Parser;
use rstest::rstest;
use trainplace::cli::diagnose::{self as cli, DiagnoseArgs};

fn fixture_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("crates/diagnose/fixtures")
        .join(name)
}

#[derive(Parser)]
struct TestCli {
    #[command(flatten)]
    args: DiagnoseArgs,
}

fn args(list: &[&str]) -> DiagnoseArgs {
    let mut argv = vec!["trainplace-diagnose"];
    argv.extend_from_slice(list);
    TestCli::try_parse_from(argv).expect("valid args").args
}

fn temp_file(bytes: &[u8]) -> tempfile::NamedTempFile {
    let mut file = tempfile::NamedTempFile::new().expect("temp file");
    file.write_all(bytes).expect("write");
    file
}

#[rstest]
#[case::healthy_log("p5_1pod_8gpu_p2p_cumem.log", &[], 0)]
#[case::warnings_only("p5_2node_efa_no_gdr.log", &[], 0)]
#[case::layout_fault("seed003_p4d_4pods_1gpu.log", &[], 1)]
#[case::layout_fault_json("seed001_shm_socket.log", &["-o", "json"], 1)]
#[case::topo("topo_p4d_ansi_nics.txt", &["--kind", "topo"], 0)]
#[case::tests_far_below("nccl_tests_p5_single_node_shm.txt", &["--output", "json"], 1)]
#[case::tests_with_flags("nccl_tests_no_rank_lines.txt", &["--instance-type", "p5.48xlarge", "--nodes", "1"], 0)]
#[case::kind_mismatch("topo_p5_ansi.txt", &["--kind", "nccl-tests"], 2)]
#[case::ofi_flag("stale_env_ofi174.log", &["--aws-ofi-nccl-version", "1.6.4"], 0)]
#[case::socket_net_unused_on_one_node("single_node_nvlink_socket_net_unused.log", &[], 0)]
#[case::topo_pods_with_gpu_names("topo_2pods_prefix_gpu_names.txt", &["-o", "json"], 0)]
fn exit_codes(#[case] name: &str, #[case] extra: &[&str], #[case] code: i32) {
    let path = fixture_path(name);
    let mut list = vec![path.to_str().unwrap()];
    list.extend_from_slice(extra);
    assert_eq!(cli::run(&args(&list)).expect("run") as i32, code);
}

#[rstest]
#[case::empty(b"".as_slice())]
#[case::whitespace(b"  \n\t\n".as_slice())]
#[case::binary(&[0x7f, b'E', b'L', b'F', 2, 1, 1, 0, 0, 0, 0xff, 0xfe, 0x00, 0x13])]
#[case::unknown_text(b"Epoch 1/3: loss 2.31\nEpoch 2/3: loss 1.97\n".as_slice())]
#[case::invalid_utf8(&[0xff; 64])]
fn bad_input_exits_2(#[case] bytes: &[u8]) {
    let file = temp_file(bytes);
    assert_eq!(
        cli::run(&args(&[file.path().to_str().unwrap()])).unwrap() as i32,
        2
    );
}

#[test]
fn missing_file_exits_2() {
    assert_eq!(
        cli::run(&args(&["/nonexistent/trainplace/log.txt"])).unwrap() as i32,
        2
    );
}

#[test]
fn broken_expectation_table_exits_2() {
    let table = temp_file(b"rows: [ {instance_type: x");
    let path = fixture_path("nccl_tests_p5_single_node.txt");
    let list = [
        path.to_str().unwrap(),
        "--expectations",
        table.path().to_str().unwrap(),
    ];
    assert_eq!(cli::run(&args(&list)).unwrap() as i32, 2);
}

#[test]
fn flags_are_validated_by_clap() {
    let parse = |list: &[&str]| {
        let mut argv = vec!["x"];
        argv.extend_from_slice(list);
        TestCli::try_parse_from(argv).map(|_| ())
    };
    assert!(parse(&["f", "--nodes", "0"]).is_err());
    assert!(parse(&["f", "--kind", "pcap"]).is_err());
    assert!(parse(&["f", "--aws-ofi-nccl-version", "latest"]).is_err());
    assert!(parse(&["f", "-o", "yaml"]).is_err());
    assert!(parse(&["-", "--kind", "nccl-log", "-o", "json"]).is_ok());
}

/// `trainplace diagnose ARGS -o json` as the binary runs it: (exit code, report).
fn diagnose_json(list: &[&str]) -> (i32, serde_json::Value) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_trainplace"))
        .arg("diagnose")
        .args(list)
        .args(["-o", "json"])
        .output()
        .expect("run trainplace");
    let report = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), report)
}

fn finding<'a>(report: &'a serde_json::Value, rule: &str) -> Option<&'a serde_json::Value> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["rule"] == rule)
}

#[test]
fn pods_under_two_layer_3_nodes_are_named_far_apart() {
    let log = fixture_path("p5_2node_efa_no_gdr.log");
    let topology = fixture_path("topology_p5_instances.json");
    let pods = fixture_path("pods_p5_wide.txt");
    let (code, report) = diagnose_json(&[
        log.to_str().unwrap(),
        "--topology",
        topology.to_str().unwrap(),
        "--pods",
        pods.to_str().unwrap(),
    ]);
    // A spread is a warning: the exit code stays the layout's (its only finding above
    // info is no-gdrdma, a warning).
    assert_eq!(code, 0, "{report:#}");
    let network = &report["network"];
    let nodes: Vec<u64> = network["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["nodes"].as_u64().unwrap())
        .collect();
    assert_eq!(nodes, [1, 1, 2], "{network:#}");
    assert_eq!(network["sharedLayer"], 2);
    assert_eq!(
        network["groups"][0]["hosts"],
        serde_json::json!(["p5-worker-0"])
    );
    assert_eq!(network["groups"][1]["ranks"][0], 8);
    assert_eq!(network["groups"][1]["meetsLargestAt"], 2);
    let far = finding(&report, "ranks-network-far").expect("ranks-network-far");
    assert_eq!(far["severity"], "warning");
    assert!(
        far["message"]
            .as_str()
            .unwrap()
            .contains("ranks 8-15 on p5-worker-1 under nn-1a2b3c4d5e6f00004 meet them at layer 2"),
        "{far:#}"
    );
}

#[test]
fn without_pods_the_pod_hosts_are_unknown_and_no_spread_is_claimed() {
    let log = fixture_path("p5_2node_efa_no_gdr.log");
    let topology = fixture_path("topology_p5_instances.json");
    let (code, report) = diagnose_json(&[
        log.to_str().unwrap(),
        "--topology",
        topology.to_str().unwrap(),
    ]);
    assert_eq!(code, 0);
    let unknown = finding(&report, "ranks-network-unknown").expect("unknown hosts");
    assert!(
        unknown["message"]
            .as_str()
            .unwrap()
            .ends_with("p5-worker-0, p5-worker-1"),
        "{unknown:#}"
    );
    assert!(finding(&report, "ranks-network-far").is_none());
    assert!(finding(&report, "ranks-network-close").is_none());
}

#[test]
fn nccl_tests_hosts_under_one_layer_3_node_from_kubectl_labels_are_close() {
    let tests = fixture_path("nccl_tests_p4d_2node_efa.txt");
    let topology = fixture_path("topology_p4d_nodes_labels.txt");
    let (code, report) = diagnose_json(&[
        tests.to_str().unwrap(),
        "--topology",
        topology.to_str().unwrap(),
    ]);
    assert_eq!(code, 0);
    assert_eq!(report["network"]["sharedLayer"], 3);
    assert_eq!(
        report["network"]["groups"][0]["ranks"]
            .as_array()
            .unwrap()
            .len(),
        16
    );
    assert!(
        finding(&report, "ranks-network-close").is_some(),
        "{report:#}"
    );
    assert!(finding(&report, "ranks-network-far").is_none());
}

#[test]
fn a_topology_or_pods_file_with_nothing_to_read_exits_2() {
    let log = fixture_path("p5_2node_efa_no_gdr.log");
    let topology = fixture_path("topology_p5_instances.json");
    let pods = fixture_path("pods_p5_wide.txt");
    let log = log.to_str().unwrap();
    // The pods table is no topology, and the topology no pods table.
    let wrong_topology = [log, "--topology", pods.to_str().unwrap()];
    assert_eq!(cli::run(&args(&wrong_topology)).unwrap() as i32, 2);
    let wrong_pods = [
        log,
        "--topology",
        topology.to_str().unwrap(),
        "--pods",
        topology.to_str().unwrap(),
    ];
    assert_eq!(cli::run(&args(&wrong_pods)).unwrap() as i32, 2);
    let missing = [log, "--topology", "/nonexistent/topology.json"];
    assert_eq!(cli::run(&args(&missing)).unwrap() as i32, 2);
    // --pods means nothing without a topology.
    let mut argv = vec!["x", log, "--pods", "pods.txt"];
    assert!(TestCli::try_parse_from(&argv).is_err());
    argv.extend(["--topology", "t.json"]);
    assert!(TestCli::try_parse_from(&argv).is_ok());
}

/// The labels diagnose reads are the ones the webhook writes its affinity on.
#[test]
fn the_network_labels_are_the_engines() {
    for (n, label) in trainplace_engine::annotations::NETWORK_LAYERS
        .iter()
        .enumerate()
    {
        assert_eq!(
            *label,
            format!("{}{}", trainplace_diagnose::NETWORK_LABEL_PREFIX, n + 1)
        );
    }
}
