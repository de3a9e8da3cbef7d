//! The per-node NCCL check runs on the nodes its job runs on, on either route: the eksctl
//! plan's check selects what `job-*.yaml` selects, the Karpenter plan's what
//! `job-*-karpenter.yaml` selects (its NodePools, reserved nodes for reserved capacity),
//! so its pods schedule wherever the job's do. The multi-node nccl-tests likewise.

mod common;

use serde_json::Value;
use trainplace_advisor::artifacts::{nccl_tests, node_check, objects};
use trainplace_advisor::recommend::Recommendation;
use trainplace_engine::Policy;

/// What decides a pod's node: selector, node affinity, tolerations; for every pod spec
/// in `v` that asks for the accelerator.
fn selections(v: &Value, resource: &str, out: &mut Vec<[Value; 3]>) {
    match v {
        Value::Object(map) => {
            let gpu = map
                .get("containers")
                .and_then(Value::as_array)
                .is_some_and(|cs| {
                    cs.iter()
                        .any(|c| !c["resources"]["limits"][resource].is_null())
                });
            if gpu {
                out.push([
                    v["nodeSelector"].clone(),
                    v["affinity"]["nodeAffinity"].clone(),
                    v["tolerations"].clone(),
                ]);
            }
            for child in map.values() {
                selections(child, resource, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|i| selections(i, resource, out)),
        _ => {}
    }
}

fn selection(v: &Value, resource: &str) -> Vec<[Value; 3]> {
    let mut out = Vec::new();
    selections(v, resource, &mut out);
    out
}

/// The check's one pod spec selects exactly what every GPU pod of the job selects.
fn assert_same_nodes(check: &Value, job: &Value, resource: &str, what: &str) {
    let check = selection(check, resource);
    assert_eq!(check.len(), 1, "{what}: {check:?}");
    let job = selection(job, resource);
    assert!(!job.is_empty(), "{what}: the job has no GPU pod");
    for pod in &job {
        assert_eq!(&check[0], pod, "{what}");
    }
}

/// The plan's checks select its job's nodes.
fn check_route(rec: &Recommendation, what: &str) {
    let o = objects(rec, &Policy::embedded());
    let resource = rec.instance.accelerator_resource.as_str();
    let check = o
        .node_check
        .as_ref()
        .unwrap_or_else(|| panic!("{what}: no node check"));
    assert_same_nodes(check, &o.job, resource, what);
    assert_same_nodes(
        o.nccl_tests.as_ref().unwrap(),
        &o.job,
        resource,
        &format!("{what}, nccl-tests"),
    );
    assert_eq!(check["metadata"]["name"], node_check::name("train"));
}

#[test]
fn the_node_check_selects_the_jobs_nodes_on_both_routes() {
    for scenario in ["h100-blocks", "l40s-on-demand", "a100-odcr"] {
        for framework in ["pytorchjob", "jobset", "mpijob"] {
            let rec = common::recommendation(scenario, framework);
            check_route(&rec, &format!("{scenario} {framework}, eksctl"));
            let rec = common::karpenter_recommendation(scenario, framework);
            check_route(&rec, &format!("{scenario} {framework}, Karpenter"));
        }
    }
    let split = common::split_plan();
    check_route(&split.recommendation, "split on-demand, eksctl");
    let split = common::split_plan_on(Some("karpenter"));
    check_route(&split.recommendation, "split on-demand, Karpenter");
}

#[test]
fn the_karpenter_check_is_its_own_file_and_keeps_off_the_eksctl_labels() {
    let files = common::karpenter_artifacts("h100-blocks", "pytorchjob");
    assert!(
        !files.contains_key(node_check::NODE_CHECK_FILE),
        "{files:?}"
    );
    assert!(
        !files.contains_key(nccl_tests::NCCL_TESTS_FILE),
        "{files:?}"
    );
    let text = &files[node_check::KARPENTER_NODE_CHECK_FILE];
    let check: Value = serde_yaml_ng::from_str(text).unwrap();
    let spec = &check["spec"]["template"]["spec"];
    assert_eq!(
        spec["nodeSelector"]["karpenter.sh/capacity-type"],
        "reserved"
    );
    assert!(spec["nodeSelector"]["eks.amazonaws.com/capacityType"].is_null());
    assert!(text.contains("kubectl apply -f nccl-node-check-karpenter.yaml"));
    assert!(files["aws-cli.sh"].contains(node_check::KARPENTER_NODE_CHECK_FILE));
    let tests = &files[nccl_tests::KARPENTER_NCCL_TESTS_FILE];
    assert!(tests.contains("kubectl apply -f nccl-tests-mpijob-karpenter.yaml"));
    assert!(!tests.contains("eks.amazonaws.com/capacityType"), "{tests}");
    assert!(files["aws-cli.sh"].contains(nccl_tests::KARPENTER_NCCL_TESTS_FILE));
    // Trainium has no NCCL check on either route.
    let trainium = common::karpenter_artifacts("trainium", "pytorchjob");
    assert!(!trainium.contains_key(node_check::KARPENTER_NODE_CHECK_FILE));
    assert!(!trainium.contains_key(nccl_tests::KARPENTER_NCCL_TESTS_FILE));
}
