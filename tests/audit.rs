//! `trainplace audit` over `kubectl get -o json` output (offline), and its error when
//! the cluster cannot be reached.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

fn trainplace(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_trainplace"))
        .args(args)
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")))
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .output()
        .unwrap()
}

#[test]
fn audit_table_from_file() {
    let o = trainplace(&[
        "audit",
        "--from",
        "tests/fixtures/audit/cluster-objects.json",
    ]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "a denied object makes the audit fail"
    );
    let out = String::from_utf8_lossy(&o.stdout);
    let row = |name: &str| {
        out.lines()
            .find(|l| l.contains(name))
            .unwrap_or_else(|| panic!("no row for {name}:\n{out}"))
            .to_string()
    };
    assert!(
        row("bert").contains("fail") && row("bert").contains("enforce:partial-node"),
        "{out}"
    );
    assert!(
        row("llama3-8b ").contains("warn"),
        "a JobSet missing layout parts warns:\n{out}"
    );
    assert!(
        row("llama3-8b-node-0-0-x0k2p").contains("pass"),
        "an already laid-out pod passes:\n{out}"
    );
    assert!(
        row("vllm").contains("pass"),
        "an inference pod is not training:\n{out}"
    );
}

#[test]
fn audit_policy_report_json() {
    let o = trainplace(&[
        "audit",
        "--from",
        "tests/fixtures/audit/cluster-objects.json",
        "-o",
        "json",
    ]);
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["apiVersion"], "wgpolicyk8s.io/v1alpha2");
    assert_eq!(report["summary"]["fail"], 1);
    assert_eq!(report["summary"]["warn"], 1);
    assert_eq!(report["summary"]["pass"], 2);
    let results = report["results"].as_array().unwrap();
    let fail = results.iter().find(|r| r["result"] == "fail").unwrap();
    assert_eq!(fail["rule"], "partial-node");
    assert_eq!(fail["resources"][0]["kind"], "PyTorchJob");
    assert!(fail["resources"][0]["uid"].is_string());
    assert!(
        results
            .iter()
            .any(|r| r["rule"] == "layout"
                && r["message"].as_str().unwrap().contains("hostIPC=true"))
    );
}

#[test]
fn audit_errors_are_clear() {
    let o = trainplace(&["audit"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("cannot read the cluster through the kubeconfig") && err.contains("--from"),
        "{err}"
    );
    let o = trainplace(&["audit", "--from", "/nonexistent.json"]);
    assert_eq!(o.status.code(), Some(2));
}

/// An object the engine cannot read (a GPU count of "eight") is a failing row named
/// `invalid-object`, as `check` reports it, not silently left out.
#[test]
fn audit_reports_unreadable_objects() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("objects.yaml");
    std::fs::write(
        &file,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: unreadable-pod, namespace: team-a}\nspec:\n  containers:\n  - name: t\n    image: x\n    resources:\n      limits: {nvidia.com/gpu: eight}\n",
    )
    .unwrap();
    let o = trainplace(&["audit", "--from", file.to_str().unwrap()]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}");
    let row = out
        .lines()
        .find(|l| l.contains("unreadable-pod"))
        .unwrap_or_else(|| panic!("no row for the unreadable pod:\n{out}"));
    assert!(
        row.contains("team-a") && row.contains("fail") && row.contains("enforce:invalid-object"),
        "{row}"
    );
    let o = trainplace(&["audit", "--from", file.to_str().unwrap(), "-o", "json"]);
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["summary"]["fail"], 1);
    let result = &report["results"][0];
    assert_eq!(result["rule"], "invalid-object");
    assert!(
        result["message"]
            .as_str()
            .unwrap()
            .contains("nvidia.com/gpu"),
        "{result}"
    );
}
