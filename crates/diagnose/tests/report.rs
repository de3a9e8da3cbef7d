//! Bad input errors and the JSON and text shapes machines and people rely on.

mod common;

use common::{fixture, opts};
use rstest::rstest;
use trainplace_diagnose::{DiagnoseError, InputKind, diagnose};

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
