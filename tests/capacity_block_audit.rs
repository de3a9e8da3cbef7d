//! `trainplace audit --ending-within`: running jobs on Capacity Blocks that end soon,
//! through the real binary, over `kubectl get pods -o json` output, a managed node
//! group cluster and `aws ec2 describe-capacity-reservations --output json`.

use std::process::{Command, Output};

use serde_json::Value;

const DIR: &str = "tests/fixtures/capacity-blocks";
/// 2.5 hours before block cr-0123456789abcdef0 ends (1 h 50 min before EKS scales
/// its node group to 0).
const NOW: &str = "2026-11-23T09:00:00Z";

fn audit(within: &str, extra: &[&str]) -> Output {
    let pods = format!("{DIR}/running-pods.json");
    let cluster = format!("{DIR}/managed-node-group");
    let reservations = format!("{DIR}/describe-capacity-reservations.json");
    let mut args = vec![
        "audit",
        "--from",
        &pods,
        "--cluster",
        &cluster,
        "--reservations",
        &reservations,
        "--now",
        NOW,
        "--ending-within",
        within,
    ];
    args.extend_from_slice(extra);
    Command::new(env!("CARGO_BIN_EXE_trainplace"))
        .args(&args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .output()
        .expect("trainplace runs")
}

#[test]
fn the_table_lists_the_running_job_on_the_ending_block_once() {
    let o = audit("6h", &[]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}");
    let section = out
        .split_once("JOBS ON CAPACITY BLOCKS ENDING WITHIN 6.0h (as of 2026-11-23T09:00:00Z)\n")
        .unwrap_or_else(|| panic!("no section:\n{out}"))
        .1;
    let rows: Vec<&str> = section.lines().skip(1).collect();
    assert_eq!(
        rows.len(),
        1,
        "one job (its two pods), not the finished or the on-demand one:\n{section}"
    );
    let cells: Vec<&str> = rows[0].split_whitespace().collect();
    assert_eq!(
        cells,
        [
            "ml",
            "batch",
            "Job",
            "pretrain",
            "2",
            "cr-0123456789abcdef0",
            "2026-11-23T11:30:00Z",
            "2026-11-23T10:50:00Z",
            "1.8h"
        ]
    );
}

#[test]
fn a_block_ending_later_than_the_window_is_not_listed() {
    let o = audit("2h", &[]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains(
            "JOBS ON CAPACITY BLOCKS ENDING WITHIN 2.0h (as of 2026-11-23T09:00:00Z)\nnone\n"
        ),
        "{out}"
    );
}

#[test]
fn the_policy_report_carries_one_result_per_job_with_its_pods() {
    let o = audit("6h", &["-o", "json"]);
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    let ending: Vec<&Value> = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["rule"] == "capacity-block-ends")
        .collect();
    assert_eq!(ending.len(), 1, "{report}");
    let r = ending[0];
    assert_eq!(r["result"], "warn");
    assert_eq!(r["properties"]["reservation"], "cr-0123456789abcdef0");
    assert_eq!(r["properties"]["secondsLeft"], "6600");
    let pods: Vec<&str> = r["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(pods, ["pretrain-0-5xk2q", "pretrain-1-9rt7w"]);
    assert_eq!(
        r["message"],
        "batch Job ml/pretrain has 2 pod(s) on Capacity Block cr-0123456789abcdef0 (p5.48xlarge), which ends 2026-11-23T11:30:00Z; EKS scales its managed node group to 0 at 2026-11-23T10:50:00Z (1.8h from 2026-11-23T09:00:00Z): checkpoint now and resume on a later block or other capacity."
    );
}

#[test]
fn ending_within_without_nodes_is_refused_clearly() {
    let o = Command::new(env!("CARGO_BIN_EXE_trainplace"))
        .args([
            "audit",
            "--from",
            &format!("{DIR}/running-pods.json"),
            "--ending-within",
            "6h",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--ending-within needs the cluster's nodes")
    );
}

/// A negative window would list nothing without saying why: refused with a clear error.
#[test]
fn a_negative_window_is_refused() {
    let o = audit("-6h", &[]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("\"-6h\" is negative"), "{stderr}");
}
