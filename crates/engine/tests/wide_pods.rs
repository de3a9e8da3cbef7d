//! A pod of many one-GPU containers (the most the bounds let through, 64: more is
//! refused as too-large, `judge::bounds`): the
//! `trainplace.io/mutated` annotation the layout writes stays small, so the mutation
//! itself can never push the pod past the API server's 256 KiB annotation limit.

use serde_json::{Value, json};
use trainplace_engine::{MUTATED_TEXT_LIMIT, Policy, Requester, evaluate};

fn wide_pod(containers: usize) -> Value {
    let containers: Vec<Value> = (0..containers)
        .map(|i| {
            json!({"name": format!("worker-{i}"), "image": "train:1",
                "resources": {"limits": {"nvidia.com/gpu": 1}}})
        })
        .collect();
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "wide", "namespace": "ml",
            "labels": {"jobset.sigs.k8s.io/jobset-name": "wide"}},
        "spec": {"containers": containers,
            "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"}}})
}

#[test]
fn the_mutated_annotation_of_a_wide_pod_stays_under_its_limit() {
    let policy = Policy::embedded();
    let who = Requester {
        namespace: "ml",
        ..Default::default()
    };
    let wide = trainplace_engine::bounds::MAX_CONTAINERS;
    let v = evaluate(&wide_pod(wide), &policy, &who).expect("judged");
    assert!(v.changes.len() > wide, "{} changes", v.changes.len());
    let text = v.object["metadata"]["annotations"]["trainplace.io/mutated"]
        .as_str()
        .expect("annotation written");
    assert!(
        text.len() <= MUTATED_TEXT_LIMIT + 100,
        "{} bytes of annotation",
        text.len()
    );
    // Each reason once: the IPC_LOCK reason is one line naming every container.
    let ipc: Vec<&str> = text.lines().filter(|l| l.contains("IPC_LOCK")).collect();
    assert_eq!(ipc.len(), 1, "{ipc:?}");
    assert_eq!(ipc[0].matches("capability IPC_LOCK").count(), wide);
    // A second pass over the mutated pod adds nothing.
    let again = evaluate(&v.object, &policy, &who).expect("second pass");
    assert!(again.patch.is_empty(), "{:?}", again.patch);
}

#[test]
fn one_container_more_is_refused_as_too_large_not_laid_out() {
    let policy = Policy::embedded();
    let who = Requester {
        namespace: "ml",
        ..Default::default()
    };
    let wide = trainplace_engine::bounds::MAX_CONTAINERS;
    let v = evaluate(&wide_pod(wide + 1), &policy, &who).expect("judged");
    assert!(!v.allowed);
    assert!(v.patch.is_empty(), "{:?}", v.patch);
    assert!(
        v.findings
            .iter()
            .any(|f| f.rule.as_str() == "too-large" && f.found.contains("65 containers")),
        "{:?}",
        v.findings
    );
}
