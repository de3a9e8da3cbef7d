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
