//! A body whose object would take more memory as a JSON tree than one review may use is
//! answered from its text, unread: denied at /validate naming the longest list and the
//! limit, admitted without a layout at /mutate; a DELETE and a body under the size are
//! read as usual.

use serde_json::{Value, json};
use trainplace_engine::{
    Endpoint, Limits, MAX_TREE_BYTES, Outcome, Policy, TREE_CHECK_FROM_BYTES, review_bytes,
};

/// A review of a TrainJob with two runtime patches of `volumes` volumes each for its
/// node pod.
fn trainjob_review(volumes: usize) -> Vec<u8> {
    let patch = |p: usize| {
        let list: Vec<Value> = (0..volumes)
            .map(|i| json!({"name": format!("p{p}v{i}"), "emptyDir": {}}))
            .collect();
        json!({"manager": format!("tenant.example.com/m{p}"), "trainingRuntimeSpec": {"template": {"spec": {
            "replicatedJobs": [{"name": "node", "template": {"spec": {"template": {"spec": {"volumes": list}}}}}]}}}})
    };
    let job = json!({
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
        "metadata": {"name": "wide", "namespace": "ml"},
        "spec": {"runtimeRef": {"name": "torch-distributed"},
            "trainer": {"numNodes": 2, "resourcesPerNode": {"limits": {"nvidia.com/gpu": "8"}}},
            "runtimePatches": [patch(0), patch(1)]}
    });
    admission(
        ("trainer.kubeflow.org", "v1alpha1", "TrainJob", "trainjobs"),
        "CREATE",
        job,
        Value::Null,
    )
}

/// The AdmissionReview of `object` (and `old`) named `wide` in `ml`, as `operation` on
/// the resource `(group, version, kind, resource)`.
fn admission(
    (group, version, kind, resource): (&str, &str, &str, &str),
    operation: &str,
    object: Value,
    old: Value,
) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "u-1",
            "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": resource},
            "name": "wide", "namespace": "ml", "operation": operation,
            "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
            "object": object, "oldObject": old
        }
    }))
    .unwrap()
}

/// A review of a GPU pod whose first container has `env` entries, as `operation`.
fn review(env: usize, operation: &str) -> Vec<u8> {
    let entries: Vec<Value> = (0..env)
        .map(|i| json!({"name": format!("E{i}"), "value": "x"}))
        .collect();
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "wide", "namespace": "ml"},
        "spec": {"containers": [{"name": "trainer", "image": "i", "env": entries,
            "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}
    });
    let (object, old) = if operation == "DELETE" {
        (Value::Null, pod)
    } else {
        (pod, Value::Null)
    };
    admission(("", "v1", "Pod", "pods"), operation, object, old)
}

fn answer(body: &[u8], endpoint: Endpoint) -> (Value, Outcome) {
    let r = review_bytes(
        body,
        endpoint,
        &Policy::embedded(),
        None,
        None,
        &Limits::default(),
        None,
    )
    .expect("JSON");
    let answer: Value = serde_json::from_slice(r.body.as_ref().unwrap()).unwrap();
    (answer["response"].clone(), r.outcome)
}

#[test]
fn a_pod_of_a_hundred_thousand_small_objects_is_answered_unread() {
    // 100,000 env entries: a 3 MiB body, about 78 MiB as a tree.
    let body = review(100_000, "CREATE");
    assert!(body.len() > 2 * 1024 * 1024, "{}", body.len());
    let (resp, outcome) = answer(&body, Endpoint::Validate);
    assert_eq!(resp["allowed"], false, "{resp}");
    let message = resp["status"]["message"].as_str().unwrap();
    assert!(
        message.contains("its longest list: spec.containers[].env, 100000 entries")
            && message.contains(&format!(
                "more than the {} MiB one review may use",
                MAX_TREE_BYTES / 1024 / 1024
            )),
        "{message}"
    );
    let Outcome::TooBigToRead { size, .. } = outcome else {
        panic!("{outcome:?}")
    };
    assert!(size.bytes > MAX_TREE_BYTES);
    // The mutating webhook admits it without a layout and says why.
    let (resp, outcome) = answer(&body, Endpoint::Mutate);
    assert_eq!(resp["allowed"], true, "{resp}");
    assert!(resp.get("patch").is_none(), "{resp}");
    assert!(
        resp["warnings"][0]
            .as_str()
            .unwrap()
            .starts_with("trainplace did not lay out Pod wide: reading it would take about"),
        "{resp}"
    );
    assert!(matches!(outcome, Outcome::TooBigToRead { .. }));
}

#[test]
fn smaller_bodies_and_deletes_are_read_as_usual() {
    // 3,000 entries: a 90 KiB body, under the size from which bodies are weighed.
    let small = review(3_000, "CREATE");
    assert!(small.len() < TREE_CHECK_FROM_BYTES);
    let (_, outcome) = answer(&small, Endpoint::Validate);
    assert!(
        !matches!(outcome, Outcome::TooBigToRead { .. }),
        "{outcome:?}"
    );
    // 20,000 entries: weighed (600 KiB), but about 16 MiB as a tree: read.
    let middle = review(20_000, "CREATE");
    assert!(middle.len() > TREE_CHECK_FROM_BYTES);
    let (_, outcome) = answer(&middle, Endpoint::Validate);
    assert!(
        !matches!(outcome, Outcome::TooBigToRead { .. }),
        "{outcome:?}"
    );
    // Deleting a pod that large is never refused for its size.
    let (resp, outcome) = answer(&review(100_000, "DELETE"), Endpoint::Validate);
    assert_eq!(resp["allowed"], true, "{resp}");
    assert!(
        !matches!(outcome, Outcome::TooBigToRead { .. }),
        "{outcome:?}"
    );
}

#[test]
fn a_trainjob_counts_what_its_node_pod_copies() {
    // Two patches of 12,000 volumes: about 19 MiB as a tree, under the limit alone, but
    // the node pod copies the patches, so the review would hold twice that.
    let body = trainjob_review(12_000);
    let (resp, outcome) = answer(&body, Endpoint::Validate);
    let Outcome::TooBigToRead { size, .. } = outcome else {
        // (Not the outcome itself: it holds the whole object.)
        panic!("read and judged: {}", resp["allowed"])
    };
    assert!(size.bytes < MAX_TREE_BYTES, "{size:?}");
    assert!(size.held() > MAX_TREE_BYTES, "{size:?}");
    assert_eq!(resp["allowed"], false, "{resp}");
    // A tenth of that is read and judged.
    let (_, outcome) = answer(&trainjob_review(1_200), Endpoint::Validate);
    assert!(
        !matches!(outcome, Outcome::TooBigToRead { .. }),
        "refused unread"
    );
}
