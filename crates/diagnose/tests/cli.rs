//! `cli::run` exit codes, bad input errors and the JSON shape machines rely on.

mod common;

use std::io::Write;

use clap::Parser;
use common::{fixture, fixture_path, opts};
use rstest::rstest;
use trainplace_diagnose::cli::{self, DiagnoseArgs};
use trainplace_diagnose::{DiagnoseError, InputKind, diagnose};

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
fn exit_codes(#[case] name: &str, #[case] extra: &[&str], #[case] code: i32) {
    let path = fixture_path(name);
    let mut list = vec![path.to_str().unwrap()];
    list.extend_from_slice(extra);
    assert_eq!(cli::run(&args(&list)).expect("run"), code);
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
        cli::run(&args(&[file.path().to_str().unwrap()])).unwrap(),
        2
    );
}

#[test]
fn missing_file_exits_2() {
    assert_eq!(
        cli::run(&args(&["/nonexistent/trainplace/log.txt"])).unwrap(),
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
    assert_eq!(cli::run(&args(&list)).unwrap(), 2);
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

#[rstest]
#[case::empty("", "empty")]
#[case::binary("\u{0}\u{1}\u{2}ELF", "binary")]
#[case::unknown("hello world\nthis is not a log\n", "unrecognised")]
fn library_errors_name_what_was_expected(#[case] text: &str, #[case] word: &str) {
    let error = diagnose(text, None, &opts(None)).expect_err("must fail");
    let message = error.to_string();
    assert!(message.contains(word), "{message}");
    assert!(
        message.contains("nvidia-smi topo -m") && message.contains("nccl-tests"),
        "{message}"
    );
}

#[test]
fn kind_mismatch_names_the_kind_and_signature() {
    let error = diagnose(
        &fixture("topo_p5_ansi.txt"),
        Some(InputKind::NcclLog),
        &opts(None),
    )
    .unwrap_err();
    assert!(matches!(
        error,
        DiagnoseError::KindNotFound {
            kind: InputKind::NcclLog,
            ..
        }
    ));
    assert!(error.to_string().contains("--kind nccl-log"));
}

#[test]
fn json_shape() {
    let report = diagnose(
        &fixture("seed001_shm_socket.log"),
        None,
        &opts(Some("p4d.24xlarge")),
    )
    .unwrap();
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["kinds"], serde_json::json!(["nccl-log"]));
    let finding = &json["findings"][0];
    assert_eq!(finding["severity"], "error");
    for key in ["rule", "message", "fix"] {
        assert!(
            finding[key].as_str().is_some_and(|s| !s.is_empty()),
            "{key}"
        );
    }
    let evidence = &finding["evidence"][0];
    assert!(evidence["line"].as_u64().is_some_and(|line| line >= 2));
    assert!(
        evidence["text"]
            .as_str()
            .unwrap()
            .contains("NCCL INFO Channel")
    );
    let host = &json["nccl_log"]["hosts"][0];
    assert_eq!(host["host"], "llama-3-8b-node-0-0");
    assert_eq!(
        host["ranks"][3],
        serde_json::json!({"rank": 3, "local_rank": 3})
    );
    let transports = host["transports"].as_array().unwrap();
    assert!(
        transports
            .iter()
            .any(|t| t["label"] == "NET/Socket/0" && t["class"] == "net-socket")
    );
    assert!(json.get("topo").is_none() && json.get("nccl_tests").is_none());
    let severities: Vec<_> = json["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["severity"].clone())
        .collect();
    assert!(
        severities
            .iter()
            .all(|s| ["error", "warning", "info"].contains(&s.as_str().unwrap()))
    );
}

#[test]
fn json_shape_nccl_tests() {
    let report = diagnose(&fixture("nccl_tests_p4d_2node_efa.txt"), None, &opts(None)).unwrap();
    let json = serde_json::to_value(&report).unwrap();
    let tests = &json["nccl_tests"];
    assert_eq!(tests["verdict"], "within");
    assert_eq!(tests["nodes"], 2);
    assert_eq!(tests["expectation"]["basis"], "estimate");
    assert!(tests["rows"][27]["busbw"].as_f64().unwrap() > 30.0);
    assert!(tests["peak_busbw"].as_f64().unwrap() > 40.0);
}

#[test]
fn text_rendering_is_compact_and_complete() {
    let report = diagnose(&fixture("seed001_shm_socket.log"), None, &opts(None)).unwrap();
    let text = trainplace_diagnose::render_text(&report, "seed001");
    assert!(text.starts_with("trainplace diagnose: seed001 (nccl-log)"));
    assert!(text.contains("llama-3-8b-node-0-0"));
    assert!(text.contains("SHM/direct/direct") && text.contains("NET/Socket/0"));
    assert!(text.contains("ERROR   net-socket"));
    assert!(text.contains("fix: "));
    assert!(text.lines().count() < 40, "{text}");
}
