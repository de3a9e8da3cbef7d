//! What the engine's benchmarks review: the ~10 KB JobSet training pod, sent as a
//! CREATE AdmissionReview (shared by `benches/engine.rs`, `examples/review_loop.rs`
//! and the crate root's `examples/loadgen.rs` and `examples/inventory_scale.rs`).

use serde_json::{Value, json};

pub const POD: &str = include_str!("../../../../tests/fixtures/bench/training-pod-10k.json");

/// The CREATE AdmissionReview of `pod` in `namespace`, as the API server sends it.
pub fn review_json(pod: &Value, namespace: &str) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "u", "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": namespace, "operation": "CREATE",
            "userInfo": {"username": "a", "groups": ["system:authenticated"]}, "object": pod}
    })
}

/// The AdmissionReview of `pod` in team-a, serialised.
#[allow(dead_code)] // examples/inventory_scale.rs reviews the parsed JSON
pub fn encoded_review(pod: &Value) -> Vec<u8> {
    serde_json::to_vec(&review_json(pod, "team-a")).expect("a JSON value serialises")
}
