//! A pod that selects its nodes by node group is judged on the types that node group
//! holds, from the inventory: a type the catalog does not list is judged on the GPUs
//! its nodes show (learned from their allocatable), not on the policy's default type.

use serde_json::{Value, json};
use trainplace_engine::{Policy, Requester, Snapshot, evaluate};

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

#[test]
fn a_node_group_of_a_type_the_catalog_lacks_is_judged_on_its_own_gpus() {
    // g5.48xlarge is in the catalog; g5.24xlarge (4 GPUs) is not.
    assert!(
        trainplace_engine::Catalog::embedded()
            .get("g5.24xlarge")
            .is_none()
    );
    let nodes = [
        node("p5-a", "p5.48xlarge", "gpu-p5", 8),
        node("g5-a", "g5.24xlarge", "g5-big", 4),
    ];
    let inventory = Snapshot::build(&nodes, &[] as &[Value], &[] as &[Value]);
    let policy = Policy::embedded();
    let who = Requester {
        namespace: "team-a",
        inventory: Some(&inventory),
        ..Default::default()
    };
    // 4 pods x 4 GPUs on the 4-GPU node group: whole nodes.
    let v = evaluate(&pod("g5-big", 4), &policy, &who).unwrap();
    assert!(v.allowed, "{:#?}", v.findings);
    // 4 pods x 2 GPUs there: half nodes, refused.
    let v = evaluate(&pod("g5-big", 2), &policy, &who).unwrap();
    assert!(!v.allowed, "half of a g5.24xlarge admitted");
    // 4 pods x 4 GPUs on the p5 node group: half nodes, refused.
    let v = evaluate(&pod("gpu-p5", 4), &policy, &who).unwrap();
    assert!(!v.allowed, "half of a p5 admitted");
}
