//! A pod created with `spec.nodeName` (and every pod a live audit reads once it is
//! scheduled) runs on that node: it is judged against the node's instance type, not
//! against every GPU type the cluster has.

use serde_json::{Value, json};
use trainplace_engine::{Policy, Requester, Rule, Snapshot, Verdict, evaluate};

fn node(name: &str, instance_type: &str, efa: u32) -> Value {
    json!({"metadata": {"name": name, "labels": {
            "node.kubernetes.io/instance-type": instance_type,
            "topology.kubernetes.io/zone": "us-east-1a"}},
        "status": {"allocatable": {"nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": efa.to_string()}}})
}

/// A cluster with both p4d (4 EFA) and p5 (32 EFA) nodes.
fn cluster() -> Snapshot {
    let nodes = [
        node("p4d-node", "p4d.24xlarge", 4),
        node("p5-node", "p5.48xlarge", 32),
    ];
    Snapshot::build(&nodes, &[], &[])
}

/// A whole-node p5 pod of an indexed Job: 8 GPUs and 32 EFA interfaces, bound to
/// `node` if given.
fn pod(node: Option<&str>) -> Value {
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "pretrain-0-5xk2q", "namespace": "ml", "labels": {
            "batch.kubernetes.io/job-name": "pretrain",
            "batch.kubernetes.io/job-completion-index": "0"}},
        "spec": {"containers": [{"name": "c", "image": "train:1", "resources": {
            "limits": {"nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "32"}}}]}});
    if let Some(n) = node {
        pod["spec"]["nodeName"] = json!(n);
    }
    pod
}

fn judge(pod: &Value, inventory: &Snapshot) -> Verdict {
    let policy = Policy::embedded();
    let who = Requester {
        namespace: "ml",
        namespace_labels: None,
        groups: &[],
        inventory: Some(inventory),
        marks: None,
        now: None,
        claims: None,
        updating: None,
    };
    evaluate(pod, &policy, &who).unwrap()
}

fn rules(v: &Verdict) -> Vec<Rule> {
    v.findings.iter().map(|f| f.rule).collect()
}

#[test]
fn a_pod_bound_to_a_p5_node_is_judged_as_a_p5_pod() {
    let inventory = cluster();
    let v = judge(&pod(Some("p5-node")), &inventory);
    assert!(v.allowed, "{:#?}", v.findings);
    assert!(
        !rules(&v).contains(&Rule::UnknownInstanceType),
        "{:#?}",
        v.findings
    );
    // Already placed: no instance-type selector is added.
    assert!(
        !v.changes.iter().any(|c| c.what.contains("nodeSelector")),
        "{:#?}",
        v.changes
    );
}

#[test]
fn the_same_pod_unbound_may_land_on_either_type() {
    let inventory = cluster();
    let v = judge(&pod(None), &inventory);
    assert!(
        rules(&v).contains(&Rule::UnknownInstanceType),
        "{:#?}",
        v.findings
    );
}

#[test]
fn a_pod_bound_to_a_p4d_node_asking_for_32_efa_is_refused() {
    let inventory = cluster();
    let v = judge(&pod(Some("p4d-node")), &inventory);
    assert!(!v.allowed, "{:#?}", v.findings);
    let found: Vec<String> = v.findings.iter().map(|f| f.message()).collect();
    assert!(
        found.iter().any(|m| m.contains("p4d.24xlarge has 4")),
        "{found:#?}"
    );
}
