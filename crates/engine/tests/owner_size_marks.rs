//! A mark is not replayable into a larger owner (issue 39, class 3). The mark binds the
//! namespace, the job label, the owner's kind name and the content, all of which a user
//! can write again on a workload of another size. A pod from a trusted controller whose
//! mark verifies is left as admitted only when its owner, as the inventory holds it
//! (a Job's active pods, a StatefulSet's replicas), runs no more pods than the mark
//! states, and when its own index among the owner's pods says no more either. Each test
//! runs under the embedded default policy and examples/policy-restricted.yaml.

use serde_json::{Value, json};
use trainplace_engine::{Catalog, MarkKeys, Policy, Requester, Snapshot, evaluate, judge_owned};

const ADMITTED: &str = "trainplace.io/admitted";
/// The Job controller's service account group (kube-system): trusted.
const KUBE_SYSTEM: &str = "system:serviceaccounts:kube-system";
const JOB_UID: &str = "0b0e6d2c-0000-4000-8000-000000000002";

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

fn keys() -> MarkKeys {
    MarkKeys::new(("k1".into(), vec![7; 32]), Vec::new()).unwrap()
}

fn who<'a>(
    groups: &'a [String],
    keys: &'a MarkKeys,
    inventory: Option<&'a Snapshot>,
) -> Requester<'a> {
    Requester {
        namespace: "prod",
        groups,
        marks: Some(keys),
        inventory,
        ..Default::default()
    }
}

/// A Job of `parallelism` pods x 1 GPU on p5 named `train`, as a person submits it.
fn job(parallelism: u32) -> Value {
    json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "train", "namespace": "prod", "uid": JOB_UID},
        "spec": {"parallelism": parallelism, "template": {
            "metadata": {"labels": {"batch.kubernetes.io/job-name": "train"}},
            "spec": {"restartPolicy": "Never",
                "containers": [{"name": "trainer", "image": "train:1",
                    "command": ["python", "train.py"],
                    "resources": {"limits": {"nvidia.com/gpu": 1}}}],
                "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"}}}}
    })
}

/// The 1-pod Job admitted for a person: the stored object, its template signed.
fn admitted_one(policy: &Policy, k: &MarkKeys) -> Value {
    let user = ["alice".to_string()];
    let mutated = evaluate(&job(1), policy, &who(&user, k, None)).unwrap();
    let stored = mutated.object;
    let v = judge_owned(stored.clone(), policy, &who(&user, k, None)).unwrap();
    assert!(v.allowed, "{:#?}", v.findings);
    let mark = stored["spec"]["template"]["metadata"]["annotations"][ADMITTED]
        .as_str()
        .expect("the admitted template is signed");
    assert!(mark.starts_with("v2.k1.1."), "{mark}");
    stored
}

/// The pod the Job controller makes from `job`'s template.
fn pod_of(job: &Value) -> Value {
    let t = &job["spec"]["template"];
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": t["metadata"].clone(), "spec": t["spec"].clone()});
    pod["metadata"]["name"] = json!("train-abcde");
    pod["metadata"]["namespace"] = json!("prod");
    pod["metadata"]["labels"]["job-name"] = json!("train");
    pod["metadata"]["ownerReferences"] = json!([{"apiVersion": "batch/v1", "kind": "Job",
        "name": "train", "uid": job["metadata"]["uid"], "controller": true}]);
    pod
}

fn inventory_with(owner: &Value) -> Snapshot {
    let mut snap = Snapshot::build(&[] as &[Value], &[] as &[Value], &[] as &[Value]);
    snap.apply_object(owner);
    snap
}

fn left_as_admitted(v: &trainplace_engine::Verdict) -> bool {
    v.notes.iter().any(|n| n.contains("left as admitted"))
}

/// A 1-pod Job's pod whose mark does not verify (the Job was admitted while `/mutate`
/// timed out, or before trainplace): its job label alone made it a rank of a job of
/// unknown size, refused as partial-node, and the Job never started. The inventory
/// holds the Job at one pod, so the pod is one pod. Without the inventory it is still
/// judged as of unknown size; a launcher saying more still wins.
#[test]
fn a_one_pod_jobs_unmarked_pod_is_one_pod_when_the_inventory_holds_the_job() {
    let k = keys();
    let controller = [KUBE_SYSTEM.to_string()];
    let job = json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "j3", "namespace": "prod", "uid": JOB_UID},
        "spec": {"parallelism": 1, "completions": 1, "template": {"spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "eval", "image": "eval:1",
                "resources": {"limits": {"nvidia.com/gpu": 1}}}],
            "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"}}}}});
    let inv = inventory_with(&job);
    let pod = |command: Value| {
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "j3-x7k2p", "namespace": "prod",
                "labels": {"batch.kubernetes.io/job-name": "j3", "job-name": "j3",
                    "batch.kubernetes.io/controller-uid": JOB_UID},
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j3",
                    "uid": JOB_UID, "controller": true}]},
            "spec": {"restartPolicy": "Never",
                "containers": [{"name": "eval", "image": "eval:1", "command": command,
                    "resources": {"limits": {"nvidia.com/gpu": 1}}}],
                "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"}}})
    };
    for (name, policy) in policies() {
        let one = pod(json!(["python", "eval.py"]));
        let v = evaluate(&one, &policy, &who(&controller, &k, Some(&inv))).unwrap();
        assert!(v.allowed, "{name}: the 1-pod Job's pod: {:#?}", v.findings);
        let v = evaluate(&one, &policy, &who(&controller, &k, None)).unwrap();
        assert!(
            !v.allowed,
            "{name}: without the inventory the count is unknown"
        );
        let ranks = pod(json!(["torchrun", "--nnodes=4", "train.py"]));
        let v = evaluate(&ranks, &policy, &who(&controller, &k, Some(&inv))).unwrap();
        assert!(
            !v.allowed,
            "{name}: a launcher saying 4 nodes under a 1-pod Job"
        );
    }
}

/// Attack: the mark admitted for a 1-pod Job is copied, with the same job label, into
/// a Job of parallelism 8 that escaped its own judging (created while the webhook
/// failed open, say). The Job controller's pods carry a verifying mark; the Job the
/// inventory holds runs 8 pods, not 1, so they are judged as 8 pods x 1 GPU and refused.
#[test]
fn a_mark_replayed_into_a_larger_job_is_judged_by_the_owners_size() {
    let k = keys();
    let controller = [KUBE_SYSTEM.to_string()];
    for (name, policy) in policies() {
        let small = admitted_one(&policy, &k);
        let mut large = small.clone();
        large["spec"]["parallelism"] = json!(8);
        let pod = pod_of(&large);
        // The owner as it is: 1 pod. Its pod is left as admitted.
        let inv = inventory_with(&small);
        let v = evaluate(&pod, &policy, &who(&controller, &k, Some(&inv))).unwrap();
        assert!(
            v.allowed && left_as_admitted(&v),
            "{name}: {:#?}",
            v.findings
        );
        // The owner of parallelism 8: judged, and refused as 8 pods x 1 GPU.
        let inv = inventory_with(&large);
        let v = evaluate(&pod, &policy, &who(&controller, &k, Some(&inv))).unwrap();
        assert!(!left_as_admitted(&v), "{name}: {:?}", v.notes);
        assert!(!v.allowed, "{name}: the 8-pod Job's pod admitted");
        assert!(
            v.findings.iter().any(|f| f.found.contains("8 pods")),
            "{name}: {:#?}",
            v.findings
        );
    }
}

/// The Job controller computes active pods: `completions: 1, parallelism: 8` runs one
/// pod, so the 1-pod mark still holds; an Indexed Job of `completions: 8,
/// parallelism: 1` runs index 7 as its only pod.
#[test]
fn the_owners_size_is_its_active_pods() {
    let k = keys();
    let controller = [KUBE_SYSTEM.to_string()];
    for (name, policy) in policies() {
        let small = admitted_one(&policy, &k);
        let mut one_at_a_time = small.clone();
        one_at_a_time["spec"]["parallelism"] = json!(8);
        one_at_a_time["spec"]["completions"] = json!(1);
        let inv = inventory_with(&one_at_a_time);
        let v = evaluate(&pod_of(&small), &policy, &who(&controller, &k, Some(&inv))).unwrap();
        assert!(
            v.allowed && left_as_admitted(&v),
            "{name}: {:#?}",
            v.findings
        );

        let mut indexed = small.clone();
        indexed["spec"]["completions"] = json!(8);
        indexed["spec"]["completionMode"] = json!("Indexed");
        let mut pod = pod_of(&indexed);
        pod["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] = json!("7");
        let inv = inventory_with(&indexed);
        let v = evaluate(&pod, &policy, &who(&controller, &k, Some(&inv))).unwrap();
        assert!(
            v.allowed && left_as_admitted(&v),
            "{name}: {:#?}",
            v.findings
        );
    }
}

/// The inventory holds another Job of that name (the 8-pod one was deleted and a
/// 1-pod one created): its uid is not the pod's owner's, and it says nothing of it.
/// A pod whose owner the inventory does not hold keeps the mark's word.
#[test]
fn another_object_of_the_same_name_is_not_the_owner() {
    let k = keys();
    let controller = [KUBE_SYSTEM.to_string()];
    for (name, policy) in policies() {
        let small = admitted_one(&policy, &k);
        let mut other = small.clone();
        other["spec"]["parallelism"] = json!(8);
        other["metadata"]["uid"] = json!("0b0e6d2c-0000-4000-8000-0000000000ff");
        let inv = inventory_with(&other);
        let v = evaluate(&pod_of(&small), &policy, &who(&controller, &k, Some(&inv))).unwrap();
        assert!(
            v.allowed && left_as_admitted(&v),
            "{name}: {:#?}",
            v.findings
        );
        let empty = inventory_with(&json!({}));
        let v = evaluate(
            &pod_of(&small),
            &policy,
            &who(&controller, &k, Some(&empty)),
        )
        .unwrap();
        assert!(
            v.allowed && left_as_admitted(&v),
            "{name}: {:#?}",
            v.findings
        );
    }
}

/// A pod that numbers itself among its owner's pods tells alone: a StatefulSet's pod of
/// index 3 is one of at least 4, whatever a 1-pod mark says.
#[test]
fn a_pod_index_past_the_marks_count_is_judged() {
    let k = keys();
    let controller = [KUBE_SYSTEM.to_string()];
    for (name, policy) in policies() {
        let small = admitted_one(&policy, &k);
        let mut pod = pod_of(&small);
        pod["metadata"]["labels"]["training.kubeflow.org/replica-index"] = json!("0");
        let v = evaluate(&pod, &policy, &who(&controller, &k, None)).unwrap();
        assert!(
            left_as_admitted(&v),
            "{name}: index 0 of 1 judged: {:?}",
            v.notes
        );
        pod["metadata"]["labels"]["training.kubeflow.org/replica-index"] = json!("3");
        let v = evaluate(&pod, &policy, &who(&controller, &k, None)).unwrap();
        assert!(
            !left_as_admitted(&v),
            "{name}: index 3 of a 1-pod mark: {:?}",
            v.notes
        );
    }
}

/// A LeaderWorkerSet of 4 groups of 1 pod (four single-GPU model replicas): its leader
/// StatefulSet runs one leader per group, numbered by group (`apps.kubernetes.io/
/// pod-index` 0-3) and held by the inventory at 4 replicas. The controller's leaders are
/// never refused: the mark states the 4 leaders its StatefulSet runs. A fifth leader (a
/// StatefulSet grown past the LeaderWorkerSet) is judged.
#[test]
fn a_leader_worker_sets_leaders_of_every_group_are_left_as_admitted() {
    let k = keys();
    let controller = [KUBE_SYSTEM.to_string()];
    let user = ["alice".to_string()];
    let lws = json!({
        "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
        "metadata": {"name": "serve", "namespace": "prod"},
        "spec": {"replicas": 4, "leaderWorkerTemplate": {"size": 1, "workerTemplate": {
            "spec": {"containers": [{"name": "model", "image": "serve:1",
                "resources": {"limits": {"nvidia.com/gpu": 1}}}],
                "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"}}}}}
    });
    for (name, policy) in policies() {
        let stored = evaluate(&lws, &policy, &who(&user, &k, None))
            .unwrap()
            .object;
        let template = &stored["spec"]["leaderWorkerTemplate"]["workerTemplate"];
        let mark = template["metadata"]["annotations"][ADMITTED]
            .as_str()
            .expect("the admitted template is signed");
        assert!(mark.starts_with("v2.k1.4."), "{name}: {mark}");
        let sts = json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "serve", "namespace": "prod", "uid": JOB_UID},
            "spec": {"replicas": 4, "template": template.clone()}});
        let inv = inventory_with(&sts);
        let leader = |group: u32| {
            let mut pod = json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": template["metadata"].clone(), "spec": template["spec"].clone()});
            pod["metadata"]["name"] = json!(format!("serve-{group}"));
            pod["metadata"]["namespace"] = json!("prod");
            pod["metadata"]["labels"]["apps.kubernetes.io/pod-index"] = json!(group.to_string());
            // The labels the LeaderWorkerSet controller writes on its pods.
            pod["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/name"] = json!("serve");
            pod["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/group-index"] =
                json!(group.to_string());
            pod["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1",
                "kind": "StatefulSet", "name": "serve", "uid": JOB_UID, "controller": true}]);
            pod
        };
        for group in 0..4 {
            let v = evaluate(&leader(group), &policy, &who(&controller, &k, Some(&inv))).unwrap();
            assert!(
                v.allowed && left_as_admitted(&v),
                "{name}: the leader of group {group}: {:#?} {:?}",
                v.findings,
                v.notes
            );
        }
        let v = evaluate(&leader(4), &policy, &who(&controller, &k, Some(&inv))).unwrap();
        assert!(
            !left_as_admitted(&v),
            "{name}: a fifth leader: {:?}",
            v.notes
        );
    }
}

/// Attack: a Job whose pods take a whole p5 each through a ResourceClaimTemplate is
/// admitted and signed; the user then deletes the template and creates it again asking
/// for one GPU. The Job controller's pods carry the verifying mark, but their claims now
/// give one GPU: the mark covers what the claims gave when it was signed, so the pods
/// are judged as they are, 4 pods x 1 GPU.
#[test]
fn a_claim_template_replaced_after_admission_voids_the_mark() {
    let k = keys();
    let user = ["alice".to_string()];
    let controller = [KUBE_SYSTEM.to_string()];
    let template = |devices: Value| {
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "gpus", "namespace": "prod"},
            "spec": {"spec": {"devices": {"requests": [
                {"name": "g", "exactly": devices}]}}}})
    };
    let claims_of = |t: Value| {
        let mut c = trainplace_engine::Claims::default();
        c.add(&[t], "prod");
        c
    };
    let whole = claims_of(template(
        json!({"deviceClassName": "gpu.nvidia.com", "allocationMode": "All"}),
    ));
    let one = claims_of(template(
        json!({"deviceClassName": "gpu.nvidia.com", "count": 1}),
    ));
    let job = json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "train", "namespace": "prod", "uid": JOB_UID},
        "spec": {"parallelism": 4, "completions": 4, "completionMode": "Indexed", "template": {
            "metadata": {"labels": {"batch.kubernetes.io/job-name": "train"}},
            "spec": {"restartPolicy": "Never",
                "containers": [{"name": "trainer", "image": "train:1",
                    "command": ["torchrun", "--nnodes=4", "train.py"],
                    "resources": {"claims": [{"name": "gpus"}]}}],
                "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "gpus"}],
                "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"}}}}
    });
    for (name, policy) in policies() {
        let submit = Requester {
            claims: Some(&whole),
            ..who(&user, &k, None)
        };
        let stored = evaluate(&job, &policy, &submit).unwrap().object;
        let v = judge_owned(stored.clone(), &policy, &submit).unwrap();
        assert!(v.allowed, "{name}: {:#?}", v.findings);
        let pod = pod_of(&stored);
        let with = |claims| Requester {
            claims: Some(claims),
            ..who(&controller, &k, None)
        };
        let v = evaluate(&pod, &policy, &with(&whole)).unwrap();
        assert!(v.allowed && left_as_admitted(&v), "{name}: {:?}", v.notes);
        let v = evaluate(&pod, &policy, &with(&one)).unwrap();
        assert!(!left_as_admitted(&v), "{name}: {:?}", v.notes);
        assert!(
            !v.allowed,
            "{name}: the 1-GPU pods admitted on the old mark"
        );
    }
}

/// A platform admin's Job left alone on a granted `trainplace.io/skip` (4 pods x 1 GPU):
/// its templates are signed as they are, so the pods the Job controller makes are left
/// alone too; before, they were judged as the controller's own pods and refused.
#[test]
fn the_pods_of_a_workload_skipped_by_a_granted_admin_are_left_alone() {
    let k = keys();
    let (_, policy) = policies().into_iter().nth(1).unwrap();
    let admin = ["ml-platform-admins".to_string()];
    let controller = [KUBE_SYSTEM.to_string()];
    let mut skipped = job(4);
    skipped["metadata"]["annotations"] = json!({"trainplace.io/skip": "true"});
    skipped["spec"]["template"]["spec"]["containers"][0]["command"] =
        json!(["torchrun", "--nnodes=4", "train.py"]);
    let v = evaluate(&skipped, &policy, &who(&admin, &k, None)).unwrap();
    assert!(v.allowed, "{:#?}", v.findings);
    let stored = v.object;
    let mark = stored["spec"]["template"]["metadata"]["annotations"][ADMITTED]
        .as_str()
        .expect("the skipped Job's template is signed");
    assert!(mark.starts_with("v2.k1.4."), "{mark}");
    // Nothing but the mark: no layout.
    assert!(
        stored["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
            .get("vpc.amazonaws.com/efa")
            .is_none()
    );
    let v = evaluate(&pod_of(&stored), &policy, &who(&controller, &k, None)).unwrap();
    assert!(
        v.allowed && left_as_admitted(&v),
        "{:#?} {:?}",
        v.findings,
        v.notes
    );
    // The same Job from a user the skip is not granted to is refused, and not signed.
    let alice = ["alice".to_string()];
    let v = evaluate(&skipped, &policy, &who(&alice, &k, None)).unwrap();
    assert!(!v.allowed);
}
