//! UPDATEs are judged for what they change. A workload admitted with its submitter's
//! grants is updated by controllers that hold none (the garbage collector removing a
//! finalizer, Kueue suspending, unsuspending or preempting a job): such an update brings
//! no new finding and is admitted. An update that brings one is refused, and a pod's
//! job label cannot move the pod to another job.

use serde_json::{Value, json};
use trainplace_engine::{Catalog, Endpoint, Policy, review};

const POLICY: &str = "apiVersion: trainplace.io/v1alpha1
kind: Policy
optIns:
  allowPartialNode: { namespaces: [\"*\"], groups: [ml-researchers] }
  skip: { namespaces: [\"*\"], groups: [ml-platform-admins] }
";

fn policy() -> Policy {
    Policy::from_parts(POLICY, "test", Catalog::embedded()).unwrap()
}

/// A 4-pod Job of 1-GPU pods on p5 that opts in to partial nodes (granted to its
/// submitter's group, not to controllers).
fn job(gpus: u32) -> Value {
    json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "bert", "namespace": "research", "finalizers": ["batch.kubernetes.io/job-tracking"],
            "annotations": {"trainplace.io/allow-partial-node": "true"}},
        "spec": {"parallelism": 4, "completions": 4, "completionMode": "Indexed", "suspend": true,
            "template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "trainer", "image": "train:1",
                    "resources": {"limits": {"nvidia.com/gpu": gpus}}}],
                "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"}}}}})
}

fn update(
    old: &Value,
    new: &Value,
    user: &str,
    groups: &[&str],
    kind: &str,
    resource: &str,
) -> Value {
    let body = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "u-1",
            "kind": {"group": if kind == "Pod" { "" } else { "batch" }, "version": "v1", "kind": kind},
            "resource": {"group": if kind == "Pod" { "" } else { "batch" }, "version": "v1", "resource": resource},
            "name": new["metadata"]["name"], "namespace": "research", "operation": "UPDATE",
            "userInfo": {"username": user, "groups": groups},
            "object": new, "oldObject": old}});
    let reviewed = review(body, Endpoint::Validate, &policy(), None, None);
    serde_json::from_slice(&reviewed.body.unwrap()).unwrap()
}

fn allowed(answer: &Value) -> bool {
    answer["response"]["allowed"] == true
}

const GC: &str = "system:serviceaccount:kube-system:generic-garbage-collector";
const KUEUE: &str = "system:serviceaccount:kueue-system:kueue-controller-manager";
/// The groups of Kueue's service account: no opt-in is granted to them.
const KUEUE_GROUPS: [&str; 2] = [
    "system:serviceaccounts",
    "system:serviceaccounts:kueue-system",
];

#[test]
fn a_controllers_update_that_changes_no_finding_is_admitted() {
    let old = job(1);
    // The garbage collector removes the finalizer of a job being deleted.
    let mut gone = old.clone();
    gone["metadata"]["finalizers"] = json!([]);
    gone["metadata"]["deletionTimestamp"] = json!("2026-11-26T10:00:00Z");
    let a = update(
        &old,
        &gone,
        GC,
        &[
            "system:serviceaccounts",
            "system:serviceaccounts:kube-system",
        ],
        "Job",
        "jobs",
    );
    assert!(allowed(&a), "finalizer removal refused: {a}");
    // Kueue unsuspends the job and writes its flavor's node selector.
    let mut started = old.clone();
    started["spec"]["suspend"] = json!(false);
    started["spec"]["template"]["spec"]["nodeSelector"]["karpenter.sh/capacity-type"] =
        json!("on-demand");
    let a = update(
        &old,
        &started,
        KUEUE,
        &[
            "system:serviceaccounts",
            "system:serviceaccounts:kueue-system",
        ],
        "Job",
        "jobs",
    );
    assert!(allowed(&a), "unsuspend refused: {a}");
    assert!(
        a["response"]["warnings"]
            .to_string()
            .contains("this update does not change it"),
        "{a}"
    );
    // Kueue preempts it again.
    let a = update(
        &started,
        &old,
        KUEUE,
        &["system:serviceaccounts:kueue-system"],
        "Job",
        "jobs",
    );
    assert!(allowed(&a), "suspend refused: {a}");
}

#[test]
fn an_update_that_brings_a_finding_is_refused() {
    // Attack: admitted as a whole-node job, then edited down to 1 GPU per pod by
    // someone without the grant.
    let old = job(8);
    let new = job(1);
    let a = update(
        &old,
        &new,
        "mallory",
        &["system:authenticated"],
        "Job",
        "jobs",
    );
    assert!(
        !allowed(&a),
        "a new partial-node layout was admitted on UPDATE: {a}"
    );
}

fn pod(job: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "bert-1", "namespace": "research",
            "labels": {"training.kubeflow.org/job-name": job}, "finalizers": ["example.com/keep"]},
        "spec": {"nodeName": "n1", "containers": [{"name": "trainer", "image": "train:1",
            "command": ["torchrun"], "args": ["train.py"],
            "env": [{"name": "PET_NNODES", "value": "4"}],
            "resources": {"limits": {"nvidia.com/gpu": 8, "vpc.amazonaws.com/efa": 32}}}],
            "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge",
                "topology.kubernetes.io/zone": "us-east-1a"}}})
}

#[test]
fn a_pod_cannot_be_relabelled_into_another_job() {
    // Attack: after a sibling is bound, relabel this pod so the next pod of the job is
    // no longer held with it.
    let old = pod("bert");
    let a = update(
        &old,
        &pod("gpt"),
        "alice",
        &["system:authenticated"],
        "Pod",
        "pods",
    );
    assert!(!allowed(&a), "a training pod moved to another job: {a}");
    assert!(
        a["response"]["status"]["message"]
            .to_string()
            .contains("training.kubeflow.org/job-name"),
        "{a}"
    );
    // Removing its finalizer is a change the pod's job does not see.
    let mut freed = old.clone();
    freed["metadata"]["finalizers"] = json!([]);
    let a = update(
        &old,
        &freed,
        GC,
        &["system:serviceaccounts:kube-system"],
        "Pod",
        "pods",
    );
    assert!(allowed(&a), "{a}");
}

/// Attack: an opted-in PyTorchJob admitted for a researcher is grown by someone without
/// the grant (4 to 16 one-GPU workers). The mutating webhook signs every template it
/// sees, so the mark proves nothing about who may hold the opt-in: the grown job is a new
/// finding, refused. Kueue's unsuspend of the same job passes.
#[test]
fn a_mark_signed_on_update_grants_nothing() {
    use trainplace_engine::{MarkKeys, Requester, evaluate};
    let keys = MarkKeys::new(("k1".into(), vec![5; 32]), Vec::new()).unwrap();
    let job = |workers: u32| {
        json!({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": "bert", "namespace": "research"},
            "spec": {"runPolicy": {"suspend": true}, "pytorchReplicaSpecs": {"Worker": {"replicas": workers, "template": {
                "metadata": {"annotations": {"trainplace.io/allow-partial-node": "true"}},
                "spec": {"containers": [{"name": "pytorch", "image": "train:1",
                    "resources": {"limits": {"nvidia.com/gpu": 1}}}],
                    "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"}}}}}}})
    };
    let researcher = ["ml-researchers".to_string()];
    let submit = Requester {
        namespace: "research",
        groups: &researcher,
        marks: Some(&keys),
        ..Default::default()
    };
    let admitted = evaluate(&job(4), &policy(), &submit).unwrap();
    assert!(admitted.allowed, "{:#?}", admitted.findings);
    let stored = admitted.object;
    let both = |new: &Value, user: &str, groups: &[&str]| {
        through_webhooks(Some(&stored), new, user, groups, &keys).0
    };
    let mut grown = stored.clone();
    grown["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = json!(16);
    let a = both(&grown, "mallory", &["system:authenticated"]);
    assert!(
        !allowed(&a),
        "a grown partial-node job was admitted on UPDATE: {a}"
    );
    let mut unsuspended = stored.clone();
    unsuspended["spec"]["runPolicy"]["suspend"] = json!(false);
    let a = both(
        &unsuspended,
        KUEUE,
        &["system:serviceaccounts:kueue-system"],
    );
    assert!(allowed(&a), "Kueue's unsuspend refused: {a}");
}

/// `new` through both webhooks as the API server sends it (a CREATE, or an UPDATE of
/// `old`): `/validate`'s answer, and the object as `/mutate` wrote it.
fn through_webhooks(
    old: Option<&Value>,
    new: &Value,
    user: &str,
    groups: &[&str],
    keys: &trainplace_engine::MarkKeys,
) -> (Value, Value) {
    let (group, version) = new["apiVersion"]
        .as_str()
        .unwrap()
        .rsplit_once('/')
        .unwrap_or(("", "v1"));
    let kind = new["kind"].as_str().unwrap();
    let review_of = |object: &Value| {
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u",
                "kind": {"group": group, "version": version, "kind": kind},
                "resource": {"group": group, "version": version,
                    "resource": format!("{}s", kind.to_lowercase())},
                "name": new["metadata"]["name"], "namespace": "research",
                "operation": if old.is_some() { "UPDATE" } else { "CREATE" },
                "userInfo": {"username": user, "groups": groups},
                "object": object, "oldObject": old}})
    };
    let m = review(
        review_of(new),
        Endpoint::Mutate,
        &policy(),
        None,
        Some(keys),
    );
    let m: Value = serde_json::from_slice(&m.body.unwrap()).unwrap();
    let mut patched = new.clone();
    if let Some(p) = m["response"]["patch"].as_str() {
        let bytes = base64_simd::STANDARD.decode_to_vec(p).unwrap();
        let patch: json_patch::Patch = serde_json::from_slice(&bytes).unwrap();
        json_patch::patch(&mut patched, &patch).unwrap();
    }
    let v = review(
        review_of(&patched),
        Endpoint::Validate,
        &policy(),
        None,
        Some(keys),
    );
    (serde_json::from_slice(&v.body.unwrap()).unwrap(), patched)
}

/// Kueue admits part of a partial-node Job whose opt-in is granted to its submitter's
/// group only: it lowers the parallelism, writes its flavor's node selector and starts
/// the job; the template is signed again. When Kueue preempts the job it suspends it,
/// takes its node selector back and restores the parallelism, in one update. That
/// restore is no larger than what the submitter was admitted with (the stored mark
/// vouches for 4 pods), so it passes; it had been judged as growth under Kueue's groups
/// and refused, and the preempted job kept running. Growing the job past that is still
/// refused.
#[test]
fn kueue_restoring_a_partially_admitted_job_is_no_growth() {
    let keys = trainplace_engine::MarkKeys::new(("k1".into(), vec![5; 32]), Vec::new()).unwrap();
    let kueue = KUEUE_GROUPS;
    let (a, submitted) = through_webhooks(None, &job(1), "alice", &["ml-researchers"], &keys);
    assert!(allowed(&a), "the granted job was refused: {a}");
    let mut partial = submitted.clone();
    partial["spec"]["parallelism"] = json!(2);
    partial["spec"]["suspend"] = json!(false);
    partial["spec"]["template"]["spec"]["nodeSelector"]["karpenter.sh/capacity-type"] =
        json!("on-demand");
    let (a, running) = through_webhooks(Some(&submitted), &partial, KUEUE, &kueue, &keys);
    assert!(allowed(&a), "Kueue's partial admission refused: {a}");
    let mut preempted = running.clone();
    preempted["spec"]["parallelism"] = json!(4);
    preempted["spec"]["suspend"] = json!(true);
    preempted["spec"]["template"]["spec"]["nodeSelector"] =
        json!({"node.kubernetes.io/instance-type": "p5.48xlarge"});
    let (a, _) = through_webhooks(Some(&running), &preempted, KUEUE, &kueue, &keys);
    assert!(allowed(&a), "Kueue's preemption refused: {a}");
    let mut grown = running.clone();
    grown["spec"]["parallelism"] = json!(8);
    grown["spec"]["completions"] = json!(8);
    let (a, _) = through_webhooks(
        Some(&running),
        &grown,
        "mallory",
        &["system:authenticated"],
        &keys,
    );
    assert!(
        !allowed(&a),
        "a job grown past its admitted size passed: {a}"
    );
}

/// A Job created with a granted skip, then unsuspended by Kueue, which writes its
/// flavor's node selector into the template: the template is signed again as it is now,
/// so the Job controller's pods keep the skip the submitter was granted (they were
/// refused as partial-node: the mark signed at creation no longer matched). Kueue's
/// preemption passes too; a user without the grant still cannot skip.
#[test]
fn kueue_unsuspending_a_skipped_job_keeps_its_pods_skipped() {
    let keys = trainplace_engine::MarkKeys::new(("k1".into(), vec![5; 32]), Vec::new()).unwrap();
    let kueue = KUEUE_GROUPS;
    let mut skipped = job(1);
    skipped["metadata"]["annotations"] = json!({"trainplace.io/skip": "true"});
    let (a, _) = through_webhooks(None, &skipped, "mallory", &["system:authenticated"], &keys);
    assert!(!allowed(&a), "a skip nobody granted passed: {a}");
    let (a, submitted) = through_webhooks(None, &skipped, "root", &["ml-platform-admins"], &keys);
    assert!(allowed(&a), "the granted skip was refused: {a}");
    let mut started = submitted.clone();
    started["spec"]["suspend"] = json!(false);
    started["spec"]["template"]["spec"]["nodeSelector"]["karpenter.sh/capacity-type"] =
        json!("on-demand");
    let (a, running) = through_webhooks(Some(&submitted), &started, KUEUE, &kueue, &keys);
    assert!(allowed(&a), "Kueue's unsuspend refused: {a}");
    let mark = |j: &Value| {
        j["spec"]["template"]["metadata"]["annotations"]["trainplace.io/admitted"].clone()
    };
    assert_ne!(
        mark(&running),
        mark(&submitted),
        "the template was not signed again"
    );
    let template = &running["spec"]["template"];
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": template["metadata"].clone(), "spec": template["spec"].clone()});
    pod["metadata"]["name"] = json!("bert-2-x7k2p");
    pod["metadata"]["namespace"] = json!("research");
    pod["metadata"]["labels"] = json!({"batch.kubernetes.io/job-name": "bert", "job-name": "bert",
        "batch.kubernetes.io/job-completion-index": "2",
        "batch.kubernetes.io/controller-uid": "6f7c2c1e-1111-4a2b-9c3d-000000000001"});
    pod["metadata"]["ownerReferences"] = json!([{"apiVersion": "batch/v1", "kind": "Job",
        "name": "bert", "uid": "6f7c2c1e-1111-4a2b-9c3d-000000000001", "controller": true}]);
    let (a, _) = through_webhooks(
        None,
        &pod,
        "system:serviceaccount:kube-system:job-controller",
        &[
            "system:serviceaccounts",
            "system:serviceaccounts:kube-system",
        ],
        &keys,
    );
    assert!(allowed(&a), "the Job controller's pod was refused: {a}");
    let mut preempted = running.clone();
    preempted["spec"]["suspend"] = json!(true);
    let (a, _) = through_webhooks(Some(&running), &preempted, KUEUE, &kueue, &keys);
    assert!(allowed(&a), "Kueue's preemption refused: {a}");
}

/// The answer of the mutating webhook to `new` (an UPDATE of `old` when there is one).
fn mutate(old: Option<&Value>, new: &Value, user: &str, groups: &[&str], policy: &Policy) -> Value {
    let marks = trainplace_engine::MarkKeys::new(("k1".into(), vec![7; 32]), Vec::new());
    let body = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "u-1",
            "kind": {"group": "batch", "version": "v1", "kind": "Job"},
            "resource": {"group": "batch", "version": "v1", "resource": "jobs"},
            "name": new["metadata"]["name"], "namespace": "research",
            "operation": if old.is_some() { "UPDATE" } else { "CREATE" },
            "userInfo": {"username": user, "groups": groups},
            "object": new, "oldObject": old}});
    let reviewed = review(body, Endpoint::Mutate, policy, None, marks.as_ref());
    serde_json::from_slice::<Value>(&reviewed.body.unwrap()).unwrap()["response"].clone()
}

/// `object` with a JSON Patch applied.
fn apply_patch(object: &Value, patch: &str) -> Value {
    let patch: json_patch::Patch = serde_json::from_str(patch).unwrap();
    let mut out = object.clone();
    json_patch::patch(&mut out, &patch).unwrap();
    out
}

fn patch_text(response: &Value) -> String {
    let b64 = response["patch"].as_str().unwrap_or("");
    String::from_utf8(base64_simd::STANDARD.decode_to_vec(b64).unwrap()).unwrap()
}

/// A stored Job that the mutating webhook would still lay out (created before
/// trainplace, or left alone then): an update that changes nothing in its spec (the
/// garbage collector removing a finalizer) gets no patch. A patch would rewrite a
/// running Job's template, which the API server refuses, and so the update.
#[test]
fn the_mutating_webhook_leaves_an_update_that_changes_no_spec() {
    let stored = job(8);
    let created = mutate(None, &stored, "alice", &["ml-researchers"], &policy());
    assert!(
        patch_text(&created).contains("vpc.amazonaws.com/efa"),
        "the stored Job is one the layout changes: {created}"
    );
    let mut finalized = stored.clone();
    finalized["metadata"]["finalizers"] = json!([]);
    let gc = mutate(
        Some(&stored),
        &finalized,
        GC,
        &["system:serviceaccounts"],
        &policy(),
    );
    assert_eq!(gc["allowed"], true, "{gc}");
    assert!(gc["patch"].is_null(), "{gc}");
    // Kueue's unsuspend changes the spec (suspend, its flavor's node selector), but a
    // Job's template is immutable but for those: a layout patch would make the API
    // server refuse the unsuspend, and the Job would never start.
    let unsuspend = |old: &Value| {
        let mut new = old.clone();
        new["spec"]["suspend"] = json!(false);
        new["spec"]["template"]["spec"]["nodeSelector"]["topology.kubernetes.io/zone"] =
            json!("us-east-1a");
        mutate(
            Some(old),
            &new,
            KUEUE,
            &["system:serviceaccounts"],
            &policy(),
        )
    };
    let kueue = unsuspend(&stored);
    assert_eq!(kueue["allowed"], true, "{kueue}");
    // The layout would change (this Job was stored without it): nothing is written.
    assert!(kueue["patch"].is_null(), "{kueue}");
    // A Job stored as laid out: Kueue's unsuspend gets its template's mark signed again
    // for the new node selector, and nothing else.
    let created = mutate(None, &stored, "alice", &["ml-researchers"], &policy());
    let laid_out = apply_patch(&stored, &patch_text(&created));
    let kueue = unsuspend(&laid_out);
    let ops: Vec<Value> = serde_json::from_str(&patch_text(&kueue)).unwrap();
    assert!(!ops.is_empty(), "{kueue}");
    assert!(
        ops.iter()
            .all(|op| op["path"].as_str().unwrap().contains("/template/metadata")),
        "{kueue}"
    );
    // An update of a workload whose templates may change is laid out as usual.
    let stored = pytorchjob(8);
    let mut grown = stored.clone();
    grown["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = json!(4);
    let user = mutate(
        Some(&stored),
        &grown,
        "alice",
        &["ml-researchers"],
        &policy(),
    );
    assert!(
        patch_text(&user).contains("vpc.amazonaws.com/efa"),
        "{user}"
    );
}

/// A PyTorchJob of 2 Workers of `gpus` GPUs on p5.
fn pytorchjob(gpus: u32) -> Value {
    json!({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": {"name": "bert", "namespace": "research"},
        "spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 2, "template": {"spec": {
            "containers": [{"name": "pytorch", "image": "train:1",
                "resources": {"limits": {"nvidia.com/gpu": gpus}}}],
            "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"}}}}}}})
}

/// An object created with a granted `trainplace.io/skip` stays alone on its updates,
/// whoever sends them (the skip was judged with its submitter's grants at creation).
#[test]
fn an_update_of_a_skipped_object_that_keeps_the_skip_gets_no_patch() {
    let mut stored = job(8);
    stored["metadata"]["annotations"]["trainplace.io/skip"] = json!("true");
    let mut unsuspended = stored.clone();
    unsuspended["spec"]["suspend"] = json!(false);
    let kueue = mutate(
        Some(&stored),
        &unsuspended,
        KUEUE,
        &["system:serviceaccounts"],
        &policy(),
    );
    assert!(kueue["patch"].is_null(), "{kueue}");
    // Taking the skip off a workload whose templates may change is laid out.
    let mut stored = pytorchjob(8);
    stored["metadata"]["annotations"] = json!({"trainplace.io/skip": "true"});
    let mut unskipped = stored.clone();
    unskipped["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = json!(3);
    unskipped["metadata"]["annotations"]
        .as_object_mut()
        .unwrap()
        .remove("trainplace.io/skip");
    let user = mutate(
        Some(&stored),
        &unskipped,
        "alice",
        &["ml-researchers"],
        &policy(),
    );
    assert!(
        patch_text(&user).contains("vpc.amazonaws.com/efa"),
        "{user}"
    );
}

/// Strict mode reads no admission mark and writes none: its zone pin comes after the
/// layout, so a mark written before it never matched the stored template, and every
/// later update signed it again.
#[test]
fn strict_mode_writes_no_admission_mark() {
    let strict = Policy::from_parts(
        "apiVersion: trainplace.io/v1alpha1
kind: Policy
guarantee: strict
defaults: { zone: us-east-1a }
",
        "test",
        Catalog::embedded(),
    )
    .unwrap();
    let created = mutate(None, &job(8), "alice", &["ml-researchers"], &strict);
    let patch = patch_text(&created);
    assert!(patch.contains("us-east-1a"), "the zone is pinned: {patch}");
    // As a path (`.../annotations/trainplace.io~1admitted`) or a key in an added map.
    let signs = |patch: &str| {
        patch.contains("trainplace.io~1admitted") || patch.contains("\"trainplace.io/admitted\"")
    };
    assert!(!signs(&patch), "{patch}");
    // The precise policy signs the same Job's template.
    let precise = patch_text(&mutate(
        None,
        &job(8),
        "alice",
        &["ml-researchers"],
        &policy(),
    ));
    assert!(signs(&precise), "{precise}");
}

/// Strict mode, with the partial-node opt-in granted to the submitter's group only: the
/// job was admitted under it, and Kueue's unsuspend and the garbage collector's
/// finalizer removal (neither in that group) change nothing strict mode judges, so they
/// pass, as the exported policies let them (`old fails` for these requesters too). They
/// had been refused: the old object's refused opt-in was not taken as the rule failing
/// on it. A user outside the group turning a whole-node job into a partial one is
/// still refused.
#[test]
fn strict_mode_passes_controllers_updating_a_job_opted_in_by_its_submitters_group() {
    let pinned = |gpus: u32| {
        let mut j = job(gpus);
        j["spec"]["template"]["metadata"] =
            json!({"annotations": {"trainplace.io/allow-partial-node": "true"}});
        j["spec"]["template"]["spec"]["nodeSelector"]["topology.kubernetes.io/zone"] =
            json!("us-east-1a");
        j
    };
    let stored = pinned(1);
    assert!(
        judged_in_strict_mode(None, &stored, &["ml-researchers"]),
        "the granted job"
    );
    let mut started = stored.clone();
    started["spec"]["suspend"] = json!(false);
    started["spec"]["template"]["spec"]["nodeSelector"]["karpenter.sh/capacity-type"] =
        json!("on-demand");
    let kueue = KUEUE_GROUPS;
    assert!(
        judged_in_strict_mode(Some(&stored), &started, &kueue),
        "Kueue's unsuspend refused"
    );
    let mut finalized = started.clone();
    finalized["metadata"]["finalizers"] = json!([]);
    let gc = [
        "system:serviceaccounts",
        "system:serviceaccounts:kube-system",
    ];
    assert!(
        judged_in_strict_mode(Some(&started), &finalized, &gc),
        "finalizer removal refused"
    );
    assert!(
        !judged_in_strict_mode(Some(&pinned(8)), &stored, &["system:authenticated"]),
        "a whole-node job made partial by a user outside the group passed"
    );
}

/// A job created with a granted skip is updated by Kueue (unsuspend with its flavor's
/// node selector, then preemption) and by the garbage collector, none of whom may write
/// the skip: the skip kept from the old object is no news, and they pass. A user
/// without the grant who makes a whole-node job partial, skip kept, is refused: the
/// rules the skip would have skipped are judged for them.
#[test]
fn strict_mode_passes_controllers_updating_a_job_skipped_by_its_submitter() {
    let skipped = |gpus: u32| {
        let mut j = job(gpus);
        j["metadata"]["annotations"] = json!({"trainplace.io/skip": "true"});
        j["spec"]["suspend"] = json!(true);
        j
    };
    let stored = skipped(1);
    assert!(
        judged_in_strict_mode(None, &stored, &["ml-platform-admins"]),
        "the granted skip"
    );
    assert!(
        !judged_in_strict_mode(None, &stored, &["system:authenticated"]),
        "a skip nobody granted"
    );
    let kueue = KUEUE_GROUPS;
    let mut started = stored.clone();
    started["spec"]["suspend"] = json!(false);
    started["spec"]["template"]["spec"]["nodeSelector"]["karpenter.sh/capacity-type"] =
        json!("on-demand");
    assert!(
        judged_in_strict_mode(Some(&stored), &started, &kueue),
        "Kueue's unsuspend refused"
    );
    let mut preempted = started.clone();
    preempted["spec"]["suspend"] = json!(true);
    assert!(
        judged_in_strict_mode(Some(&started), &preempted, &kueue),
        "Kueue's preemption refused"
    );
    let mut finalized = started.clone();
    finalized["metadata"]["finalizers"] = json!([]);
    assert!(
        judged_in_strict_mode(
            Some(&started),
            &finalized,
            &["system:serviceaccounts:kube-system"]
        ),
        "finalizer removal refused"
    );
    let mut whole = skipped(8);
    whole["spec"]["template"]["spec"]["nodeSelector"]["topology.kubernetes.io/zone"] =
        json!("us-east-1a");
    let mut partial = whole.clone();
    partial["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] =
        json!(1);
    assert!(
        !judged_in_strict_mode(Some(&whole), &partial, &["system:authenticated"]),
        "a whole-node skipped job made partial by a user without the grant passed"
    );
}

/// The size a mark vouches for excuses growth on a batch Job only (Kueue's restore). A
/// user without the grant inflating the mark first (a PyTorchJob's launcher edited to
/// say 64 nodes; a LeaderWorkerSet's replicas, which its mark counts) then growing the
/// job up to it is refused, as growing it straight away is.
#[test]
fn a_mark_inflated_by_an_update_excuses_no_growth() {
    let keys = trainplace_engine::MarkKeys::new(("k1".into(), vec![5; 32]), Vec::new()).unwrap();
    let mallory = ["system:authenticated"];
    let pytorchjob = json!({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": {"name": "bert", "namespace": "research"},
        "spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 2, "template": {
            "metadata": {"annotations": {"trainplace.io/allow-partial-node": "true"}},
            "spec": {"containers": [{"name": "pytorch", "image": "train:1",
                "command": ["torchrun", "--nnodes=2", "train.py"],
                "resources": {"limits": {"nvidia.com/gpu": 1}}}],
                "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"}}}}}}});
    let (a, stored) = through_webhooks(None, &pytorchjob, "alice", &["ml-researchers"], &keys);
    assert!(allowed(&a), "the granted job: {a}");
    let workers = "/spec/pytorchReplicaSpecs/Worker";
    let mut inflated = stored.clone();
    *inflated
        .pointer_mut(&format!("{workers}/template/spec/containers/0/command/1"))
        .unwrap() = json!("--nnodes=64");
    let (_, inflated) = through_webhooks(Some(&stored), &inflated, "mallory", &mallory, &keys);
    let mut grown = inflated.clone();
    *grown
        .pointer_mut(&format!("{workers}/template/spec/containers/0/command/1"))
        .unwrap() = json!("--nnodes=2");
    *grown.pointer_mut(&format!("{workers}/replicas")).unwrap() = json!(63);
    let (a, _) = through_webhooks(Some(&inflated), &grown, "mallory", &mallory, &keys);
    assert!(
        !allowed(&a),
        "a PyTorchJob grew to a mark its launcher inflated: {a}"
    );

    let lws = json!({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
        "metadata": {"name": "serve", "namespace": "research"},
        "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 2, "workerTemplate": {
            "metadata": {"annotations": {"trainplace.io/allow-partial-node": "true"}},
            "spec": {"containers": [{"name": "w", "image": "train:1",
                "command": ["torchrun", "--nnodes=2", "train.py"],
                "resources": {"limits": {"nvidia.com/gpu": 1}}}],
                "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"}}}}}});
    let (a, stored) = through_webhooks(None, &lws, "alice", &["ml-researchers"], &keys);
    assert!(allowed(&a), "the granted LeaderWorkerSet: {a}");
    let mut more = stored.clone();
    more["spec"]["replicas"] = json!(16);
    let (_, more) = through_webhooks(Some(&stored), &more, "mallory", &mallory, &keys);
    let mut larger = more.clone();
    larger["spec"]["leaderWorkerTemplate"]["size"] = json!(16);
    let (a, _) = through_webhooks(Some(&more), &larger, "mallory", &mallory, &keys);
    assert!(
        !allowed(&a),
        "a LeaderWorkerSet's groups grew to its replica count: {a}"
    );
}

/// Strict mode excuses an UPDATE template by template: a job whose Master was admitted
/// on part of a node (granted to its submitter) does not let a user without the grant
/// turn its whole-node Workers into one-GPU ones.
#[test]
fn strict_mode_excuses_no_other_template_than_the_one_admitted_so() {
    let template = |gpus: u32| {
        json!({"metadata": {"annotations": {"trainplace.io/allow-partial-node": "true"}},
            "spec": {"containers": [{"name": "pytorch", "image": "train:1",
                "resources": {"limits": {"nvidia.com/gpu": gpus}}}],
                "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge",
                    "topology.kubernetes.io/zone": "us-east-1a"}}})
    };
    let job = |workers: u32| {
        json!({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": "bert", "namespace": "research"},
            "spec": {"pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": template(1)},
                "Worker": {"replicas": 4, "template": template(workers)}}}})
    };
    let stored = job(8);
    assert!(
        judged_in_strict_mode(None, &stored, &["ml-researchers"]),
        "the granted job"
    );
    let mut labelled = stored.clone();
    labelled["metadata"]["labels"] = json!({"team": "nlp"});
    assert!(
        judged_in_strict_mode(Some(&stored), &labelled, &["system:authenticated"]),
        "an update that changes no template was refused"
    );
    assert!(
        !judged_in_strict_mode(Some(&stored), &job(1), &["system:authenticated"]),
        "whole-node Workers made partial passed on the Master's grant"
    );
}

/// Strict mode: findings of several templates are folded into one ("Master... and
/// Worker..."); an update after which they differ (Kueue admitting the Master to one
/// flavor and the Workers to another) is still judged template by template, and
/// passes. It had been refused: neither new site matched the old folded one.
#[test]
fn strict_mode_matches_templates_through_folded_findings() {
    let template = json!({"metadata": {"annotations": {"trainplace.io/allow-partial-node": "true"}},
        "spec": {"containers": [{"name": "pytorch", "image": "train:1",
            "resources": {"limits": {"nvidia.com/gpu": 1}}}],
            "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge",
                "topology.kubernetes.io/zone": "us-east-1a"}}});
    let stored = json!({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": {"name": "bert", "namespace": "research"},
        "spec": {"runPolicy": {"suspend": true}, "pytorchReplicaSpecs": {
            "Master": {"replicas": 1, "template": template.clone()},
            "Worker": {"replicas": 3, "template": template}}}});
    assert!(
        judged_in_strict_mode(None, &stored, &["ml-researchers"]),
        "the granted job"
    );
    let mut started = stored.clone();
    started["spec"]["runPolicy"]["suspend"] = json!(false);
    started["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["nodeSelector"]["node.kubernetes.io/instance-type"] =
        json!("p5e.48xlarge");
    let kueue = KUEUE_GROUPS;
    assert!(
        judged_in_strict_mode(Some(&stored), &started, &kueue),
        "Kueue's unsuspend on two flavors refused"
    );
}

/// Whether the validating webhook admits `new` (an UPDATE of `old` when there is one)
/// from a member of `groups` in `research`, in strict mode with the partial-node opt-in
/// granted to `ml-researchers` only.
fn judged_in_strict_mode(old: Option<&Value>, new: &Value, groups: &[&str]) -> bool {
    use trainplace_engine::{Requester, judge_change, judge_owned};
    let policy = Policy::from_parts(
        "apiVersion: trainplace.io/v1alpha1
kind: Policy
guarantee: strict
defaults: { instanceType: p5.48xlarge, zone: us-east-1a }
rules: { partialNode: enforce, multiAz: enforce }
optIns:
  allowPartialNode: { namespaces: [research], groups: [ml-researchers] }
  skip: { namespaces: [\"*\"], groups: [ml-platform-admins] }
",
        "test",
        Catalog::embedded(),
    )
    .unwrap();
    let groups: Vec<String> = groups.iter().map(|g| g.to_string()).collect();
    let who = Requester {
        namespace: "research",
        groups: &groups,
        updating: old,
        ..Default::default()
    };
    let mut verdict = judge_owned(new.clone(), &policy, &who).unwrap();
    if let Some(old) = old {
        judge_change(old, &mut verdict, &policy, &who);
    }
    verdict.allowed
}
