//! A fixed number of AdmissionReviews, bytes in to bytes out, on the ~10 KB training
//! pod of the criterion benchmark: for counting instructions, which unlike time do not
//! move with the load of a shared machine.
//!
//!   cargo build --release -p trainplace-engine --example review_loop
//!   perf stat -e instructions:u target/release/examples/review_loop 20000
//!   target/release/examples/review_loop 200 other-pod.json   # any pod, as JSON
//!   target/release/examples/review_loop 200 - validate        # the bench pod, /validate
//!   PARSE_ONLY=1 target/release/examples/review_loop 20000    # only parse and drop the
//!                                                             # review, as the baseline does
//!   UPDATE=1 target/release/examples/review_loop 200          # an UPDATE (oldObject = pod)
//!   TYPED_ONLY=1 target/release/examples/review_loop 20000    # what the do-nothing webhook
//!                                                             # kube-rs leads to does: parse
//!                                                             # into AdmissionReview<DynamicObject>,
//!                                                             # answer from(&request), encode
//!
//! It allocates with mimalloc, as `trainplace serve` does.

use serde_json::Value;
use std::hint::black_box;
use trainplace_engine::{Endpoint, Limits, Policy, review_bytes};

#[path = "../benches/support/review.rs"]
mod review_body;
use review_body::{POD, encoded_review, review_json};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000);
    let endpoint = match std::env::args().nth(3).as_deref() {
        Some("validate") => Endpoint::Validate,
        _ => Endpoint::Mutate,
    };
    let pod: Value = match std::env::args().nth(2).filter(|p| p != "-") {
        Some(path) => {
            let text = std::fs::read_to_string(&path).expect("pod file");
            serde_json::from_str(&text).expect("pod JSON")
        }
        None => serde_json::from_str(POD).expect("bench pod"),
    };
    let body = if std::env::var_os("UPDATE").is_some() {
        // An UPDATE carries the object before the change as oldObject.
        let mut review = review_json(&pod, "team-a");
        review["request"]["operation"] = "UPDATE".into();
        review["request"]["oldObject"] = pod.clone();
        serde_json::to_vec(&review).expect("JSON")
    } else {
        encoded_review(&pod)
    };
    let policy = Policy::embedded();
    let limits = Limits::default();
    let mut bytes = 0;
    if std::env::var_os("PARSE_ONLY").is_some() {
        for _ in 0..n {
            let v: Value = serde_json::from_slice(black_box(&body)).expect("parse");
            bytes += black_box(v).as_object().map_or(0, |o| o.len());
        }
        println!("{n} parses {bytes}");
        return;
    }
    if std::env::var_os("TYPED_ONLY").is_some() {
        // examples/baseline.rs `typed`, without the HTTP around it.
        use kube_core::DynamicObject;
        use kube_core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};
        for _ in 0..n {
            let review: AdmissionReview<DynamicObject> =
                serde_json::from_slice(black_box(&body)).expect("parse");
            let request: Result<AdmissionRequest<DynamicObject>, _> = review.try_into();
            let response = match request {
                Ok(request) => AdmissionResponse::from(&request),
                Err(error) => AdmissionResponse::invalid(error.to_string()),
            };
            bytes += serde_json::to_vec(&response.into_review())
                .expect("JSON")
                .len();
        }
        println!("{n} typed reviews, {bytes} response bytes");
        return;
    }
    for _ in 0..n {
        let r = review_bytes(
            black_box(&body),
            endpoint,
            &policy,
            None,
            None,
            &limits,
            None,
        )
        .expect("JSON");
        let body = r.body.expect("encoded");
        if std::env::var_os("PRINT").is_some() {
            println!("{}", String::from_utf8_lossy(&body));
        }
        bytes += body.len();
    }
    println!("{n} reviews, {bytes} response bytes");
}
