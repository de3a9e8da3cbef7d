//! `kubectl scale pytorchjob` (the `pytorchjobs/scale` subresource) is judged against
//! the PyTorchJob it scales, from the cluster inventory, at its new size.

use serde_json::{Value, json};
use trainplace_engine::{Endpoint, Policy, Snapshot, review};

/// A PyTorchJob of one 1-GPU worker on p5: a single pod, allowed with a warning.
fn job() -> Value {
    json!({
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": {"name": "bert", "namespace": "ml"},
        "spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 1, "template": {"spec": {
            "containers": [{"name": "pytorch", "image": "train:1",
                "resources": {"limits": {"nvidia.com/gpu": 1}}}],
            "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"}}}}}}
    })
}

fn scale_review(name: &str, from: u64, to: u64) -> Value {
    let gvk = json!({"group": "autoscaling", "version": "v1", "kind": "Scale"});
    let scale = |n: u64| {
        json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
        "metadata": {"name": name, "namespace": "ml"}, "spec": {"replicas": n}})
    };
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u-1", "kind": gvk, "requestKind": gvk,
        "resource": {"group": "kubeflow.org", "version": "v1", "resource": "pytorchjobs"},
        "requestResource": {"group": "kubeflow.org", "version": "v1", "resource": "pytorchjobs"},
        "subResource": "scale", "requestSubResource": "scale",
        "name": name, "namespace": "ml", "operation": "UPDATE",
        "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
        "object": scale(to), "oldObject": scale(from), "dryRun": false}})
}

fn inventory() -> Snapshot {
    let mut s = Snapshot::build(&[], &[], &[]);
    s.add_scalable([&job()]);
    s
}

fn answer(body: Value, inventory: Option<&Snapshot>) -> Value {
    let policy = Policy::embedded();
    let r = review(body, Endpoint::Validate, &policy, inventory, None);
    serde_json::from_slice::<Value>(r.body.as_ref().unwrap()).unwrap()["response"].clone()
}

#[test]
fn scaling_a_one_gpu_job_to_eight_workers_is_denied() {
    let r = answer(scale_review("bert", 1, 8), Some(&inventory()));
    assert_eq!(r["allowed"], false, "{r}");
    let message = r["status"]["message"].as_str().unwrap();
    assert!(message.contains("8 pods x 1 GPU"), "{message}");
}

#[test]
fn a_scale_that_keeps_one_pod_is_allowed() {
    let r = answer(scale_review("bert", 1, 1), Some(&inventory()));
    assert_eq!(r["allowed"], true, "{r}");
}

#[test]
fn a_scale_of_a_job_the_inventory_lacks_passes_with_a_warning() {
    for inv in [None, Some(inventory())] {
        let r = answer(scale_review("other", 1, 8), inv.as_ref());
        assert_eq!(r["allowed"], true, "{r}");
        let w = r["warnings"][0].as_str().unwrap_or_default();
        assert!(w.contains("could not judge this scale"), "{r}");
    }
}

#[test]
fn the_mutating_endpoint_never_patches_a_scale() {
    let policy = Policy::embedded();
    let inv = inventory();
    let r = review(
        scale_review("bert", 1, 8),
        Endpoint::Mutate,
        &policy,
        Some(&inv),
        None,
    );
    let body: Value = serde_json::from_slice(r.body.as_ref().unwrap()).unwrap();
    assert!(body["response"]["patch"].is_null(), "{body}");
}

/// `kubectl edit`/`apply` raising the Worker count is an UPDATE of the PyTorchJob itself:
/// judged like a CREATE at the new size.
#[test]
fn an_update_that_grows_the_job_is_judged_at_its_new_size() {
    let mut grown = job();
    grown["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = json!(8);
    let gvk = json!({"group": "kubeflow.org", "version": "v1", "kind": "PyTorchJob"});
    let gvr = json!({"group": "kubeflow.org", "version": "v1", "resource": "pytorchjobs"});
    let body = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u-2", "kind": gvk, "requestKind": gvk, "resource": gvr, "requestResource": gvr,
        "name": "bert", "namespace": "ml", "operation": "UPDATE",
        "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
        "object": grown, "oldObject": job(), "dryRun": false}});
    let r = answer(body, None);
    assert_eq!(r["allowed"], false, "{r}");
    assert!(
        r["status"]["message"]
            .as_str()
            .unwrap()
            .contains("8 pods x 1 GPU"),
        "{r}"
    );
}

/// PaddleJob's vendored CRD has a scale subresource too
/// (`.spec.paddleReplicaSpecs.Worker.replicas`): one 1-GPU worker on p5 is allowed;
/// `kubectl scale paddlejob --replicas=8` makes 8 x 1 GPU and is denied.
fn paddle_job() -> Value {
    json!({"apiVersion": "kubeflow.org/v1", "kind": "PaddleJob",
        "metadata": {"name": "bert", "namespace": "ml"},
        "spec": {"paddleReplicaSpecs": {"Worker": {"replicas": 1, "template": {"spec": {
            "containers": [{"name": "paddle", "image": "train:1",
                "resources": {"limits": {"nvidia.com/gpu": 1}}}],
            "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"}}}}}}})
}

fn paddle_scale_review(to: u64) -> Value {
    let mut r = scale_review("bert", 1, to);
    let gvr = json!({"group": "kubeflow.org", "version": "v1", "resource": "paddlejobs"});
    r["request"]["resource"] = gvr.clone();
    r["request"]["requestResource"] = gvr;
    r
}

#[test]
fn scaling_a_one_gpu_paddlejob_to_eight_workers_is_denied() {
    let mut inv = Snapshot::build(&[], &[], &[]);
    inv.add_scalable([&paddle_job()]);
    let r = answer(paddle_scale_review(8), Some(&inv));
    assert_eq!(r["allowed"], false, "{r}");
    let message = r["status"]["message"].as_str().unwrap();
    assert!(message.contains("8 pods x 1 GPU"), "{message}");
    let r = answer(paddle_scale_review(1), Some(&inv));
    assert_eq!(r["allowed"], true, "{r}");
}
