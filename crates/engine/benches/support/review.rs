//! What the engine's benchmarks review: the ~10 KB JobSet training pod, sent as a
//! CREATE AdmissionReview in namespace team-a (shared by `benches/engine.rs` and
//! `examples/review_loop.rs`).

use serde_json::{Value, json};

pub const POD: &str = include_str!("../../../../tests/fixtures/bench/training-pod-10k.json");

/// The AdmissionReview of `pod`, as the API server sends it.
pub fn review_bytes(pod: &Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "u", "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "team-a", "operation": "CREATE",
            "userInfo": {"username": "a", "groups": ["system:authenticated"]}, "object": pod}
    }))
    .expect("a JSON value serialises")
}
