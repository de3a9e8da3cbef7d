//! A pod that selects its nodes by node group is judged on the types that node group
//! holds, from the inventory: a type the catalog does not list is judged on the GPUs
//! its nodes show (learned from their allocatable), not on the policy's default type.

use serde_json::{Value, json};
use trainplace_engine::{Policy, Requester, Snapshot, Verdict, evaluate};

fn node(name: &str, instance_type: &str, group: &str, gpus: u32) -> Value {
    json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {
            "node.kubernetes.io/instance-type": instance_type,
            "eks.amazonaws.com/nodegroup": group,
            "topology.kubernetes.io/zone": "us-east-1a"}},
        "status": {"allocatable": {"nvidia.com/gpu": gpus.to_string()}}})
}

/// One pod of a 4-pod job, `gpus` GPUs each, on node group `group`.
fn pod(group: &str, gpus: u32) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "w-1", "namespace": "team-a",
            "labels": {"training.kubeflow.org/job-name": "bert"}},
        "spec": {"restartPolicy": "Never",
            "containers": [{"name": "trainer", "image": "train:1",
                "command": ["torchrun", "--nnodes=4", "train.py"],
                "resources": {"limits": {"nvidia.com/gpu": gpus}}}],
            "nodeSelector": {"eks.amazonaws.com/nodegroup": group}}})
}

/// `pod` judged with an inventory of a p5 node in node group `gpu-p5` and a
/// g5.24xlarge node in `g5-big`.
fn judged(pod: &Value) -> Verdict {
    let nodes = [
        node("p5-a", "p5.48xlarge", "gpu-p5", 8),
        node("g5-a", "g5.24xlarge", "g5-big", 4),
    ];
    let inventory = Snapshot::build(&nodes, &[] as &[Value], &[] as &[Value]);
    let who = Requester {
        namespace: "team-a",
        inventory: Some(&inventory),
        ..Default::default()
    };
    evaluate(pod, &Policy::embedded(), &who).unwrap()
}

#[test]
fn a_node_group_of_a_type_the_catalog_lacks_is_judged_on_its_own_gpus() {
    // g5.48xlarge is in the catalog; g5.24xlarge (4 GPUs) is not.
    assert!(
        trainplace_engine::Catalog::embedded()
            .get("g5.24xlarge")
            .is_none()
    );
    // 4 pods x 4 GPUs on the 4-GPU node group: whole nodes.
    let v = judged(&pod("g5-big", 4));
    assert!(v.allowed, "{:#?}", v.findings);
    // 4 pods x 2 GPUs there: half nodes, refused.
    let v = judged(&pod("g5-big", 2));
    assert!(!v.allowed, "half of a g5.24xlarge admitted");
    // 4 pods x 4 GPUs on the p5 node group: half nodes, refused.
    let v = judged(&pod("gpu-p5", 4));
    assert!(!v.allowed, "half of a p5 admitted");
}

/// One pod of a 4-pod job, `gpus` GPUs each, pinned to node `host` by its hostname label.
fn pinned_pod(host: &str, gpus: u32) -> Value {
    let mut p = pod("unused", gpus);
    p["spec"]["nodeSelector"] = json!({"kubernetes.io/hostname": host});
    p
}

#[test]
fn a_pod_pinned_to_a_node_by_hostname_is_judged_on_that_node() {
    // 4 GPUs on the 4-GPU node it names: the whole node, not half of the default p5.
    let v = judged(&pinned_pod("g5-a", 4));
    assert!(v.allowed, "{:#?}", v.findings);
    // 4 GPUs on the p5 it names: half a node.
    let v = judged(&pinned_pod("p5-a", 4));
    assert!(!v.allowed, "half of a p5 admitted");
    assert!(
        format!("{:?}", v.findings).contains("p5.48xlarge"),
        "{:#?}",
        v.findings
    );
}

/// The node a pod's only required node-affinity term names, by `metadata.name` field
/// (what the DaemonSet controller writes on each of its pods, in place of the
/// template's terms) or a one-value hostname `In`, pins it as a hostname selector does.
#[test]
fn a_pod_pinned_to_a_node_by_its_affinity_term_is_judged_on_that_node() {
    let term = |host: &str, by_field: bool| {
        let expr = json!([{"key": if by_field { "metadata.name" } else { "kubernetes.io/hostname" },
            "operator": "In", "values": [host]}]);
        let mut term = json!({});
        term[if by_field {
            "matchFields"
        } else {
            "matchExpressions"
        }] = expr;
        term
    };
    for by_field in [true, false] {
        let pinned = |host: &str, gpus: u32| {
            let mut p = pod("unused", gpus);
            p["spec"]["nodeSelector"] = json!({});
            p["spec"]["affinity"] = json!({"nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [term(host, by_field)]}}});
            p
        };
        let v = judged(&pinned("g5-a", 4));
        assert!(v.allowed, "by field {by_field}: {:#?}", v.findings);
        let v = judged(&pinned("p5-a", 4));
        assert!(!v.allowed, "by field {by_field}: half of a p5 admitted");
    }
}

/// Strict mode: a pod bound to a node the inventory knows (`spec.nodeName`) runs on
/// that node's type only: 4 GPUs on a 4-GPU g6e.12xlarge node are its whole node. A pod
/// pinned by its node's name in an affinity term (what the DaemonSet controller writes)
/// is not bound: pending, it may land on a later node of that name and another type, so
/// it keeps every type, as it does without an inventory.
#[test]
fn strict_mode_judges_a_bound_pod_on_its_nodes_type() {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/policy-strict.yaml"),
    )
    .unwrap();
    let policy = Policy::from_parts(
        &text,
        "examples/policy-strict.yaml",
        trainplace_engine::Catalog::embedded(),
    )
    .unwrap();
    let mut n = node("g6e-a", "g6e.12xlarge", "g6e", 4);
    n["metadata"]["labels"]["topology.kubernetes.io/zone"] = json!("us-east-1a");
    let inventory = Snapshot::build(&[n], &[] as &[Value], &[] as &[Value]);
    let bound = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "infer-x7k2p", "namespace": "ml"},
        "spec": {"nodeName": "g6e-a",
            "nodeSelector": {"topology.kubernetes.io/zone": "us-east-1a"},
            "containers": [{"name": "s", "image": "serve:1",
                "resources": {"limits": {"nvidia.com/gpu": 4}}}]}});
    let mut pinned = bound.clone();
    pinned["spec"].as_object_mut().unwrap().remove("nodeName");
    pinned["spec"]["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["g6e-a"]}]}]}}});
    let with = Requester {
        namespace: "ml",
        inventory: Some(&inventory),
        ..Default::default()
    };
    let v = evaluate(&bound, &policy, &with).unwrap();
    assert!(v.allowed, "{:#?}", v.findings);
    let v = evaluate(&pinned, &policy, &with).unwrap();
    assert!(
        !v.allowed,
        "a pod pinned, not bound, narrowed to its node's type"
    );
    let without = Requester {
        namespace: "ml",
        ..Default::default()
    };
    let v = evaluate(&bound, &policy, &without).unwrap();
    assert!(
        !v.allowed,
        "4 GPUs reaching every type admitted without an inventory"
    );
}
