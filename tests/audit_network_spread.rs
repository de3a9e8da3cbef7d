//! `trainplace audit --network-spread`: running jobs whose pods span more layer-3 EC2
//! network nodes than they needed, through the real binary, over the network proximity
//! suite's sandbox fleet (tests/sandbox/network-fleet.yaml: twelve p5.48xlarge under
//! three layer-3 network nodes of four, A and B under one layer-2 node, C under another)
//! expanded by `trainplace sandbox nodes`, and `kubectl get pods -o json` shaped pods.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

use serde_json::{Value, json};

fn trainplace(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_trainplace"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .output()
        .expect("trainplace runs")
}

/// The fleet's nodes as `--cluster DIR/nodes.json`; the p5 nodes by layer-3 node.
fn cluster(dir: &Path) -> BTreeMap<String, Vec<String>> {
    let o = trainplace(&["sandbox", "nodes", "-f", "tests/sandbox/network-fleet.yaml"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::write(dir.join("nodes.json"), &o.stdout).unwrap();
    let nodes: Value = serde_json::from_slice(&o.stdout).unwrap();
    let mut by_layer3: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for node in nodes["items"].as_array().unwrap() {
        if let Some(l3) =
            node["metadata"]["labels"]["topology.k8s.aws/network-node-layer-3"].as_str()
        {
            by_layer3
                .entry(l3.to_string())
                .or_default()
                .push(node["metadata"]["name"].as_str().unwrap().to_string());
        }
    }
    by_layer3
}

fn pod(job: &str, i: usize, node: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("{job}-{i}"), "namespace": "ml", "uid": format!("uid-{job}-{i}"),
            "labels": {"batch.kubernetes.io/job-name": job}},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "x"}]},
        "status": {"phase": "Running"}})
}

/// `spread`: 4 pods, two under the first layer-3 node, one under each other (one would
/// hold all 4); `packed`: 3 pods under the second layer-3 node.
fn setup() -> (tempfile::TempDir, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let by_layer3 = cluster(dir.path());
    assert_eq!(by_layer3.len(), 3, "{by_layer3:?}");
    assert!(by_layer3.values().all(|n| n.len() == 4), "{by_layer3:?}");
    let l3: Vec<&Vec<String>> = by_layer3.values().collect();
    let names: Vec<String> = by_layer3.keys().cloned().collect();
    let pods = vec![
        pod("spread", 0, &l3[0][0]),
        pod("spread", 1, &l3[0][1]),
        pod("spread", 2, &l3[1][0]),
        pod("spread", 3, &l3[2][0]),
        pod("packed", 0, &l3[1][1]),
        pod("packed", 1, &l3[1][2]),
        pod("packed", 2, &l3[1][3]),
    ];
    std::fs::write(
        dir.path().join("pods-list.json"),
        json!({"apiVersion": "v1", "kind": "List", "items": pods}).to_string(),
    )
    .unwrap();
    (dir, names)
}

fn audit(dir: &Path, extra: &[&str]) -> Output {
    let pods = dir.join("pods-list.json");
    let mut args = vec![
        "audit",
        "--from",
        pods.to_str().unwrap(),
        "--cluster",
        dir.to_str().unwrap(),
        "--network-spread",
    ];
    args.extend_from_slice(extra);
    trainplace(&args)
}

#[test]
fn the_table_lists_the_spread_job_and_not_the_packed_one() {
    let (dir, layer3) = setup();
    let o = audit(dir.path(), &[]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let section = out
        .split_once("JOBS OVER MORE LAYER-3 NETWORK NODES THAN THEY NEED")
        .unwrap_or_else(|| panic!("no section:\n{out}"))
        .1;
    let rows: Vec<&str> = section.lines().skip(2).collect();
    assert_eq!(rows.len(), 1, "{section}");
    let cells: Vec<&str> = rows[0].split_whitespace().collect();
    assert_eq!(
        cells[..8],
        ["ml", "batch", "Job", "spread", "4", "p5.48xlarge", "3", "1"],
        "{section}"
    );
    // Layer-3 A and B share a layer-2 node, C is under another: two.
    assert_eq!(cells[8], "2", "{section}");
    assert_eq!(cells[9], format!("{}:2(4)", layer3[0]), "{section}");
}

#[test]
fn the_policy_report_carries_a_network_spread_result_with_the_pods() {
    let (dir, _) = setup();
    let o = audit(dir.path(), &["-o", "json"]);
    assert_eq!(o.status.code(), Some(0));
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    let spread: Vec<&Value> = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["rule"] == "network-spread")
        .collect();
    assert_eq!(spread.len(), 1, "{report:#}");
    let r = spread[0];
    assert_eq!(r["result"], "warn");
    assert_eq!(r["properties"]["layer3Spanned"], "3");
    assert_eq!(r["properties"]["layer3Needed"], "1");
    let pods: Vec<&str> = r["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(pods, ["spread-0", "spread-1", "spread-2", "spread-3"]);
    assert!(
        r["message"]
            .as_str()
            .unwrap()
            .contains("where 1 would hold them"),
        "{r:#}"
    );
    assert!(report["summary"]["warn"].as_u64().unwrap() >= 1);
}

#[test]
fn without_the_flag_nothing_is_said_and_without_nodes_it_is_refused() {
    let (dir, _) = setup();
    let pods = dir.path().join("pods-list.json");
    let o = trainplace(&[
        "audit",
        "--from",
        pods.to_str().unwrap(),
        "--cluster",
        dir.path().to_str().unwrap(),
    ]);
    assert!(!String::from_utf8_lossy(&o.stdout).contains("LAYER-3"));
    let o = trainplace(&[
        "audit",
        "--from",
        pods.to_str().unwrap(),
        "--network-spread",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--network-spread needs the cluster's nodes"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
