//! UPDATEs and scales compare findings by rule, template and size, not by their words
//! (issue 39, class 7): a shrink (Kueue's partial admission, an autoscaler scaling
//! down) keeps the finding the job was stored with and is admitted; a growth is judged
//! even when the finding's words do not change. Each test runs under the embedded
//! default policy and examples/policy-restricted.yaml, in `prod`, where both enforce.
//! The stored jobs predate the policy (created before trainplace was installed, or
//! admitted under a grant since withdrawn): they carry an enforced finding.

use serde_json::{Value, json};
use trainplace_engine::{Catalog, Endpoint, Policy, Snapshot, review};

fn policies() -> [(&'static str, Policy); 2] {
    let text = include_str!("../../../examples/policy-restricted.yaml");
    [
        ("default", Policy::embedded()),
        (
            "restricted",
            Policy::from_parts(text, "policy-restricted.yaml", Catalog::embedded()).unwrap(),
        ),
    ]
}

const KUEUE: [&str; 2] = [
    "system:serviceaccounts",
    "system:serviceaccounts:kueue-system",
];

/// A Job of `parallelism` pods x `gpus` GPUs on p5, with `extra` merged into its pod spec.
fn job(parallelism: u32, gpus: u32, extra: Value) -> Value {
    let mut spec = json!({"restartPolicy": "Never",
        "containers": [{"name": "trainer", "image": "train:1",
            "command": ["torchrun", "train.py"],
            "resources": {"limits": {"nvidia.com/gpu": gpus}}}],
        "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"}});
    for (k, v) in extra.as_object().unwrap() {
        spec[k] = v.clone();
    }
    json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "bert", "namespace": "prod"},
        "spec": {"parallelism": parallelism, "completions": parallelism,
            "completionMode": "Indexed", "template": {"spec": spec}}})
}

fn update(policy: &Policy, old: &Value, new: &Value, groups: &[&str]) -> Value {
    let body = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "u-1",
            "kind": {"group": "batch", "version": "v1", "kind": "Job"},
            "resource": {"group": "batch", "version": "v1", "resource": "jobs"},
            "name": "bert", "namespace": "prod", "operation": "UPDATE",
            "userInfo": {"username": "someone", "groups": groups},
            "object": new, "oldObject": old}});
    let reviewed = review(body, Endpoint::Validate, policy, None, None);
    serde_json::from_slice(&reviewed.body.unwrap()).unwrap()
}

fn allowed(answer: &Value) -> bool {
    answer["response"]["allowed"] == true
}

/// Kueue's partial admission lowers a stored 4-pod partial-node Job to 2 pods. The
/// finding's words change ("2 pods x 1 GPU"); it is the same finding, smaller, and the
/// update is admitted. Raising it to 8 is refused.
#[test]
fn a_shrink_keeps_the_finding_and_a_growth_is_refused() {
    for (name, policy) in policies() {
        let stored = job(4, 1, json!({}));
        let shrunk = job(2, 1, json!({}));
        let a = update(&policy, &stored, &shrunk, &KUEUE);
        assert!(
            allowed(&a),
            "{name}: Kueue's partial admission refused: {a}"
        );
        let grown = job(8, 1, json!({}));
        let a = update(&policy, &stored, &grown, &["alice"]);
        assert!(!allowed(&a), "{name}: 4 -> 8 partial pods admitted");
    }
}

/// A growth whose finding says the same words: a stored 2-pod Job of full nodes with a
/// hard zone spread (multi-az: "a topologySpreadConstraint spreads pods over zones",
/// no count) grown to 16 pods. It was admitted because the words matched; it is judged.
#[test]
fn a_growth_with_the_same_words_is_refused() {
    let spread = json!({"topologySpreadConstraints": [{"maxSkew": 1,
        "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"batch.kubernetes.io/job-name": "bert"}}}]});
    for (name, policy) in policies() {
        let stored = job(2, 8, spread.clone());
        let same = update(&policy, &stored, &stored, &["alice"]);
        assert!(
            allowed(&same),
            "{name}: an unchanged update refused: {same}"
        );
        let grown = job(16, 8, spread.clone());
        let a = update(&policy, &stored, &grown, &["alice"]);
        assert!(
            !allowed(&a),
            "{name}: 2 -> 16 pods admitted on the same words"
        );
        // More GPUs per pod is not the same finding either (8 -> 4 GPUs per pod).
        let other = job(2, 4, spread.clone());
        assert!(
            !allowed(&update(&policy, &stored, &other, &["alice"])),
            "{name}"
        );
    }
}

/// A PyTorchJob of 4 x 1-GPU workers stored before the policy; an autoscaler (no grant)
/// scales it through `pytorchjobs/scale`. Down to 2 keeps the finding it was stored
/// with and is admitted; up to 8 is judged and refused.
#[test]
fn a_scale_down_is_admitted_and_a_scale_up_judged() {
    let stored = json!({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": {"name": "bert", "namespace": "prod"},
        "spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 4, "template": {"spec": {
            "containers": [{"name": "pytorch", "image": "train:1",
                "resources": {"limits": {"nvidia.com/gpu": 1}}}],
            "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"}}}}}}});
    let mut inventory = Snapshot::build(&[], &[], &[]);
    inventory.add_scalable([&stored]);
    let scale = |from: u64, to: u64| {
        let gvk = json!({"group": "autoscaling", "version": "v1", "kind": "Scale"});
        let s = |n: u64| {
            json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
                "metadata": {"name": "bert", "namespace": "prod"}, "spec": {"replicas": n}})
        };
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": "u-1", "kind": gvk, "requestKind": gvk,
            "resource": {"group": "kubeflow.org", "version": "v1", "resource": "pytorchjobs"},
            "subResource": "scale", "name": "bert", "namespace": "prod", "operation": "UPDATE",
            "userInfo": {"username": "system:serviceaccount:kube-system:horizontal-pod-autoscaler",
                "groups": ["system:serviceaccounts", "system:serviceaccounts:kube-system"]},
            "object": s(to), "oldObject": s(from)}})
    };
    for (name, policy) in policies() {
        let answer = |from, to| {
            let r = review(
                scale(from, to),
                Endpoint::Validate,
                &policy,
                Some(&inventory),
                None,
            );
            serde_json::from_slice::<Value>(&r.body.unwrap()).unwrap()
        };
        let down = answer(4, 2);
        assert!(allowed(&down), "{name}: scale-down refused: {down}");
        let up = answer(4, 8);
        assert!(!allowed(&up), "{name}: scale-up admitted: {up}");
    }
}
