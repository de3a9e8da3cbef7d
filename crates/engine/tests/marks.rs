//! Admission marks: a pod is trusted as made from an admitted template only when the
//! mark trainplace wrote on that template verifies against the pod itself. The
//! workload is admitted with the submitter's groups; its pods arrive from the operator's
//! service account, which holds no opt-in grant of its own.

use serde_json::{Value, json};
use trainplace_engine::{Catalog, MarkKeys, Policy, Requester, evaluate, judge_owned};

const POLICY: &str = "apiVersion: trainplace.io/v1alpha1
kind: Policy
optIns:
  allowPartialNode: { namespaces: [\"*\"], groups: [ml-researchers] }
";
const ADMITTED: &str = "trainplace.io/admitted";

fn policy() -> Policy {
    Policy::from_parts(POLICY, "test", Catalog::embedded()).unwrap()
}

fn keys(id: &str, byte: u8) -> MarkKeys {
    MarkKeys::new((id.into(), vec![byte; 32]), Vec::new()).unwrap()
}

/// A PyTorchJob of 4 x 1-GPU workers on p5 that opts in to partial nodes.
fn job() -> Value {
    json!({
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": {"name": "bert", "namespace": "research"},
        "spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 4, "template": {
            "metadata": {"annotations": {"trainplace.io/allow-partial-node": "true"}},
            "spec": {
                "containers": [{"name": "pytorch", "image": "train:1",
                    "resources": {"limits": {"nvidia.com/gpu": 1}}}],
                "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"}
            }}}}}
    })
}

/// Admit the job as a researcher; return the mutated worker template.
fn admit(keys: &MarkKeys) -> Value {
    let groups = ["ml-researchers".to_string()];
    let who = Requester {
        namespace: "research",
        groups: &groups,
        marks: Some(keys),
        ..Default::default()
    };
    let v = evaluate(&job(), &policy(), &who).unwrap();
    assert!(v.allowed, "{:#?}", v.findings);
    let template = v.object["spec"]["pytorchReplicaSpecs"]["Worker"]["template"].clone();
    let mark = template["metadata"]["annotations"][ADMITTED]
        .as_str()
        .unwrap();
    assert!(mark.starts_with("v2.k1.4."), "{mark}");
    // A second pass over the admitted job writes nothing.
    let again = evaluate(&v.object, &policy(), &who).unwrap();
    assert!(again.patch.is_empty(), "{:?}", again.patch);
    template
}

/// The pod the training operator makes from the template: its labels, owner, env and
/// the tolerations admission plugins add.
fn pod_from(template: &Value, owner_kind: &str) -> Value {
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": template["metadata"].clone(), "spec": template["spec"].clone()});
    pod["metadata"]["name"] = json!("bert-worker-2");
    pod["metadata"]["namespace"] = json!("research");
    pod["metadata"]["labels"] = json!({
        "training.kubeflow.org/job-name": "bert",
        "training.kubeflow.org/replica-type": "worker",
        "training.kubeflow.org/replica-index": "2"
    });
    pod["metadata"]["ownerReferences"] = json!([{"apiVersion": "kubeflow.org/v1", "kind": owner_kind,
        "name": "bert", "uid": "6f7c2c1e-1111-4a2b-9c3d-000000000001", "controller": true}]);
    pod["spec"]["containers"][0]["env"] =
        json!([{"name": "WORLD_SIZE", "value": "4"}, {"name": "RANK", "value": "2"}]);
    let tolerations = pod["spec"]["tolerations"].as_array_mut().unwrap();
    tolerations.push(json!({"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}));
    pod["spec"]["dnsPolicy"] = json!("ClusterFirst");
    pod
}

fn judge_pod(pod: &Value, keys: &MarkKeys) -> bool {
    let groups = ["system:serviceaccounts:kubeflow".to_string()];
    let who = Requester {
        namespace: "research",
        groups: &groups,
        marks: Some(keys),
        ..Default::default()
    };
    evaluate(pod, &policy(), &who).unwrap().allowed
}

#[test]
fn the_operators_pod_from_an_admitted_template_is_trusted() {
    let k = keys("k1", 7);
    let pod = pod_from(&admit(&k), "PyTorchJob");
    assert!(
        judge_pod(&pod, &k),
        "a pod of the admitted template was denied"
    );
}

#[test]
fn an_edited_pod_does_not_verify() {
    let k = keys("k1", 7);
    let mut pod = pod_from(&admit(&k), "PyTorchJob");
    pod["spec"]["nodeSelector"]["node.kubernetes.io/instance-type"] = json!("p4d.24xlarge");
    assert!(
        !judge_pod(&pod, &k),
        "a pod edited after admission kept the trust"
    );
}

#[test]
fn a_mark_copied_to_another_controller_or_job_does_not_verify() {
    let k = keys("k1", 7);
    let template = admit(&k);
    // The forged-StatefulSet attack: the same template under a controller trainplace
    // never reviews.
    assert!(!judge_pod(&pod_from(&template, "StatefulSet"), &k));
    // The same mark on a pod of another job.
    let mut other = pod_from(&template, "PyTorchJob");
    other["metadata"]["labels"]["training.kubeflow.org/job-name"] = json!("gpt");
    assert!(!judge_pod(&other, &k));
    // The same mark in another namespace.
    let mut elsewhere = pod_from(&template, "PyTorchJob");
    elsewhere["metadata"]["namespace"] = json!("prod");
    assert!(!judge_pod(&elsewhere, &k));
}

/// Attack: the mark vouches for a 4-pod job; the same template's pods run a launcher
/// that says the job has 16. The mark binds the job's size, so the pod is judged.
#[test]
fn a_pod_whose_launcher_says_a_larger_job_is_judged() {
    let k = keys("k1", 7);
    let template = admit(&k);
    let mut pod = pod_from(&template, "PyTorchJob");
    assert!(judge_pod(&pod, &k));
    pod["spec"]["containers"][0]["command"] = json!(["torchrun", "--nnodes=16", "train.py"]);
    assert!(
        !judge_pod(&pod, &k),
        "a pod of a 16-pod job was trusted under a 4-pod mark"
    );
    // The mark's stated size is part of what it signs: raising it breaks it.
    let mut raised = pod_from(&template, "PyTorchJob");
    let mark = raised["metadata"]["annotations"][ADMITTED]
        .as_str()
        .unwrap()
        .replace(".4.", ".16.");
    raised["metadata"]["annotations"][ADMITTED] = json!(mark);
    raised["spec"]["containers"][0]["command"] = json!(["torchrun", "--nnodes=16", "train.py"]);
    assert!(!judge_pod(&raised, &k), "an edited pod count verified");
}

#[test]
fn invented_and_old_style_marks_do_not_verify() {
    let k = keys("k1", 7);
    let template = admit(&k);
    for forged in [
        "v1.k1.AAAA",
        "v1.k2.AAAA",
        "x",
        "",
        "trainplace admitted this",
    ] {
        let mut pod = pod_from(&template, "PyTorchJob");
        pod["metadata"]["annotations"][ADMITTED] = json!(forged);
        assert!(!judge_pod(&pod, &k), "{forged:?} was trusted");
    }
    // The unsigned mark of earlier releases counts for nothing.
    let mut pod = pod_from(&template, "PyTorchJob");
    pod["metadata"]["annotations"]
        .as_object_mut()
        .unwrap()
        .remove(ADMITTED);
    pod["metadata"]["annotations"]["trainplace.io/mutated"] = json!("hostIPC=true: ...");
    assert!(!judge_pod(&pod, &k));
}

#[test]
fn rotation_accepts_the_previous_key_until_it_is_removed() {
    let old = keys("k1", 7);
    let pod = pod_from(&admit(&old), "PyTorchJob");
    let rotating =
        MarkKeys::new(("k2".into(), vec![9; 32]), vec![("k1".into(), vec![7; 32])]).unwrap();
    assert_eq!(rotating.current_id(), "k2");
    assert!(
        judge_pod(&pod, &rotating),
        "the previous key no longer verifies during rotation"
    );
    assert!(
        !judge_pod(&pod, &keys("k2", 9)),
        "a removed key still verifies"
    );
    // Same id, other secret: does not verify.
    assert!(!judge_pod(&pod, &keys("k1", 8)));
}

#[test]
fn short_keys_are_refused() {
    assert!(MarkKeys::new(("k".into(), vec![1; 16]), Vec::new()).is_none());
    assert!(MarkKeys::new(("a.b".into(), vec![1; 32]), Vec::new()).is_none());
}

/// A Volcano Job of 4 x 1-GPU workers on p5 that opts in to partial nodes, admitted
/// as a researcher; its pod, made by Volcano's controller (service account in
/// volcano-system) under owner kind `Job` with `volcano.sh/job-name`, is trusted.
#[test]
fn a_volcano_pod_from_an_admitted_template_is_trusted() {
    let k = keys("k1", 7);
    let mut job = job();
    let template = job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"].clone();
    job = json!({
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
        "metadata": {"name": "bert", "namespace": "research"},
        "spec": {"minAvailable": 4, "schedulerName": "volcano",
            "tasks": [{"name": "worker", "replicas": 4, "template": template}]}
    });
    let groups = ["ml-researchers".to_string()];
    let who = Requester {
        namespace: "research",
        groups: &groups,
        marks: Some(&k),
        ..Default::default()
    };
    let v = evaluate(&job, &policy(), &who).unwrap();
    assert!(v.allowed, "{:#?}", v.findings);
    let admitted = v.object["spec"]["tasks"][0]["template"].clone();
    assert!(admitted["metadata"]["annotations"][ADMITTED].is_string());
    let mut pod = pod_from(&admitted, "Job");
    pod["metadata"]["labels"] =
        json!({"volcano.sh/job-name": "bert", "volcano.sh/task-spec": "worker"});
    pod["metadata"]["ownerReferences"][0]["apiVersion"] = json!("batch.volcano.sh/v1alpha1");
    let controller = ["system:serviceaccounts:volcano-system".to_string()];
    let as_volcano = Requester {
        namespace: "research",
        groups: &controller,
        marks: Some(&k),
        ..Default::default()
    };
    assert!(
        evaluate(&pod, &policy(), &as_volcano).unwrap().allowed,
        "Volcano's pod of the admitted template was denied"
    );
    // The same pod from a RayCluster owner does not carry this job's trust.
    pod["metadata"]["ownerReferences"][0]["kind"] = json!("RayCluster");
    assert!(!evaluate(&pod, &policy(), &as_volcano).unwrap().allowed);
}

/// Found in the sandbox: the Job controller's pod of an admitted single-pod 1-GPU Job was
/// laid out again by /mutate as a lone pod of an unknown-size job (EFA share, zone hold),
/// which broke its mark, and /validate then denied it as partial-node: the Job never
/// started. A pod whose mark verifies is now left exactly as admitted.
#[test]
fn the_pod_of_an_admitted_single_pod_job_is_left_as_admitted() {
    let keys = keys("k1", 9);
    let job = json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "one", "namespace": "research"},
        "spec": {"template": {"spec": {
            "restartPolicy": "Never",
            "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"},
            "containers": [{"name": "c", "image": "busybox",
                "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}
    });
    let user = ["alice".to_string()];
    let submit = Requester {
        namespace: "research",
        groups: &user,
        marks: Some(&keys),
        ..Default::default()
    };
    let admitted = evaluate(&job, &policy(), &submit).unwrap();
    assert!(admitted.allowed, "{:#?}", admitted.findings);
    let template = &admitted.object["spec"]["template"];
    // The pod as the API server stores it: requests defaulted from limits.
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": template["metadata"].clone(), "spec": template["spec"].clone()});
    pod["metadata"]["namespace"] = json!("research");
    pod["metadata"]["labels"] = json!({"batch.kubernetes.io/job-name": "one", "job-name": "one"});
    pod["metadata"]["ownerReferences"] = json!([{"apiVersion": "batch/v1", "kind": "Job",
        "name": "one", "uid": "6f7c2c1e-1111-4a2b-9c3d-000000000002", "controller": true}]);
    pod["spec"]["containers"][0]["resources"]["requests"] = json!({"nvidia.com/gpu": "1"});
    let controller = ["system:serviceaccounts:kube-system".to_string()];
    let from_controller = Requester {
        namespace: "research",
        groups: &controller,
        marks: Some(&keys),
        ..Default::default()
    };
    let mutated = evaluate(&pod, &policy(), &from_controller).unwrap();
    assert!(mutated.allowed, "{:#?}", mutated.findings);
    assert!(
        mutated.patch.is_empty(),
        "nothing rewritten: {:?}",
        mutated.patch
    );
    assert!(
        mutated.notes.iter().any(|n| n.contains("left as admitted")),
        "{:?}",
        mutated.notes
    );
    // The same pod from a user (no controller group) is judged as a lone pod again.
    let by_user = Requester {
        namespace: "research",
        groups: &user,
        marks: Some(&keys),
        ..Default::default()
    };
    let judged = evaluate(&pod, &policy(), &by_user).unwrap();
    assert!(
        !judged.allowed,
        "a user's copy of the pod is judged: {:#?}",
        judged.findings
    );
}

/// Attack: a decoy. The job's pods already run in two zones; its next pod carries a
/// valid mark from the controller. The mark vouches for the template, not for where
/// the job landed, so the pod is judged, and the split is found.
#[test]
fn a_valid_mark_does_not_hide_a_job_already_in_two_zones() {
    use trainplace_engine::Snapshot;
    let k = keys("k1", 7);
    let pod = pod_from(&admit(&k), "PyTorchJob");
    let node = |name: &str, zone: &str| {
        json!({"metadata": {"name": name, "labels": {
            "topology.kubernetes.io/zone": zone,
            "node.kubernetes.io/instance-type": "p5.48xlarge"}},
            "status": {"allocatable": {"nvidia.com/gpu": "8"}}})
    };
    let bound = |name: &str, node: &str| {
        json!({"metadata": {"name": name, "namespace": "research",
            "labels": {"training.kubeflow.org/job-name": "bert"}},
            "spec": {"nodeName": node}, "status": {"phase": "Running"}})
    };
    let inventory = Snapshot::from_lists(
        &json!({"items": [node("n1", "us-east-1a"), node("n2", "us-east-1b")]}),
        &json!({"items": [bound("bert-worker-0", "n1"), bound("bert-worker-1", "n2")]}),
        &json!({"items": []}),
    );
    let groups = ["system:serviceaccounts:kubeflow".to_string()];
    let who = Requester {
        namespace: "research",
        groups: &groups,
        marks: Some(&k),
        inventory: Some(&inventory),
        ..Default::default()
    };
    let v = evaluate(&pod, &policy(), &who).unwrap();
    assert!(
        !v.allowed,
        "a marked pod of a job split over two zones was trusted"
    );
    assert!(
        v.findings
            .iter()
            .any(|f| f.message().contains("already run in several zones")),
        "{:#?}",
        v.findings
    );
}

/// A controller's own request: the JobSet controller creates the child Jobs of a JobSet
/// admitted with the submitter's partial-node grant. The child Job is judged on its
/// content like any workload (a workload is never left alone on a mark); its template's
/// mark verifies, so the opt-in written there counts as the submitter's, granted when
/// the JobSet was admitted. The same Job from a user is judged with the user's grants,
/// and a child whose template was edited has no mark that vouches for it. The child's
/// pods keep the JobSet's mark (8 pods), so their launcher's size is not "larger".
#[test]
fn a_jobsets_child_job_from_its_controller_is_judged_with_the_grants_its_mark_vouches_for() {
    let k = keys("k1", 7);
    let jobset = json!({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": "llama", "namespace": "research",
            "annotations": {"trainplace.io/allow-partial-node": "true"}},
        "spec": {"replicatedJobs": [{"name": "node", "replicas": 4, "template": {"spec": {
            "parallelism": 2, "completions": 2, "template": {
                "metadata": {"annotations": {"trainplace.io/allow-partial-node": "true"}},
                "spec": {"restartPolicy": "Never",
                    "containers": [{"name": "trainer", "image": "train:1",
                        "resources": {"limits": {"nvidia.com/gpu": 1}}}],
                    "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"}}}}}}]}});
    let groups = ["ml-researchers".to_string()];
    let submit = Requester {
        namespace: "research",
        groups: &groups,
        marks: Some(&k),
        ..Default::default()
    };
    let v = evaluate(&jobset, &policy(), &submit).unwrap();
    assert!(v.allowed, "{:#?}", v.findings);
    let job_spec = v.object["spec"]["replicatedJobs"][0]["template"]["spec"].clone();
    let mut child = json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "llama-node-0", "namespace": "research",
            "labels": {"jobset.sigs.k8s.io/jobset-name": "llama"},
            "ownerReferences": [{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                "name": "llama", "uid": "1", "controller": true}]},
        "spec": job_spec});
    // The JobSet controller labels the pod template with the JobSet's name.
    child["spec"]["template"]["metadata"]["labels"] = json!({"jobset.sigs.k8s.io/jobset-name": "llama", "jobset.sigs.k8s.io/replicatedjob-name": "node"});
    let judge_as = |object: &Value, group: &str| {
        let (allowed, notes, object) = through_webhooks(object, &policy(), &k, "research", group);
        let trusted = notes.iter().any(|n| n.contains("left as admitted"));
        (allowed, trusted, object)
    };
    let (allowed, trusted, stored) = judge_as(&child, "system:serviceaccounts:jobset-system");
    assert!(allowed, "the JobSet controller's child Job was refused");
    assert!(!trusted, "a workload was left alone on its mark");
    let mark = stored["spec"]["template"]["metadata"]["annotations"][ADMITTED]
        .as_str()
        .unwrap();
    assert!(
        mark.starts_with("v2.k1.8."),
        "the JobSet's mark was not kept: {mark}"
    );
    assert!(
        !judge_as(&child, "system:authenticated").0,
        "a user's copy was admitted on the submitter's grant"
    );
    // A trusted controller that renders workloads from a spec trainplace never judged
    // (Katib's Trial, from an Experiment's trial template a tenant wrote) passes on a
    // copied mark: its child keeps no grant.
    let mut rendered = child.clone();
    rendered["metadata"]["ownerReferences"] = json!([{"apiVersion": "kubeflow.org/v1beta1",
        "kind": "Trial", "name": "exp-7x2k9", "uid": "3", "controller": true}]);
    assert!(
        !judge_as(&rendered, "system:serviceaccounts:kubeflow").0,
        "a Trial's copy was admitted on the submitter's grant"
    );
    let mut edited = child.clone();
    edited["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] =
        json!(2);
    assert!(
        !judge_as(&edited, "system:serviceaccounts:jobset-system").0,
        "an edited child Job kept the submitter's grant"
    );
    // The Job controller's pod of the child Job is left as admitted.
    let t = &stored["spec"]["template"];
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": t["metadata"].clone(), "spec": t["spec"].clone()});
    pod["metadata"]["namespace"] = json!("research");
    pod["metadata"]["ownerReferences"] = json!([{"apiVersion": "batch/v1", "kind": "Job",
        "name": "llama-node-0", "uid": "2", "controller": true}]);
    pod["spec"]["containers"][0]["command"] = json!(["torchrun", "--nnodes=8", "train.py"]);
    assert!(judge_pod_as(&pod, &k, "system:serviceaccounts:kube-system"));
}

/// What `/mutate` and then `/validate` answer for `object` sent by a member of `group`
/// in `namespace`: whether both allowed it, `/validate`'s notes, and the object as
/// `/mutate` wrote it.
fn through_webhooks(
    object: &Value,
    policy: &Policy,
    keys: &MarkKeys,
    namespace: &str,
    group: &str,
) -> (bool, Vec<String>, Value) {
    let groups = [group.to_string()];
    let who = Requester {
        namespace,
        groups: &groups,
        marks: Some(keys),
        ..Default::default()
    };
    let mutated = evaluate(object, policy, &who).unwrap();
    let stored = judge_owned(mutated.object.clone(), policy, &who).unwrap();
    (
        mutated.allowed && stored.allowed,
        stored.notes,
        mutated.object,
    )
}

fn judge_pod_as(pod: &Value, keys: &MarkKeys, group: &str) -> bool {
    let groups = [group.to_string()];
    let who = Requester {
        namespace: "research",
        groups: &groups,
        marks: Some(keys),
        ..Default::default()
    };
    let v = evaluate(pod, &policy(), &who).unwrap();
    v.allowed && v.notes.iter().any(|n| n.contains("left as admitted"))
}

/// Marks that fail to verify are counted in the counter the caller gives (kept across
/// key reloads); one that verifies, or an object without a mark, is not counted.
#[test]
fn failed_verifications_are_counted() {
    let counter = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let k = keys("k1", 7).counting_failures_in(counter.clone());
    let template = admit(&k);
    assert!(judge_pod(&pod_from(&template, "PyTorchJob"), &k));
    assert_eq!(k.failures(), 0);
    let mut unmarked = pod_from(&template, "PyTorchJob");
    unmarked["metadata"]["annotations"] = json!({});
    judge_pod(&unmarked, &k);
    assert_eq!(k.failures(), 0);
    // Another replica's key: the same pod does not verify, and is counted.
    let other = keys("k9", 9).counting_failures_in(counter.clone());
    assert!(!judge_pod(&pod_from(&template, "PyTorchJob"), &other));
    assert!(!judge_pod(&pod_from(&template, "StatefulSet"), &k));
    assert_eq!(counter.load(std::sync::atomic::Ordering::Relaxed), 2);
}

/// A LeaderWorkerSet of single-pod groups on part of a node is admitted (each group is
/// its own one-pod job). The leader StatefulSet its controller makes from the signed
/// template is left to its pods, which are judged when created; judged as one job of
/// every pod it makes, it was refused and the LeaderWorkerSet never ran. A tenant's
/// copy of that StatefulSet, or one owned by anything else, is still judged.
#[test]
fn a_leaderworkersets_leader_statefulset_from_its_controller_is_left_to_its_pods() {
    let k = keys("k1", 7);
    let lws = json!({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
        "metadata": {"name": "one", "namespace": "prod"},
        "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 1, "workerTemplate": {
            "metadata": {"labels": {}},
            "spec": {"containers": [{"name": "vllm", "image": "vllm:1",
                "command": ["python3", "-m", "vllm.entrypoints.openai.api_server"],
                "resources": {"limits": {"nvidia.com/gpu": 1}}}],
                "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"}}}}}});
    let judge_as = |object: &Value, group: &str| {
        let (allowed, _, object) = through_webhooks(object, &policy(), &k, "prod", group);
        (allowed, object)
    };
    let (allowed, stored) = judge_as(&lws, "system:authenticated");
    assert!(allowed, "the LeaderWorkerSet was refused");
    let mut template = stored["spec"]["leaderWorkerTemplate"]["workerTemplate"].clone();
    template["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/name"] = json!("one");
    template["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/worker-index"] = json!("0");
    let leaders = json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "one", "namespace": "prod",
            "ownerReferences": [{"apiVersion": "leaderworkerset.x-k8s.io/v1",
                "kind": "LeaderWorkerSet", "name": "one", "uid": "1", "controller": true}]},
        "spec": {"replicas": 2, "serviceName": "one", "template": template}});
    assert!(
        judge_as(&leaders, "system:serviceaccounts:lws-system").0,
        "the LeaderWorkerSet controller's leader StatefulSet was refused"
    );
    assert!(
        !judge_as(&leaders, "system:authenticated").0,
        "a tenant's copy of the leader StatefulSet was admitted"
    );
    // Each group's worker StatefulSet, owned by the group's leader Pod.
    let mut workers = leaders.clone();
    workers["metadata"]["name"] = json!("one-0");
    workers["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "Pod",
        "name": "one-0", "uid": "2", "controller": true}]);
    assert!(
        judge_as(&workers, "system:serviceaccounts:lws-system").0,
        "a group's worker StatefulSet was refused"
    );
    let mut other = leaders.clone();
    other["metadata"]["ownerReferences"][0]["kind"] = json!("Notebook");
    other["metadata"]["ownerReferences"][0]["apiVersion"] = json!("kubeflow.org/v1");
    assert!(
        !judge_as(&other, "system:serviceaccounts:kubeflow").0,
        "another controller's StatefulSet was left alone on a copied mark"
    );
}

/// The MPI Operator's launcher Job carries the launcher template the MPIJob's mark was
/// signed on (for the pods an MPIJob owns): its opt-ins were the submitter's, granted
/// when the MPIJob was admitted. Verified as the child's own kind (`Job`), the mark
/// never matched and the launcher of an admitted job was refused.
#[test]
fn an_mpijobs_launcher_job_keeps_the_grants_its_mark_vouches_for() {
    let k = keys("k1", 7);
    let template = |command: Value| {
        json!({"metadata": {"annotations": {"trainplace.io/allow-partial-node": "true"}},
            "spec": {"containers": [{"name": "mpi", "image": "mpi:1", "command": command,
                "resources": {"limits": {"nvidia.com/gpu": 1}}}],
                "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"}}})
    };
    let mpijob = json!({"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
        "metadata": {"name": "bench", "namespace": "research"},
        "spec": {"runLauncherAsWorker": true, "mpiReplicaSpecs": {
            "Launcher": {"replicas": 1, "template": template(json!(["mpirun", "-np", "4", "python", "t.py"]))},
            "Worker": {"replicas": 3, "template": template(json!(["sleep", "inf"]))}}}});
    let who =
        |groups: &'static [&'static str]| groups.iter().map(|g| g.to_string()).collect::<Vec<_>>();
    let researchers = who(&["ml-researchers"]);
    let submit = Requester {
        namespace: "research",
        groups: &researchers,
        marks: Some(&k),
        ..Default::default()
    };
    let v = evaluate(&mpijob, &policy(), &submit).unwrap();
    assert!(v.allowed, "{:#?}", v.findings);
    let launcher = json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "bench-launcher", "namespace": "research",
            "ownerReferences": [{"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
                "name": "bench", "uid": "1", "controller": true}]},
        "spec": {"template": v.object["spec"]["mpiReplicaSpecs"]["Launcher"]["template"].clone()}});
    // The labels the operator writes on the launcher's pod template.
    let mut launcher = launcher;
    launcher["spec"]["template"]["metadata"]["labels"] = json!({
        "training.kubeflow.org/job-name": "bench", "training.kubeflow.org/job-role": "launcher",
        "training.kubeflow.org/operator-name": "mpi-operator"});
    let operator = who(&["system:serviceaccounts:mpi-operator"]);
    let controller = Requester {
        namespace: "research",
        groups: &operator,
        marks: Some(&k),
        ..Default::default()
    };
    let v = evaluate(&launcher, &policy(), &controller).unwrap();
    assert!(
        v.allowed,
        "the MPI Operator's launcher Job was refused: {:#?}",
        v.findings
    );
    // As the API server runs the webhooks: `/validate` sees what `/mutate` wrote, the
    // template signed again for the launcher Job's own pods.
    let stored = judge_owned(v.object.clone(), &policy(), &controller).unwrap();
    assert!(
        stored.allowed,
        "the launcher Job /mutate signed was refused at /validate: {:#?}",
        stored.findings
    );
}

/// The MPI Operator writes `dnsPolicy: ClusterFirstWithHostNet` on a host-network
/// template it copies into a pod: the same cluster DNS, so the MPIJob's mark still
/// verifies on the worker pods and they keep the grant they were admitted with.
#[test]
fn an_mpijobs_host_network_workers_keep_their_mark() {
    let k = keys("k1", 7);
    let template = json!({"metadata": {"annotations": {"trainplace.io/allow-partial-node": "true"}},
        "spec": {"hostNetwork": true, "containers": [{"name": "mpi", "image": "mpi:1",
            "command": ["sleep", "inf"], "resources": {"limits": {"nvidia.com/gpu": 1}}}],
            "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"}}});
    let mut launcher = template.clone();
    launcher["spec"]["containers"][0]["command"] = json!(["mpirun", "-np", "4", "python", "t.py"]);
    let mpijob = json!({"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
        "metadata": {"name": "bench", "namespace": "research"},
        "spec": {"mpiReplicaSpecs": {"Launcher": {"replicas": 1, "template": launcher},
            "Worker": {"replicas": 4, "template": template}}}});
    let researchers = ["ml-researchers".to_string()];
    let submit = Requester {
        namespace: "research",
        groups: &researchers,
        marks: Some(&k),
        ..Default::default()
    };
    let v = evaluate(&mpijob, &policy(), &submit).unwrap();
    assert!(v.allowed, "{:#?}", v.findings);
    let t = &v.object["spec"]["mpiReplicaSpecs"]["Worker"]["template"];
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": t["metadata"].clone(), "spec": t["spec"].clone()});
    pod["metadata"]["namespace"] = json!("research");
    pod["metadata"]["labels"] = json!({"training.kubeflow.org/job-name": "bench",
        "training.kubeflow.org/job-role": "worker", "training.kubeflow.org/replica-index": "0"});
    pod["metadata"]["ownerReferences"] = json!([{"apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob", "name": "bench", "uid": "1", "controller": true}]);
    pod["spec"]["dnsPolicy"] = json!("ClusterFirstWithHostNet");
    let operator = ["system:serviceaccounts:mpi-operator".to_string()];
    let controller = Requester {
        namespace: "research",
        groups: &operator,
        marks: Some(&k),
        ..Default::default()
    };
    let v = evaluate(&pod, &policy(), &controller).unwrap();
    assert!(
        v.allowed,
        "a host-network worker lost its grant: {:#?}",
        v.findings
    );
}

/// Opt-ins and a skip granted on a JobSet's own metadata reach the Jobs its controller
/// makes: the JobSet controller copies a replicated job's template, not the JobSet's
/// metadata, so `/mutate` writes what was granted on the templates it signs, and the
/// child's mark vouches for it. Before, the JobSet was admitted and its Jobs refused.
#[test]
fn a_jobsets_own_granted_opt_in_and_skip_reach_the_jobs_its_controller_makes() {
    let k = keys("k1", 7);
    let policy = Policy::from_parts(
        "apiVersion: trainplace.io/v1alpha1
kind: Policy
optIns:
  allowPartialNode: { namespaces: [\"*\"], groups: [ml-researchers] }
  skip: { namespaces: [\"*\"], groups: [ml-platform-admins] }
",
        "test",
        Catalog::embedded(),
    )
    .unwrap();
    let jobset = |annotation: &str| {
        json!({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "llama", "namespace": "prod",
                "annotations": {annotation: "true"}},
            "spec": {"replicatedJobs": [{"name": "node", "replicas": 2, "template": {"spec": {
                "parallelism": 2, "completions": 2, "template": {
                    "spec": {"restartPolicy": "Never",
                        "containers": [{"name": "trainer", "image": "train:1",
                            "resources": {"limits": {"nvidia.com/gpu": 1}}}],
                        "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"}}}}}}]}})
    };
    let judge_as = |object: &Value, group: &str| {
        let (allowed, _, object) = through_webhooks(object, &policy, &k, "prod", group);
        (allowed, object)
    };
    for (annotation, group) in [
        ("trainplace.io/allow-partial-node", "ml-researchers"),
        ("trainplace.io/skip", "ml-platform-admins"),
    ] {
        let (allowed, stored) = judge_as(&jobset(annotation), group);
        assert!(allowed, "{annotation}: the JobSet was refused");
        let mut child = json!({"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "llama-node-0", "namespace": "prod",
                "labels": {"jobset.sigs.k8s.io/jobset-name": "llama"},
                "ownerReferences": [{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                    "name": "llama", "uid": "1", "controller": true}]},
            "spec": stored["spec"]["replicatedJobs"][0]["template"]["spec"].clone()});
        child["spec"]["template"]["metadata"]["labels"] = json!({
            "jobset.sigs.k8s.io/jobset-name": "llama", "jobset.sigs.k8s.io/replicatedjob-name": "node"});
        assert!(
            judge_as(&child, "system:serviceaccounts:jobset-system").0,
            "{annotation}: the JobSet controller's Job was refused"
        );
        assert!(
            !judge_as(&child, "system:authenticated").0,
            "{annotation}: a user's copy of the Job was admitted"
        );
    }
}

/// A JobSet placed with `alpha.jobset.sigs.k8s.io/exclusive-topology` (each Job in a
/// network node of its own): JobSet's pod webhook gives each Job's leader a required
/// pod affinity and anti-affinity on the key and each follower a node selector for the
/// leader's domain. Those are the placement the submitter asked for, so the pods keep
/// the mark of the template they were made from (and the grant it vouches for); they
/// had been judged on their own and refused. Any other edit still breaks the mark.
#[test]
fn a_jobsets_pods_placed_in_their_exclusive_domain_keep_their_mark() {
    let k = keys("k1", 7);
    let key = "topology.k8s.aws/network-node-layer-3";
    let jobset = json!({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": "llama", "namespace": "research",
            "annotations": {"alpha.jobset.sigs.k8s.io/exclusive-topology": key}},
        "spec": {"replicatedJobs": [{"name": "node", "replicas": 2, "template": {"spec": {
            "parallelism": 2, "completions": 2, "completionMode": "Indexed", "template": {
                "metadata": {"annotations": {"trainplace.io/allow-partial-node": "true"}},
                "spec": {"restartPolicy": "Never",
                    "containers": [{"name": "trainer", "image": "train:1",
                        "command": ["python", "train.py"], "env": [{"name": "LR", "value": "3e-4"}],
                        "resources": {"limits": {"nvidia.com/gpu": 1}}}],
                    "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"}}}}}}]}});
    let (allowed, _, stored) =
        through_webhooks(&jobset, &policy(), &k, "research", "ml-researchers");
    assert!(allowed, "the granted JobSet was refused");
    let t = &stored["spec"]["replicatedJobs"][0]["template"]["spec"]["template"];
    let pod = |index: u32| {
        let mut pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": t["metadata"].clone(), "spec": t["spec"].clone()});
        pod["metadata"]["name"] = json!(format!("llama-node-0-{index}"));
        pod["metadata"]["namespace"] = json!("research");
        pod["metadata"]["labels"] = json!({"jobset.sigs.k8s.io/jobset-name": "llama",
            "jobset.sigs.k8s.io/job-key": "a1b2c3",
            "batch.kubernetes.io/job-completion-index": index.to_string()});
        pod["metadata"]["annotations"]["alpha.jobset.sigs.k8s.io/exclusive-topology"] = json!(key);
        pod["metadata"]["ownerReferences"] = json!([{"apiVersion": "batch/v1", "kind": "Job",
            "name": "llama-node-0", "uid": "2", "controller": true}]);
        pod
    };
    let term = |selector: Value| {
        json!({"labelSelector": {"matchExpressions": selector},
        "topologyKey": key, "namespaceSelector": {}})
    };
    let mut leader = pod(0);
    let affinity = &mut leader["spec"]["affinity"];
    affinity["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        .as_array_mut()
        .unwrap()
        .push(term(
            json!([{"key": "jobset.sigs.k8s.io/job-key", "operator": "In", "values": ["a1b2c3"]}]),
        ));
    affinity["podAntiAffinity"] = json!({"requiredDuringSchedulingIgnoredDuringExecution": [
        term(json!([{"key": "jobset.sigs.k8s.io/job-key", "operator": "Exists"},
            {"key": "jobset.sigs.k8s.io/job-key", "operator": "NotIn", "values": ["a1b2c3"]}]))]});
    let job_controller = "system:serviceaccounts:kube-system";
    assert!(
        judge_pod_as(&leader, &k, job_controller),
        "the leader JobSet placed was judged on its own"
    );
    let mut follower = pod(1);
    follower["spec"]["nodeSelector"][key] = json!("nn-3f9a");
    assert!(
        judge_pod_as(&follower, &k, job_controller),
        "a follower JobSet placed was judged on its own"
    );
    let mut elsewhere = follower.clone();
    elsewhere["spec"]["nodeSelector"]["node.kubernetes.io/instance-type"] = json!("p4d.24xlarge");
    assert!(
        !judge_pod_as(&elsewhere, &k, job_controller),
        "a pod edited past JobSet's placement kept its mark"
    );
}

/// A LeaderWorkerSet asks for exclusive placement per group: LWS's own pod webhook gives
/// each group's leader a required pod affinity and anti-affinity on the key, selecting
/// by the group's key. That is the placement the submitter asked for, so the leader
/// keeps the mark of the template it was made from (it had been judged on its own and
/// refused, and the group never started). Any other edit still breaks the mark.
#[test]
fn a_leaderworkersets_leader_placed_in_its_exclusive_domain_keeps_its_mark() {
    let k = keys("k1", 7);
    let key = "topology.k8s.aws/network-node-layer-3";
    let lws = json!({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
        "metadata": {"name": "one", "namespace": "research",
            "annotations": {"leaderworkerset.sigs.k8s.io/exclusive-topology": key}},
        "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 2, "workerTemplate": {
            "metadata": {"annotations": {"trainplace.io/allow-partial-node": "true"}},
            "spec": {"containers": [{"name": "trainer", "image": "train:1",
                "resources": {"limits": {"nvidia.com/gpu": 1}}}],
                "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"}}}}}});
    let (allowed, _, stored) = through_webhooks(&lws, &policy(), &k, "research", "ml-researchers");
    assert!(allowed, "the granted LeaderWorkerSet was refused");
    let t = &stored["spec"]["leaderWorkerTemplate"]["workerTemplate"];
    let mut leader = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": t["metadata"].clone(), "spec": t["spec"].clone()});
    leader["metadata"]["name"] = json!("one-0");
    leader["metadata"]["namespace"] = json!("research");
    let group_key = "5f1d0b6e2c";
    leader["metadata"]["labels"] = json!({"leaderworkerset.sigs.k8s.io/name": "one",
        "leaderworkerset.sigs.k8s.io/group-index": "0",
        "leaderworkerset.sigs.k8s.io/group-key": group_key,
        "leaderworkerset.sigs.k8s.io/worker-index": "0",
        "apps.kubernetes.io/pod-index": "0"});
    leader["metadata"]["annotations"]["leaderworkerset.sigs.k8s.io/exclusive-topology"] =
        json!(key);
    leader["metadata"]["annotations"]["leaderworkerset.sigs.k8s.io/size"] = json!("2");
    leader["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1",
        "kind": "StatefulSet", "name": "one", "uid": "3", "controller": true}]);
    let controller = "system:serviceaccounts:kube-system";
    assert!(
        judge_pod_as(&leader, &k, controller),
        "the leader as its template made it"
    );
    let term = |selector: Value| json!({"labelSelector": {"matchExpressions": selector}, "topologyKey": key});
    let mut placed = leader.clone();
    // Appended to what the template holds, as LWS's webhook does.
    let mut append = |kind: &str, t: Value| {
        let required =
            &mut placed["spec"]["affinity"][kind]["requiredDuringSchedulingIgnoredDuringExecution"];
        if required.is_null() {
            *required = json!([]);
        }
        required.as_array_mut().unwrap().push(t);
    };
    append(
        "podAffinity",
        term(
            json!([{"key": "leaderworkerset.sigs.k8s.io/group-key", "operator": "In", "values": [group_key]}]),
        ),
    );
    append(
        "podAntiAffinity",
        term(
            json!([{"key": "leaderworkerset.sigs.k8s.io/group-key", "operator": "Exists"},
            {"key": "leaderworkerset.sigs.k8s.io/group-key", "operator": "NotIn", "values": [group_key]}]),
        ),
    );
    assert!(
        judge_pod_as(&placed, &k, controller),
        "the leader LWS placed was judged on its own"
    );
    let mut elsewhere = placed.clone();
    elsewhere["spec"]["nodeSelector"]["node.kubernetes.io/instance-type"] = json!("p4d.24xlarge");
    assert!(
        !judge_pod_as(&elsewhere, &k, controller),
        "a pod edited past LWS's placement kept its mark"
    );
}

/// A RayJob's RayCluster, made by KubeRay (a trusted controller here) under a generated
/// name with the RayJob's annotations and cluster spec, keeps the grants the RayJob was
/// admitted with: its templates' marks were signed for a RayCluster's pods under the
/// label every Ray pod carries. The RayCluster's pods then verify as usual. It had been
/// judged with KubeRay's groups and refused, and the RayJob never started. A tenant's
/// copy of that RayCluster is still judged with the tenant's grants.
#[test]
fn a_rayjobs_raycluster_from_kuberay_keeps_the_grants_the_rayjob_was_admitted_with() {
    let k = keys("k1", 7);
    let policy = kuberay_trusted();
    let group = |gpus: u32| {
        json!({"groupName": "gpu", "replicas": 4, "minReplicas": 4, "maxReplicas": 4,
        "rayStartParams": {}, "template": {"spec": {"containers": [{"name": "ray-worker", "image": "rayproject/ray:2.40.0-gpu",
            "resources": {"limits": {"nvidia.com/gpu": gpus}}}],
            "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"}}}})
    };
    let rayjob = json!({"apiVersion": "ray.io/v1", "kind": "RayJob",
        "metadata": {"name": "tune", "namespace": "research",
            "annotations": {"trainplace.io/allow-partial-node": "true"}},
        "spec": {"entrypoint": "python train.py", "rayClusterSpec": {
            "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
                {"name": "ray-head", "image": "rayproject/ray:2.40.0"}]}}},
            "workerGroupSpecs": [group(4)]}}});
    let (allowed, _, stored) = through_webhooks(&rayjob, &policy, &k, "research", "ml-researchers");
    assert!(allowed, "the granted RayJob was refused");
    let cluster = kuberay_cluster_of(&stored);
    let (allowed, _, made) = through_webhooks(
        &cluster,
        &policy,
        &k,
        "research",
        "system:serviceaccounts:ray-system",
    );
    assert!(
        allowed,
        "KubeRay's RayCluster of the granted RayJob was refused"
    );
    assert!(
        !through_webhooks(&cluster, &policy, &k, "research", "system:authenticated").0,
        "a tenant's copy of the RayCluster was admitted on the submitter's grant"
    );
    let mut edited = cluster.clone();
    edited["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["resources"]["limits"]
        ["nvidia.com/gpu"] = json!(2);
    assert!(
        !through_webhooks(
            &edited,
            &policy,
            &k,
            "research",
            "system:serviceaccounts:ray-system"
        )
        .0,
        "an edited RayCluster kept the submitter's grant"
    );
    // An UPDATE growing that RayCluster (even KubeRay's) is judged for what it
    // changes: the mark `/mutate` signs on an UPDATE vouches for nothing.
    let mut grown = made.clone();
    for key in ["replicas", "minReplicas", "maxReplicas"] {
        grown["spec"]["workerGroupSpecs"][0][key] = json!(16);
    }
    let groups = ["system:serviceaccounts:ray-system".to_string()];
    let who = Requester {
        namespace: "research",
        groups: &groups,
        marks: Some(&k),
        updating: Some(&made),
        ..Default::default()
    };
    let signed = evaluate(&grown, &policy, &who).unwrap().object;
    let mut v = judge_owned(signed, &policy, &who).unwrap();
    trainplace_engine::judge_change(&made, &mut v, &policy, &who);
    assert!(!v.allowed, "a RayCluster grown on an UPDATE kept the grant");
    // KubeRay's worker pod of that RayCluster is left as admitted.
    let t = &made["spec"]["workerGroupSpecs"][0]["template"];
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": t["metadata"].clone(), "spec": t["spec"].clone()});
    pod["metadata"]["name"] = json!("tune-x7k2p-gpu-worker-abcde");
    pod["metadata"]["namespace"] = json!("research");
    pod["metadata"]["labels"]["ray.io/cluster"] = json!("tune-x7k2p");
    pod["metadata"]["labels"]["ray.io/is-ray-node"] = json!("yes");
    pod["metadata"]["ownerReferences"] = json!([{"apiVersion": "ray.io/v1", "kind": "RayCluster",
        "name": "tune-x7k2p", "uid": "2", "controller": true}]);
    let groups = ["system:serviceaccounts:ray-system".to_string()];
    let who = Requester {
        namespace: "research",
        groups: &groups,
        marks: Some(&k),
        ..Default::default()
    };
    let v = evaluate(&pod, &policy, &who).unwrap();
    assert!(
        v.allowed && v.notes.iter().any(|n| n.contains("left as admitted")),
        "the RayCluster's pod was judged on its own: {:#?}",
        v.findings
    );
}

/// A SidecarMode RayJob: KubeRay runs the submitter as a container it adds to the head
/// template of the RayCluster it makes. The head's mark still vouches for the head (its
/// GPUs on part of a node, granted to the submitter); it had stopped verifying and the
/// RayCluster was refused. Another container added is not KubeRay's submitter.
#[test]
fn a_sidecar_mode_rayjobs_head_keeps_its_mark_beside_the_submitter() {
    let k = keys("k1", 7);
    let policy = kuberay_trusted();
    let gpus = |n: u32| json!({"limits": {"nvidia.com/gpu": n}});
    let rayjob = json!({"apiVersion": "ray.io/v1", "kind": "RayJob",
        "metadata": {"name": "tune", "namespace": "research",
            "annotations": {"trainplace.io/allow-partial-node": "true"}},
        "spec": {"entrypoint": "python train.py", "submissionMode": "SidecarMode", "rayClusterSpec": {
            "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
                {"name": "ray-head", "image": "rayproject/ray:2.40.0-gpu", "resources": gpus(4)}],
                "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"}}}},
            "workerGroupSpecs": [{"groupName": "gpu", "replicas": 2, "minReplicas": 2, "maxReplicas": 2,
                "rayStartParams": {}, "template": {"spec": {"containers": [{"name": "ray-worker",
                    "image": "rayproject/ray:2.40.0-gpu", "resources": gpus(4)}],
                    "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"}}}}]}}});
    let (allowed, _, stored) = through_webhooks(&rayjob, &policy, &k, "research", "ml-researchers");
    assert!(allowed, "the granted RayJob was refused");
    let cluster = |sidecar: &str| {
        let mut spec = stored["spec"]["rayClusterSpec"].clone();
        spec["headGroupSpec"]["template"]["spec"]["containers"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": sidecar, "image": "rayproject/ray:2.40.0",
                "command": ["ray", "job", "submit", "--", "python", "train.py"]}));
        spec["headGroupSpec"]["template"]["spec"]["restartPolicy"] = json!("Never");
        json!({"apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": "tune-x7k2p", "namespace": "research",
                "annotations": stored["metadata"]["annotations"].clone(),
                "ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "tune",
                    "uid": "1", "controller": true}]},
            "spec": spec})
    };
    let kuberay = "system:serviceaccounts:ray-system";
    assert!(
        through_webhooks(
            &cluster("ray-job-submitter"),
            &policy,
            &k,
            "research",
            kuberay
        )
        .0,
        "KubeRay's SidecarMode RayCluster was refused"
    );
    assert!(
        !through_webhooks(&cluster("miner"), &policy, &k, "research", kuberay).0,
        "a head with another container added kept the submitter's grant"
    );
}

/// A RayJob a granted skip leaves alone, with a CPU-only head: KubeRay's RayCluster
/// carries the skip and the mark on its GPU worker template only (a template that asks
/// for no devices is signed for nothing). It is left alone as its parent was; it had
/// been judged with KubeRay's groups and refused. A tenant's copy is still judged.
#[test]
fn a_skipped_rayjobs_raycluster_with_a_cpu_head_is_left_alone() {
    let k = keys("k1", 7);
    let text = format!(
        "{POLICY}  skip: {{ namespaces: [\"*\"], groups: [ml-platform-admins] }}\ntrustedControllerGroups: [\"system:serviceaccounts:kube-system\", \"system:serviceaccounts:ray-system\"]\n"
    );
    let policy = Policy::from_parts(&text, "test", Catalog::embedded()).unwrap();
    let rayjob = json!({"apiVersion": "ray.io/v1", "kind": "RayJob",
        "metadata": {"name": "tune", "namespace": "research",
            "annotations": {"trainplace.io/skip": "true"}},
        "spec": {"entrypoint": "python train.py", "rayClusterSpec": {
            "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
                {"name": "ray-head", "image": "rayproject/ray:2.40.0"}]}}},
            "workerGroupSpecs": [{"groupName": "gpu", "replicas": 4, "minReplicas": 4,
                "maxReplicas": 4, "rayStartParams": {}, "template": {"spec": {"containers": [
                    {"name": "ray-worker", "image": "rayproject/ray:2.40.0-gpu",
                    "resources": {"limits": {"nvidia.com/gpu": 1}}}],
                    "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"}}}}]}}});
    let (allowed, _, stored) =
        through_webhooks(&rayjob, &policy, &k, "research", "ml-platform-admins");
    assert!(allowed, "the granted skip was refused");
    let cluster = kuberay_cluster_of(&stored);
    let (allowed, notes, _) = through_webhooks(
        &cluster,
        &policy,
        &k,
        "research",
        "system:serviceaccounts:ray-system",
    );
    assert!(
        allowed,
        "KubeRay's RayCluster of the skipped RayJob was refused"
    );
    assert!(
        notes
            .iter()
            .any(|n| n.contains("granted to the submitter of its parent")),
        "{notes:?}"
    );
    assert!(
        !through_webhooks(&cluster, &policy, &k, "research", "system:authenticated").0,
        "a tenant's copy of the RayCluster was left alone"
    );
}

/// The test policy with KubeRay's group (`ray-system`) trusted beside kube-system's.
/// The RayCluster KubeRay makes for the stored RayJob `tune`: a generated name, the
/// RayJob's annotations and cluster spec, the RayJob as its controller.
fn kuberay_cluster_of(stored: &Value) -> Value {
    json!({"apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": "tune-x7k2p", "namespace": "research",
            "labels": {"ray.io/originated-from-crd": "RayJob", "ray.io/originated-from-cr-name": "tune"},
            "annotations": stored["metadata"]["annotations"].clone(),
            "ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "tune",
                "uid": "1", "controller": true}]},
        "spec": stored["spec"]["rayClusterSpec"].clone()})
}

fn kuberay_trusted() -> Policy {
    let text = format!(
        "{POLICY}trustedControllerGroups: [\"system:serviceaccounts:kube-system\", \"system:serviceaccounts:ray-system\"]\n"
    );
    Policy::from_parts(&text, "test", Catalog::embedded()).unwrap()
}
