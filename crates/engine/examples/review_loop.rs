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
//!
//! It allocates with mimalloc, as `trainplace serve` does.

use serde_json::Value;
use std::hint::black_box;
use trainplace_engine::{Endpoint, Policy, review};

#[path = "../benches/support/review.rs"]
mod review_body;
use review_body::{POD, review_bytes};

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
    let body = review_bytes(&pod);
    let policy = Policy::embedded();
    let mut bytes = 0;
    if std::env::var_os("PARSE_ONLY").is_some() {
        for _ in 0..n {
            let v: Value = serde_json::from_slice(black_box(&body)).expect("parse");
            bytes += black_box(v).as_object().map_or(0, |o| o.len());
        }
        println!("{n} parses {bytes}");
        return;
    }
    for _ in 0..n {
        let v: Value = serde_json::from_slice(black_box(&body)).expect("parse");
        let r = review(v, endpoint, &policy, None, None);
        bytes += r.body.expect("encoded").len();
    }
    println!("{n} reviews, {bytes} response bytes");
}
