//! `nvidia-smi topo -m`: with and without ANSI escapes, NVLink / PCIe / through-CPU advice.

mod common;

use common::{fixture, opts, rules};
use rstest::rstest;
use trainplace_diagnose::{InputKind, Severity, diagnose};

#[rstest]
#[case::seed_p4d("topo_seed003_p4d_nv12.txt", 8, "NV12", 28, true, true, "NVL")]
#[case::seed_p5("topo_seed003_p5_nv18.txt", 8, "NV18", 28, true, true, "NVL")]
#[case::seed_g6e(
    "topo_seed003_g6e12_node.txt",
    4,
    "NODE",
    6,
    false,
    false,
    "unset (NCCL default)"
)]
#[case::ansi_p4d_with_nics("topo_p4d_ansi_nics.txt", 8, "NV12", 28, true, true, "NVL")]
#[case::ansi_p5("topo_p5_ansi.txt", 8, "NV18", 28, true, true, "NVL")]
#[case::g5_sys(
    "topo_g5_48xl_sys_synthetic.txt",
    8,
    "SYS",
    16,
    false,
    false,
    "unset (NCCL default)"
)]
#[case::pcie_switch("topo_pcie_switch_pix_synthetic.txt", 4, "PXB", 4, true, false, "PXB")]
fn matrix_is_read(
    #[case] name: &str,
    #[case] gpus: usize,
    #[case] worst: &str,
    #[case] worst_pairs: usize,
    #[case] p2p: bool,
    #[case] nvlink: bool,
    #[case] level: &str,
) {
    let report = diagnose(&fixture(name), None, &opts(None)).expect("report");
    assert_eq!(report.kinds, [InputKind::Topo]);
    let topo = report.topo.expect("topo summary");
    assert_eq!(topo.gpus, gpus);
    assert_eq!(topo.pairs.len(), gpus * (gpus - 1) / 2);
    assert_eq!(topo.worst_link.as_deref(), Some(worst));
    assert_eq!(topo.link_counts.get(worst), Some(&worst_pairs));
    assert_eq!((topo.p2p_possible, topo.nvlink), (p2p, nvlink));
    assert_eq!(topo.p2p_level, level);
    assert!(topo.affinity.iter().all(|a| a.cpu_affinity != "N/A"));
}

#[test]
fn ansi_and_plain_output_give_the_same_summary() {
    let plain = diagnose(&fixture("topo_seed003_p5_nv18.txt"), None, &opts(None)).unwrap();
    let ansi_text = fixture("topo_p5_ansi.txt");
    assert!(
        ansi_text.contains("\u{1b}[4m"),
        "fixture must carry the escapes"
    );
    let ansi = diagnose(&ansi_text, None, &opts(None)).unwrap();
    let plain = serde_json::to_value(plain.topo.unwrap()).unwrap();
    let ansi = serde_json::to_value(ansi.topo.unwrap()).unwrap();
    assert_eq!(plain, ansi);
}

#[test]
fn numa_affinity_and_nics_are_reported() {
    let topo = diagnose(&fixture("topo_p4d_ansi_nics.txt"), None, &opts(None))
        .unwrap()
        .topo
        .unwrap();
    assert_eq!(topo.numa_nodes, ["0", "1"]);
    assert_eq!(topo.affinity[0].cpu_affinity, "0-23,48-71");
    assert_eq!(topo.affinity[7].numa_affinity, "1");
    assert_eq!(topo.nics.len(), 4);
    assert!(topo.nics[0].contains("rdmap16s27"));
    assert!(
        topo.advice
            .iter()
            .any(|a| a.contains("one pod per node") && a.contains("buys NVLink"))
    );
}

#[test]
fn pcie_only_advice_says_one_pod_per_node_buys_no_nvlink() {
    let report = diagnose(&fixture("topo_seed003_g6e12_node.txt"), None, &opts(None)).unwrap();
    let topo = report.topo.as_ref().unwrap();
    assert!(topo.advice.iter().any(|a| a.contains("buys no NVLink")));
    assert_eq!(rules(&report), [(Severity::Info, "topo-p2p-through-cpu")]);
}

#[rstest]
#[case::nvlink_missing("topo_seed003_g6e12_node.txt", "p4d.24xlarge",
    vec![(Severity::Info, "topo-p2p-through-cpu"), (Severity::Warning, "topo-nvlink-missing"), (Severity::Warning, "topo-partial-node")])]
#[case::partial_node("topo_seed003_g6e12_node.txt", "g6e.48xlarge",
    vec![(Severity::Info, "topo-p2p-through-cpu"), (Severity::Warning, "topo-partial-node")])]
#[case::matching_type("topo_seed003_p5_nv18.txt", "p5.48xlarge", vec![])]
fn instance_type_checks(
    #[case] name: &str,
    #[case] instance: &str,
    #[case] expected: Vec<(Severity, &str)>,
) {
    let report = diagnose(&fixture(name), None, &opts(Some(instance))).unwrap();
    let mut expected = expected;
    expected.sort();
    assert_eq!(rules(&report), expected);
    assert_eq!(
        report.exit_code(),
        0,
        "topology advice never fails a pipeline"
    );
}

#[test]
fn single_gpu_has_no_pairs() {
    let topo = diagnose(&fixture("topo_single_gpu.txt"), None, &opts(None))
        .unwrap()
        .topo
        .unwrap();
    assert_eq!(topo.gpus, 1);
    assert!(topo.pairs.is_empty());
    assert!(topo.advice[0].contains("one GPU"));
}

/// Every matrix in an input is read (here one per pod, as
/// `kubectl logs --prefix` prints them), and the GPU model comes from `nvidia-smi -L`.
#[test]
fn every_matrix_is_read_and_named_by_pod_and_gpu_model() {
    let report = diagnose(
        &fixture("topo_2pods_prefix_gpu_names.txt"),
        None,
        &opts(None),
    )
    .unwrap();
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["topo"]["gpus"], 8);
    assert_eq!(json["topo"]["gpu_model"], "NVIDIA H100 80GB HBM3");
    assert_eq!(
        json["topo"]["source"],
        "pod/llama-train-worker-0-8xk2q/nccl-check"
    );
    let more = json["more_topo"].as_array().expect("the second matrix");
    assert_eq!(more.len(), 1);
    assert_eq!(more[0]["gpus"], 4);
    assert_eq!(more[0]["gpu_model"], "NVIDIA H100 80GB HBM3");
    // H100 80GB HBM3 x 8 is p5.48xlarge: the 4-GPU pod holds half a node.
    assert_eq!(rules(&report), [(Severity::Warning, "topo-partial-node")]);
    let partial = &report.findings[0];
    assert!(
        partial.message.contains("4 of the 8 GPUs of p5.48xlarge"),
        "{}",
        partial.message
    );
    assert!(
        partial.message.contains("NVIDIA H100 80GB HBM3"),
        "{}",
        partial.message
    );
    assert!(partial.evidence[0].text.contains("llama-train-worker-1"));
    let text = trainplace_diagnose::render_text(&report, "pods");
    assert!(text.contains("NVIDIA H100 80GB HBM3"), "{text}");
    assert!(text.contains("pod/llama-train-worker-1-m4tzp"), "{text}");
    assert_eq!(report.exit_code(), 0);
}

#[test]
fn the_flag_wins_over_the_gpu_model() {
    let report = diagnose(
        &fixture("topo_2pods_prefix_gpu_names.txt"),
        None,
        &opts(Some("p5.48xlarge")),
    )
    .unwrap();
    let partial = &report.findings[0];
    assert_eq!(partial.rule, "topo-partial-node");
    assert!(
        !partial.message.contains("from the GPU name"),
        "{}",
        partial.message
    );
}
