//! trainplace's live inventory and `trainplace audit` against a real API server: nodes
//! arrive through real watches, the watches recover after the API server restarts, and
//! audit lists what was created while the webhook was away.

use crate::sandbox;

use std::process::Command;
use std::time::Duration;

use sandbox::{Sandbox, stderr, wait_until};
use serde_json::{Value, json};

fn readyz(sb: &Sandbox) -> Option<Value> {
    let out = Command::new("curl")
        .args([
            "-s",
            &format!("http://127.0.0.1:{}/readyz", sb.env["SANDBOX_PROBE_PORT"]),
        ])
        .output()
        .ok()?;
    serde_json::from_slice(&out.stdout).ok()
}

fn live_nodes(sb: &Sandbox) -> Option<u64> {
    let r = readyz(sb)?;
    (r["inventory"]["state"] == "live").then(|| r["inventory"]["nodes"].as_u64())?
}

#[test]
fn inventory_recovers_after_an_api_server_restart_and_audit_lists_violations() {
    // An API server restart, a node added and the webhook configurations taken away:
    // the control plane to this test alone, put back when it ends.
    let turn = sandbox::shared_exclusive();
    let sb = turn.sb();
    let nodes = sb.json(&["get", "nodes"])["items"]
        .as_array()
        .unwrap()
        .len() as u64;
    wait_until(
        Duration::from_secs(30),
        "the inventory live with every node",
        || live_nodes(sb) == Some(nodes),
    );

    // The API server goes away and comes back: the watches reconnect and a node added
    // afterwards reaches the inventory.
    let restart = Command::new(format!("{}/scripts/sandbox.sh", env!("CARGO_MANIFEST_DIR")))
        .args(["restart", "kube-apiserver"])
        .env("SANDBOX_DIR", &sb.dir)
        .output()
        .unwrap();
    assert!(
        restart.status.success(),
        "{}",
        String::from_utf8_lossy(&restart.stderr)
    );
    wait_until(Duration::from_secs(90), "the API server back", || {
        sb.kubectl(&["get", "--raw", "/readyz"]).status.success()
    });
    let mut node = sb.json(&["get", "node", "p5-us-east-1a-0"]);
    node["metadata"] = json!({"name": "p5-us-east-1a-late", "labels": node["metadata"]["labels"],
        "annotations": node["metadata"]["annotations"]});
    node["metadata"]["labels"]["kubernetes.io/hostname"] = json!("p5-us-east-1a-late");
    node.as_object_mut().unwrap().remove("status");
    let out = sb.kubectl_stdin(&["create", "-f", "-"], Some(&node.to_string()));
    assert!(out.status.success(), "{}", stderr(&out));
    wait_until(
        Duration::from_secs(60),
        "the new node in the inventory",
        || live_nodes(sb) == Some(nodes + 1),
    );

    // A job created while the webhooks were away: audit finds it.
    let ns = sb.namespace("audit");
    let saved: Vec<Value> = [
        "mutatingwebhookconfiguration",
        "validatingwebhookconfiguration",
    ]
    .iter()
    .map(|k| sb.json(&["get", k, "trainplace"]))
    .collect();
    sb.ok(&[
        "delete",
        "mutatingwebhookconfiguration,validatingwebhookconfiguration",
        "trainplace",
    ]);
    let job = json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "bert", "namespace": ns},
        "spec": {"suspend": true, "parallelism": 8, "completions": 8, "completionMode": "Indexed",
            "template": {"spec": {"restartPolicy": "Never",
                "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"},
                "containers": [{"name": "c", "image": "busybox",
                    "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}
    });
    let out = sb.apply(&ns, &job.to_string());
    assert!(out.status.success(), "{}", stderr(&out));
    for s in saved {
        sb.recreate(s);
    }
    let audit = Command::new(env!("CARGO_BIN_EXE_trainplace"))
        .args(["audit", "-n", &ns])
        .env("KUBECONFIG", &sb.kubeconfig)
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&audit.stdout);
    assert!(
        table.contains("bert") && table.contains("partial-node"),
        "audit lists the job:\n{table}\n{}",
        String::from_utf8_lossy(&audit.stderr)
    );
    assert_eq!(audit.status.code(), Some(1), "violations found: exit 1");
}
