//! A hold selects exactly the job (issue 39, class 5). A required pod affinity on the
//! zone key holds a job in one zone only when its selector matches the job's pods and
//! nothing else: a selector that adds a label an operator also writes, at a value the
//! operator does not write on this job (so only decoys carrying both labels match), or
//! that lists a second value (another job's pods), lets the job's pods go to every zone
//! such pods run in. Such a term is not counted as the job's hold: `/validate` refuses
//! the job as unheld, and `/mutate` writes the exact hold beside it. Each test runs
//! under the embedded default policy and examples/policy-restricted.yaml.

use serde_json::{Value, json};
use trainplace_engine::{Catalog, Policy, Requester, evaluate, judge_owned};

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

/// A PyTorchJob of 2 whole-node workers on p5 whose template carries `hold` as its
/// required pod affinity on the zone.
fn job(hold: Value) -> Value {
    json!({
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": {"name": "bert", "namespace": "prod"},
        "spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 2, "template": {
            "spec": {
                "containers": [{"name": "pytorch", "image": "train:1",
                    "resources": {"limits": {"nvidia.com/gpu": 8, "vpc.amazonaws.com/efa": 32}}}],
                "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"},
                "affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": hold, "topologyKey": "topology.kubernetes.io/zone"}]}}
            }}}}}
    })
}

fn who(groups: &[String]) -> Requester<'_> {
    Requester {
        namespace: "prod",
        groups,
        ..Default::default()
    }
}

/// The terms of the stored template's required pod affinity.
fn holds(object: &Value) -> Vec<Value> {
    object["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["affinity"]["podAffinity"]
        ["requiredDuringSchedulingIgnoredDuringExecution"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn exact() -> Value {
    json!({"labelSelector": {"matchLabels": {"training.kubeflow.org/job-name": "bert"}},
        "topologyKey": "topology.kubernetes.io/zone"})
}

/// The exact hold still holds: nothing added, nothing refused.
#[test]
fn the_exact_hold_is_the_jobs_hold() {
    let user = ["alice".to_string()];
    for (name, policy) in policies() {
        for hold in [
            json!({"matchLabels": {"training.kubeflow.org/job-name": "bert"}}),
            json!({"matchExpressions": [{"key": "training.kubeflow.org/job-name",
                "operator": "In", "values": ["bert"]}]}),
        ] {
            let v = evaluate(&job(hold.clone()), &policy, &who(&user)).unwrap();
            assert!(v.allowed, "{name}: {hold}: {:#?}", v.findings);
            assert_eq!(
                holds(&v.object).len(),
                1,
                "{name}: {hold}: a second hold written"
            );
        }
    }
}

/// Decoys: an operator's label at another value (only pods carrying both match, and
/// the job's own pods never do), or a second value in `In` (another job's pods). Not
/// the job's hold: `/mutate` writes the exact hold beside it, and the stored job passes.
#[test]
fn a_hold_that_selects_more_or_less_than_the_job_is_not_the_jobs_hold() {
    let user = ["alice".to_string()];
    for (name, policy) in policies() {
        for hold in [
            json!({"matchLabels": {"training.kubeflow.org/job-name": "bert",
                "jobset.sigs.k8s.io/jobset-name": "decoy"}}),
            json!({"matchLabels": {"training.kubeflow.org/job-name": "bert",
                "batch.kubernetes.io/controller-uid": "decoy"}}),
            json!({"matchExpressions": [{"key": "training.kubeflow.org/job-name",
                "operator": "In", "values": ["bert", "decoy"]}]}),
            json!({"matchLabels": {"training.kubeflow.org/job-name": "bert"},
                "matchExpressions": [{"key": "training.kubeflow.org/replica-type",
                "operator": "Exists"}]}),
        ] {
            let m = evaluate(&job(hold.clone()), &policy, &who(&user)).unwrap();
            assert!(
                holds(&m.object).contains(&exact()),
                "{name}: {hold}: no exact hold written: {:?}",
                holds(&m.object)
            );
            let stored = judge_owned(m.object.clone(), &policy, &who(&user)).unwrap();
            assert!(stored.allowed, "{name}: {hold}: {:#?}", stored.findings);
        }
    }
}
