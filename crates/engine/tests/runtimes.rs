//! Kubeflow Trainer runtimes through the webhook's AdmissionReview path: a
//! ClusterTrainingRuntime is cluster-scoped (the review has no namespace), is laid out
//! when created, and a TrainJob that names it is judged with its `node` template.

use serde_json::{Value, json};
use trainplace_engine::{Endpoint, Limits, Outcome, Policy, Snapshot, review, review_bytes};

/// A ClusterTrainingRuntime whose `node` job runs 2 pods x 8 GPUs on p5.
fn runtime() -> Value {
    json!({
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime",
        "metadata": {"name": "torch-p5"},
        "spec": {"mlPolicy": {"numNodes": 2, "torch": {}}, "template": {"spec": {"replicatedJobs": [
            {"name": "node", "template": {"metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                "spec": {"template": {"spec": {
                    "containers": [{"name": "node", "image": "pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime",
                        "resources": {"limits": {"nvidia.com/gpu": 8}, "requests": {"nvidia.com/gpu": 8}}}],
                    "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"}}}}}}]}}}
    })
}

fn admission(object: &Value, group: &str, resource: &str, namespace: Option<&str>) -> Value {
    let kind = object["kind"].clone();
    let gvk = json!({"group": group, "version": "v1alpha1", "kind": kind});
    let gvr = json!({"group": group, "version": "v1alpha1", "resource": resource});
    let mut request = json!({
        "uid": "u-1", "kind": gvk, "requestKind": gvk, "resource": gvr, "requestResource": gvr,
        "name": object["metadata"]["name"], "operation": "CREATE",
        "userInfo": {"username": "platform", "groups": ["system:authenticated"]},
        "object": object, "oldObject": null, "dryRun": false});
    if let Some(ns) = namespace {
        request["namespace"] = json!(ns);
    }
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})
}

fn answer(body: Value, endpoint: Endpoint, inventory: Option<&Snapshot>) -> Value {
    let policy = Policy::embedded();
    let r = review(body, endpoint, &policy, inventory, None);
    serde_json::from_slice::<Value>(r.body.as_ref().unwrap()).unwrap()["response"].clone()
}

fn patch_of(response: &Value) -> String {
    let b64 = response["patch"].as_str().unwrap_or("");
    String::from_utf8(base64_simd::STANDARD.decode_to_vec(b64).unwrap()).unwrap()
}

#[test]
fn a_cluster_scoped_runtime_is_laid_out_on_create() {
    let r = answer(
        admission(
            &runtime(),
            "trainer.kubeflow.org",
            "clustertrainingruntimes",
            None,
        ),
        Endpoint::Mutate,
        None,
    );
    assert_eq!(r["allowed"], true, "{r}");
    let patch = patch_of(&r);
    assert!(patch.contains("vpc.amazonaws.com~1efa"), "{patch}");
    assert!(patch.contains("jobset.sigs.k8s.io/jobset-name"), "{patch}");
}

#[test]
fn a_trainjob_is_judged_with_its_runtime_from_the_inventory() {
    // 4 nodes x 1 GPU: the TrainJob alone names no instance type; the runtime pins p5.
    let job = json!({
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
        "metadata": {"name": "llama", "namespace": "ml"},
        "spec": {"runtimeRef": {"name": "torch-p5"}, "trainer": {"numNodes": 4,
            "resourcesPerNode": {"limits": {"nvidia.com/gpu": 1}, "requests": {"nvidia.com/gpu": 1}}}}
    });
    let body = || admission(&job, "trainer.kubeflow.org", "trainjobs", Some("ml"));
    let alone = answer(body(), Endpoint::Validate, None);
    assert_eq!(alone["allowed"], true, "without the runtime: {alone}");
    let mut inventory = Snapshot::build(&[], &[], &[]);
    inventory.add_runtimes([&runtime()]);
    let with = answer(body(), Endpoint::Validate, Some(&inventory));
    assert_eq!(with["allowed"], false, "with the runtime: {with}");
    let message = with["status"]["message"].as_str().unwrap();
    assert!(
        message.contains("4 pods x 1 GPU on p5.48xlarge"),
        "{message}"
    );
}

#[test]
fn a_runtime_too_large_to_copy_ends_the_review_over_budget() {
    // The runtime's node container carries 300,000 env entries: the TrainJob naming it
    // is a small request, and copying the runtime into its node pod would be most of the
    // review's memory. The copy draws from the review's budget first.
    let mut big = runtime();
    big["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        ["containers"][0]["env"] = (0..300_000)
        .map(|i| json!({"name": format!("E{i}"), "value": "x"}))
        .collect();
    let mut inventory = Snapshot::build(&[], &[], &[]);
    inventory.add_runtimes([&big]);
    let job = json!({
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
        "metadata": {"name": "llama", "namespace": "ml"},
        "spec": {"runtimeRef": {"name": "torch-p5"}, "trainer": {"numNodes": 2}}
    });
    let body = serde_json::to_vec(&admission(
        &job,
        "trainer.kubeflow.org",
        "trainjobs",
        Some("ml"),
    ))
    .unwrap();
    let policy = Policy::embedded();
    let at = |body: &[u8], inventory: &Snapshot, endpoint| {
        let r = review_bytes(
            body,
            endpoint,
            &policy,
            Some(inventory),
            None,
            &Limits::default(),
            None,
        )
        .expect("JSON");
        let response =
            serde_json::from_slice::<Value>(r.body.as_ref().unwrap()).unwrap()["response"].clone();
        (response, r.outcome)
    };
    let over_budget = |(denied, outcome): (Value, Outcome)| {
        assert!(
            matches!(outcome, Outcome::OverBudget { .. }),
            "not over budget"
        );
        assert_eq!(denied["allowed"], false);
        let message = denied["status"]["message"].as_str().unwrap();
        assert!(
            message.contains("the node template of the runtime in spec.runtimeRef"),
            "{message}"
        );
    };
    over_budget(at(&body, &inventory, Endpoint::Validate));
    // The same for a namespaced TrainingRuntime in the TrainJob's namespace.
    let mut namespaced = big.clone();
    namespaced["kind"] = json!("TrainingRuntime");
    namespaced["metadata"]["namespace"] = json!("ml");
    let mut own = Snapshot::build(&[], &[], &[]);
    own.add_runtimes([&namespaced]);
    let mut job_ns = job.clone();
    job_ns["spec"]["runtimeRef"]["kind"] = json!("TrainingRuntime");
    let body_ns = serde_json::to_vec(&admission(
        &job_ns,
        "trainer.kubeflow.org",
        "trainjobs",
        Some("ml"),
    ))
    .unwrap();
    over_budget(at(&body_ns, &own, Endpoint::Validate));
    // The mutating webhook admits it without a layout.
    let (admitted, _) = at(&body, &inventory, Endpoint::Mutate);
    assert_eq!(admitted["allowed"], true);
    assert!(admitted.get("patch").is_none());
    // The same TrainJob with the runtime as it ships is judged.
    let mut small = Snapshot::build(&[], &[], &[]);
    small.add_runtimes([&runtime()]);
    let (_, outcome) = at(&body, &small, Endpoint::Validate);
    assert!(
        !matches!(outcome, Outcome::OverBudget { .. }),
        "over budget"
    );
}
