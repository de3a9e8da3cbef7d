//! nccl-tests output: table parsing, node / instance inference, verdict and its source.

mod common;

use common::{fixture, opts_full, rules};
use rstest::rstest;
use trainplace_diagnose::{Basis, InputKind, Severity, Verdict, diagnose};

#[rstest]
#[case::p5_single(
    "nccl_tests_p5_single_node.txt",
    None,
    None,
    Verdict::Within,
    Some("p5.48xlarge"),
    Some(1),
    28
)]
#[case::p4d_two_nodes(
    "nccl_tests_p4d_2node_efa.txt",
    None,
    None,
    Verdict::Within,
    Some("p4d.24xlarge"),
    Some(2),
    28
)]
#[case::p4d_socket(
    "nccl_tests_p4d_2node_socket.txt",
    None,
    None,
    Verdict::FarBelow,
    Some("p4d.24xlarge"),
    Some(2),
    28
)]
#[case::shm_fallback(
    "nccl_tests_p5_single_node_shm.txt",
    None,
    None,
    Verdict::FarBelow,
    Some("p5.48xlarge"),
    Some(1),
    28
)]
#[case::h200_design_md(
    "nccl_tests_h200_4gpu_design_md.txt",
    None,
    None,
    Verdict::Within,
    None,
    Some(1),
    28
)]
#[case::h200_pinned_type(
    "nccl_tests_h200_4gpu_design_md.txt",
    Some("p5en.48xlarge"),
    None,
    Verdict::Within,
    Some("p5en.48xlarge"),
    Some(1),
    28
)]
#[case::old_format_all_gather(
    "nccl_tests_old_format_all_gather.txt",
    None,
    None,
    Verdict::Within,
    Some("g5.48xlarge"),
    Some(1),
    27
)]
#[case::unknown_gpu(
    "nccl_tests_unknown_gpu.txt",
    None,
    None,
    Verdict::NotJudged,
    None,
    Some(1),
    28
)]
#[case::small_sizes(
    "nccl_tests_small_sizes.txt",
    None,
    None,
    Verdict::NotJudged,
    Some("p5.48xlarge"),
    Some(1),
    18
)]
#[case::no_rank_lines(
    "nccl_tests_no_rank_lines.txt",
    None,
    None,
    Verdict::NotJudged,
    None,
    None,
    28
)]
#[case::no_rank_lines_flags(
    "nccl_tests_no_rank_lines.txt",
    Some("p5.48xlarge"),
    Some(1),
    Verdict::Below,
    Some("p5.48xlarge"),
    Some(1),
    28
)]
#[case::p5_judged_as_two_nodes(
    "nccl_tests_p5_single_node.txt",
    Some("p5.48xlarge"),
    Some(2),
    Verdict::Within,
    Some("p5.48xlarge"),
    Some(2),
    28
)]
#[case::p5_numbers_on_p6(
    "nccl_tests_p5_single_node.txt",
    Some("p6-b200.48xlarge"),
    None,
    Verdict::Below,
    Some("p6-b200.48xlarge"),
    Some(1),
    28
)]
// The same 355 GB/s node: healthy without NVLink SHARP (370 GB/s measured on healthy
// 8 x H100), a slow node with it (480 GB/s), as NCCL's log in the output says.
#[case::p5_nvls_on_is_slow(
    "nccl_tests_p5_nvls_on.txt",
    None,
    None,
    Verdict::Below,
    Some("p5.48xlarge"),
    Some(1),
    28
)]
#[case::p5_nvls_off_is_healthy(
    "nccl_tests_p5_nvls_off.txt",
    None,
    None,
    Verdict::Within,
    Some("p5.48xlarge"),
    Some(1),
    28
)]
fn verdicts(
    #[case] name: &str,
    #[case] instance: Option<&str>,
    #[case] nodes: Option<u32>,
    #[case] verdict: Verdict,
    #[case] instance_type: Option<&str>,
    #[case] inferred_nodes: Option<u32>,
    #[case] rows: usize,
) {
    let report = diagnose(&fixture(name), None, &opts_full(instance, nodes, None)).expect("report");
    let tests = report.nccl_tests.as_ref().expect("nccl-tests summary");
    assert_eq!(tests.verdict, verdict, "{}", tests.basis);
    assert_eq!(tests.instance_type.as_deref(), instance_type);
    assert_eq!(tests.nodes, inferred_nodes);
    assert_eq!(tests.rows.len(), rows);
    assert!(!tests.basis.is_empty());
    let expected_exit = i32::from(verdict == Verdict::FarBelow);
    assert_eq!(report.exit_code(), expected_exit, "{:?}", rules(&report));
}

#[test]
fn no_rank_lines_says_the_node_count_is_unknown() {
    let report = diagnose(
        &fixture("nccl_tests_no_rank_lines.txt"),
        None,
        &opts_full(None, None, None),
    )
    .unwrap();
    let tests = report.nccl_tests.unwrap();
    assert!(
        tests.basis.contains("node count unknown"),
        "{}",
        tests.basis
    );
}

#[test]
fn peak_and_table_values() {
    let report = diagnose(
        &fixture("nccl_tests_p4d_2node_efa.txt"),
        None,
        &opts_full(None, None, None),
    )
    .unwrap();
    let tests = report.nccl_tests.unwrap();
    assert_eq!(tests.test.as_deref(), Some("all_reduce"));
    assert_eq!(tests.ranks, 16);
    assert_eq!(tests.hosts, ["p4d-a", "p4d-b"]);
    assert_eq!(tests.gpus_per_node, Some(8));
    assert_eq!(tests.device.as_deref(), Some("NVIDIA A100-SXM4-40GB"));
    let last = tests.rows.last().unwrap();
    assert_eq!(last.size, 1 << 30);
    assert_eq!(last.data_type, "float");
    assert!(
        (tests.peak_busbw - 40.91).abs() < 0.01,
        "{}",
        tests.peak_busbw
    );
    assert_eq!(tests.peak_size, 1 << 30);
    assert!(tests.avg_busbw.is_some());
    let expectation = tests.expectation.unwrap();
    assert_eq!(expectation.basis, Basis::Estimate);
    assert!(tests.basis.contains("trainplace estimate F3"));
    assert!(tests.basis.contains("GPU name"));
}

#[test]
fn measured_row_is_named_as_measured() {
    let report = diagnose(
        &fixture("nccl_tests_h200_4gpu_design_md.txt"),
        None,
        &opts_full(None, None, None),
    )
    .unwrap();
    let tests = report.nccl_tests.unwrap();
    assert_eq!(tests.expectation.as_ref().unwrap().basis, Basis::Measured);
    assert!(tests.basis.contains("docs/measurements.md"));
    // H200 is in p5e and p5en: the tool says so rather than picking one.
    assert!(tests.basis.contains("p5e.48xlarge / p5en.48xlarge"));
}

#[test]
fn wrong_results_fail_the_pipeline() {
    let report = diagnose(
        &fixture("nccl_tests_wrong_results.txt"),
        None,
        &opts_full(None, None, None),
    )
    .unwrap();
    assert!(report.has_rule("nccl-tests-wrong-results"));
    assert_eq!(report.worst(), Some(Severity::Error));
    assert_eq!(report.exit_code(), 1);
}

#[test]
fn nccl_tests_with_debug_lines_also_diagnoses_the_log() {
    let report = diagnose(
        &fixture("nccl_tests_p4d_2node_socket.txt"),
        None,
        &opts_full(None, None, None),
    )
    .unwrap();
    assert_eq!(report.kinds, [InputKind::NcclTests, InputKind::NcclLog]);
    assert!(report.has_rule("net-socket"));
    assert!(report.has_rule("busbw-far-below-expected"));
    // Asking for one kind runs only that analysis.
    let only = diagnose(
        &fixture("nccl_tests_p4d_2node_socket.txt"),
        Some(InputKind::NcclTests),
        &opts_full(None, None, None),
    )
    .unwrap();
    assert_eq!(only.kinds, [InputKind::NcclTests]);
    assert!(!only.has_rule("net-socket"));
}

#[test]
fn custom_expectation_table_replaces_the_embedded_one() {
    let yaml = "rows:\n  - {instance_type: p5.48xlarge, nodes_min: 1, nodes_max: 1, low: 400, high: 500, basis: measured, source: \"our lab, measured 2026-01\"}\n";
    let mut opts = opts_full(None, None, None);
    opts.expectations = trainplace_diagnose::Expectations::from_yaml(yaml, "test").unwrap();
    let report = diagnose(&fixture("nccl_tests_p5_single_node.txt"), None, &opts).unwrap();
    let tests = report.nccl_tests.unwrap();
    assert_eq!(tests.verdict, Verdict::Below);
    assert!(tests.basis.contains("our lab"));
}

#[test]
fn the_nvls_state_in_the_log_picks_the_floor_and_the_basis_says_which() {
    let on = diagnose(
        &fixture("nccl_tests_p5_nvls_on.txt"),
        None,
        &opts_full(None, None, None),
    )
    .expect("report");
    let on = on.nccl_tests.as_ref().expect("summary");
    assert_eq!(on.nvls, Some(true));
    assert!(on.basis.contains("NVLS on (NCCL's log)"), "{}", on.basis);
    assert_eq!(on.expectation.as_ref().map(|e| e.low), Some(432.0));
    let unknown = diagnose(
        &fixture("nccl_tests_p5_single_node.txt"),
        None,
        &opts_full(None, None, None),
    )
    .expect("report");
    let unknown = unknown.nccl_tests.as_ref().expect("summary");
    assert_eq!(unknown.nvls, None);
    assert!(
        unknown.basis.contains("NVLS state unknown"),
        "{}",
        unknown.basis
    );
    assert_eq!(unknown.expectation.as_ref().map(|e| e.low), Some(333.0));
}
