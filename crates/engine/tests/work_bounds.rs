//! The work budget's contract, shape by shape: for every list or string field a
//! tenant controls (in a Pod, a Job's and a PyTorchJob's templates, a TrainJob and its
//! runtime patches, and the `$(VAR)` references the engine expands), a review whose
//! body that field grows to 1 MiB and one grown to 3 MiB. The work the engine counts
//! must grow at most linearly with the body, a 1 MiB review must fit its budget, and
//! the 3 MiB one must be answered: a verdict, or the budget's denial. Counted, not
//! timed (`examples/hostile_shapes.rs` times them in a release build).

mod shapes;

use serde_json::Value;
use trainplace_engine::{Endpoint, Limits, Outcome, Policy, Reviewed, review_bytes};

const MIB: usize = 1 << 20;
/// Work at 3 MiB over work at 1 MiB: 3 for linear work, with room for the part of a
/// review that does not grow with the field.
const MAX_RATIO: f64 = 3.5;

fn reviewed(body: &[u8], endpoint: Endpoint, policy: &Policy) -> Reviewed {
    review_bytes(body, endpoint, policy, None, None, &Limits::default(), None).expect("a JSON body")
}

/// How a review ended, in a word; `None` for an ending the contract does not allow.
fn ending(r: &Reviewed) -> Option<&'static str> {
    let answer: Value = serde_json::from_slice(r.body.as_ref().ok()?).ok()?;
    answer["response"]["allowed"].as_bool()?;
    match &r.outcome {
        Outcome::Judged { .. } => Some("verdict"),
        Outcome::OverBudget { .. } => Some("over budget"),
        Outcome::TooBigToRead { .. } => Some("too big to read"),
        // The container bound refuses an object before it is read.
        Outcome::BadObject { message, .. } if message.contains("--max-containers") => {
            Some("too many containers")
        }
        _ => None,
    }
}

/// A review's ending for a message (the verdict's object is megabytes long).
fn short(r: &Reviewed) -> String {
    match &r.outcome {
        Outcome::Judged { verdict, .. } => format!("judged (allowed: {})", verdict.allowed),
        other => format!("{other:?}"),
    }
}

/// One shape's reviews at 1 and 3 MiB, built once for both endpoints.
fn bodies(shape: &shapes::Shape) -> (Vec<u8>, Vec<u8>) {
    let small = shape.review(MIB);
    let large = shape.review(3 * MIB);
    for (body, target) in [(&small, MIB), (&large, 3 * MIB)] {
        let off = body.len().abs_diff(target) as f64 / target as f64;
        assert!(
            off < 0.05,
            "{}: a {} byte body for {target}",
            shape.label(),
            body.len()
        );
    }
    (small, large)
}

/// One shape's two reviews at one endpoint: what went wrong, if anything.
fn check(
    shape: &shapes::Shape,
    (small, large): &(Vec<u8>, Vec<u8>),
    endpoint: Endpoint,
    policy: &Policy,
) -> (String, Vec<String>) {
    let mut wrong = Vec::new();
    let (s, l) = (
        reviewed(small, endpoint, policy),
        reviewed(large, endpoint, policy),
    );
    let ratio = l.work.spent as f64 / s.work.spent.max(1) as f64;
    let line = format!(
        "{:<32} {:<8} {:>10} {:>10} {:>5.2} {:<20} {}",
        shape.label(),
        endpoint.as_str(),
        s.work.spent,
        l.work.spent,
        ratio,
        ending(&s).unwrap_or("WRONG"),
        ending(&l).unwrap_or("WRONG"),
    );
    let name = format!("{} at /{}", shape.label(), endpoint.as_str());
    if ratio > MAX_RATIO {
        wrong.push(format!(
            "{name}: work {} at 1 MiB, {} at 3 MiB: {ratio:.2}x for 3x the body",
            s.work.spent, l.work.spent
        ));
    }
    match ending(&s) {
        Some("over budget") => wrong.push(format!(
            "{name}: the 1 MiB review ran out of its budget ({} units)",
            s.work.limit
        )),
        None => wrong.push(format!("{name}: the 1 MiB review ended {}", short(&s))),
        Some(_) => {}
    }
    if ending(&l).is_none() {
        wrong.push(format!("{name}: the 3 MiB review ended {}", short(&l)));
    }
    (line, wrong)
}

#[test]
fn every_field_a_tenant_controls_costs_work_linear_in_its_size() {
    let policy = Policy::embedded();
    // `WORK_BOUNDS_SHAPES=var_refs,patch_env` reviews only those shapes.
    let only = std::env::var("WORK_BOUNDS_SHAPES").ok();
    let shapes: Vec<shapes::Shape> = shapes::all()
        .into_iter()
        .filter(|s| {
            only.as_deref()
                .is_none_or(|o| o.split(',').any(|n| n == s.name))
        })
        .collect();
    // Two threads: each review's budget and count are its own thread's.
    let results: Vec<(String, Vec<String>)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..2)
            .map(|w| {
                let (shapes, policy) = (&shapes, &policy);
                scope.spawn(move || {
                    let mut out = Vec::new();
                    for shape in shapes.iter().skip(w).step_by(2) {
                        let bodies = bodies(shape);
                        for endpoint in [Endpoint::Validate, Endpoint::Mutate] {
                            out.push(check(shape, &bodies, endpoint, policy));
                        }
                    }
                    out
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().expect("no panic"))
            .collect()
    });
    println!(
        "{:<32} {:<8} {:>10} {:>10} {:>5} {:<20} 3 MiB",
        "shape", "endpoint", "work 1MiB", "work 3MiB", "ratio", "1 MiB"
    );
    for (line, _) in &results {
        println!("{line}");
    }
    let wrong: Vec<&String> = results.iter().flat_map(|(_, w)| w).collect();
    assert!(
        wrong.is_empty(),
        "{} shapes break the contract:\n{}",
        wrong.len(),
        wrong
            .iter()
            .map(|w| w.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(
        only.is_some() || results.len() >= 2 * 30,
        "every shape was reviewed"
    );
}

#[test]
fn a_review_past_its_budget_is_denied_at_validate_and_admitted_unlaid_at_mutate() {
    let policy = Policy::embedded();
    // No units per byte: the budget is its floor, which reading 3 MiB of references
    // outgrows.
    let limits = Limits {
        work_per_byte: 0,
        ..Limits::default()
    };
    let shape = shapes::all()
        .into_iter()
        .find(|s| s.name == "var_refs")
        .expect("the shape");
    let body = shape.review(3 * MIB);
    let run = |endpoint| {
        let r = review_bytes(&body, endpoint, &policy, None, None, &limits, None).unwrap();
        let answer: Value = serde_json::from_slice(r.body.as_ref().unwrap()).unwrap();
        let Outcome::OverBudget { over, .. } = r.outcome else {
            panic!("{} within {:?}", short(&r), r.work);
        };
        assert_eq!(over.limit, trainplace_engine::Budget::FLOOR);
        assert!(r.work.spent > r.work.limit, "{:?}", r.work);
        (answer, over)
    };
    let (denied, over) = run(Endpoint::Validate);
    assert_eq!(denied["response"]["allowed"], false);
    assert_eq!(denied["response"]["status"]["code"], 403);
    let message = denied["response"]["status"]["message"].as_str().unwrap();
    for part in ["Pod big", over.field, &over.limit.to_string()] {
        assert!(message.contains(part), "{part:?} not in {message}");
    }
    let (admitted, _) = run(Endpoint::Mutate);
    assert_eq!(admitted["response"]["allowed"], true);
    assert!(admitted["response"].get("patch").is_none(), "{admitted}");
    let warning = admitted["response"]["warnings"][0].as_str().unwrap();
    assert!(warning.contains("without a layout"), "{warning}");
}

/// One env entry more than the bound.
fn env_past_the_bound() -> Vec<Value> {
    (0..=trainplace_engine::bounds::MAX_ENV)
        .map(|i| serde_json::json!({"name": format!("E{i}"), "value": "1"}))
        .collect()
}

/// `object` reviewed at /validate, judged: its verdict.
fn validated(object: Value) -> trainplace_engine::Verdict {
    let body = serde_json::to_vec(&shapes::admission(object)).unwrap();
    let r = reviewed(&body, Endpoint::Validate, &Policy::embedded());
    match r.outcome {
        Outcome::Judged { verdict, .. } => *verdict,
        _ => panic!("{}", short(&r)),
    }
}

/// `object` reviewed at /validate: refused, and its too-large finding.
fn too_large_finding(object: Value) -> trainplace_engine::Finding {
    let verdict = validated(object);
    assert!(!verdict.allowed);
    verdict
        .findings
        .iter()
        .find(|f| f.rule.as_str() == "too-large")
        .cloned()
        .unwrap_or_else(|| panic!("{:?}", verdict.findings))
}

/// A TrainJob's runtime patch past a bound is refused before the patches are merged
/// into the node pod (the merge copies them): the finding names the patches.
#[test]
fn a_trainjob_patch_past_the_env_bound_is_refused_before_the_merge() {
    let job = serde_json::json!({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
        "metadata": {"name": "patched", "namespace": "ml"},
        "spec": {"runtimeRef": {"name": "torch-distributed"},
            "trainer": {"numNodes": 4, "resourcesPerNode": {"limits": {"nvidia.com/gpu": 8}}},
            "runtimePatches": [{"manager": "tenant.example.com/m", "trainingRuntimeSpec": {"template": {"spec": {
                "replicatedJobs": [{"name": "node", "template": {"spec": {"template": {"spec": {
                    "containers": [{"name": "node", "env": env_past_the_bound()}]}}}}}]}}}}]}});
    let f = too_large_finding(job);
    assert!(f.site.starts_with("spec.runtimePatches[]"), "{}", f.site);
    assert!(f.found.contains("513 env entries"), "{}", f.found);
}

/// A TrainJob trainer's env past the bound is refused before the node pod copies it.
#[test]
fn a_trainer_env_past_the_bound_is_refused_before_the_node_pod_is_built() {
    let job = serde_json::json!({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
        "metadata": {"name": "trainer-env", "namespace": "ml"},
        "spec": {"runtimeRef": {"name": "torch-distributed"},
            "trainer": {"numNodes": 4, "env": env_past_the_bound(),
                "resourcesPerNode": {"limits": {"nvidia.com/gpu": 8}}}}});
    let f = too_large_finding(job);
    assert_eq!(f.site, "spec.trainer");
    assert!(f.found.contains("513 env entries"), "{}", f.found);
}

/// Annotations past the API server's own limit (256 KiB of keys and values) are refused
/// before the TrainJob's node pod copies them; at the limit they are read.
#[test]
fn annotations_past_what_the_api_server_stores_are_refused_before_they_are_copied() {
    let job = |bytes: usize| {
        let value = "x".repeat(1024 - 8);
        let annotations: serde_json::Map<String, Value> = (0..bytes / 1024)
            .map(|i| (format!("a{i:07}"), Value::String(value.clone())))
            .collect();
        serde_json::json!({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": "annotated", "namespace": "ml", "annotations": annotations},
            "spec": {"runtimeRef": {"name": "torch-distributed"},
                "trainer": {"numNodes": 4, "resourcesPerNode": {"limits": {"nvidia.com/gpu": 4}}}}})
    };
    let f = too_large_finding(job(257 * 1024));
    assert_eq!(f.site, "metadata.annotations");
    assert!(f.found.contains("262144 bytes"), "{}", f.found);
    let verdict = validated(job(256 * 1024));
    assert!(
        verdict
            .findings
            .iter()
            .all(|f| f.rule.as_str() != "too-large"),
        "{:?}",
        verdict.findings
    );
}
