//! The engine on a realistic ~10 KB training pod (JobSet-created, p5.48xlarge):
//! the full evaluate (classify, mutate, rules, patch), a second pass over the
//! mutated pod (the validating webhook's case), and a full AdmissionReview.

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use serde_json::Value;
use std::hint::black_box;
use trainplace_engine::{Endpoint, Limits, review_bytes};
use trainplace_engine::{Policy, Requester, evaluate, evaluate_owned};

#[path = "support/review.rs"]
mod review_body;
use review_body::{POD, encoded_review};

fn bench(c: &mut Criterion) {
    let pod: Value = serde_json::from_str(POD).unwrap();
    let policy = Policy::embedded();
    let groups = vec!["system:authenticated".to_string()];
    let who = Requester {
        namespace: "team-a",
        namespace_labels: None,
        groups: &groups,
        inventory: None,
        marks: None,
        now: None,
        claims: None,
        updating: None,
    };
    let mutated = evaluate(&pod, &policy, &who).unwrap().object;

    // The webhook owns the object it parsed, so the clone is setup, not measured.
    c.bench_function("evaluate 10KB training pod (mutate)", |b| {
        b.iter_batched(
            || pod.clone(),
            |p| evaluate_owned(p, &policy, &who).unwrap(),
            BatchSize::SmallInput,
        )
    });
    c.bench_function("evaluate mutated pod (validate, no patch)", |b| {
        b.iter_batched(
            || mutated.clone(),
            |p| evaluate_owned(p, &policy, &who).unwrap(),
            BatchSize::SmallInput,
        )
    });
    let body = encoded_review(&pod);
    c.bench_function("AdmissionReview bytes -> response bytes (mutate)", |b| {
        b.iter(|| {
            let r = review_bytes(
                black_box(&body),
                Endpoint::Mutate,
                &policy,
                None,
                None,
                &Limits::default(),
                None,
            );
            r.unwrap().body.unwrap()
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
