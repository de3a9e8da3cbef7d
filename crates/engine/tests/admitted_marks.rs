//! A mark means "this content, of this job size, was judged and admitted" (issue 39,
//! class 1). `/mutate` signs only what the verdict admits, and a workload's own CREATE
//! is judged on its content whoever asks: a trusted controller's Job (a CronJob's, a
//! pipeline step's) is not left alone because its template carries a mark. Each test
//! runs under the embedded default policy and examples/policy-restricted.yaml.

use serde_json::{Value, json};
use trainplace_engine::{Catalog, MarkKeys, Policy, Requester, evaluate, judge_owned};

const ADMITTED: &str = "trainplace.io/admitted";
/// The Job and CronJob controllers' service accounts (kube-system): trusted.
const KUBE_SYSTEM: &str = "system:serviceaccounts:kube-system";

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

fn as_group<'a>(group: &'a [String], keys: &'a MarkKeys) -> Requester<'a> {
    Requester {
        namespace: "prod",
        groups: group,
        marks: Some(keys),
        ..Default::default()
    }
}

/// A Job of `parallelism` pods x 1 GPU on p5, as the CronJob controller makes it from
/// its jobTemplate (owned by the CronJob, its template labelled with the job's name).
fn cron_job_child(parallelism: u32) -> Value {
    json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "nightly-29000000", "namespace": "prod",
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "CronJob", "name": "nightly",
                "uid": "0b0e6d2c-0000-4000-8000-000000000001", "controller": true}]},
        "spec": {"parallelism": parallelism, "template": {
            "metadata": {"labels": {"batch.kubernetes.io/job-name": "nightly"}},
            "spec": {"restartPolicy": "Never",
                "containers": [{"name": "trainer", "image": "train:1",
                    "command": ["torchrun", "train.py"],
                    "resources": {"limits": {"nvidia.com/gpu": 1}}}],
                "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"}}}}
    })
}

/// The pod the Job controller makes from a (mutated) Job's template.
fn pod_of(job: &Value) -> Value {
    let t = &job["spec"]["template"];
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": t["metadata"].clone(), "spec": t["spec"].clone()});
    pod["metadata"]["name"] = json!("nightly-29000000-abcde");
    pod["metadata"]["namespace"] = json!("prod");
    pod["metadata"]["labels"]["job-name"] = json!("nightly");
    pod["metadata"]["ownerReferences"] = json!([{"apiVersion": "batch/v1", "kind": "Job",
        "name": job["metadata"]["name"], "uid": "0b0e6d2c-0000-4000-8000-000000000002",
        "controller": true}]);
    pod
}

/// `/mutate` then `/validate`, as the API server runs them: whether the object is
/// admitted, and the object as stored.
fn admit(object: &Value, policy: &Policy, who: &Requester<'_>) -> (bool, Value) {
    let mutated = evaluate(object, policy, who).unwrap();
    let stored = mutated.object;
    let validated = judge_owned(stored.clone(), policy, who).unwrap();
    (validated.allowed, stored)
}

/// Attack: a refused workload is signed anyway. `/mutate` wrote a verifying mark on the
/// template of a Job it judged partial-node, so whatever later carried that template
/// (its pods, a copy created by a controller) showed proof of an admission that never
/// happened.
#[test]
fn a_refused_template_is_not_signed() {
    let k = keys();
    let user = ["alice".to_string()];
    for (name, policy) in policies() {
        let v = evaluate(&cron_job_child(4), &policy, &as_group(&user, &k)).unwrap();
        assert!(!v.allowed, "{name}: 4 x 1 GPU on p5 admitted");
        let mark = &v.object["spec"]["template"]["metadata"]["annotations"][ADMITTED];
        assert!(
            mark.is_null(),
            "{name}: a refused template was signed: {mark}"
        );
        // The same template admitted (one pod of one GPU) is signed.
        let ok = evaluate(&cron_job_child(1), &policy, &as_group(&user, &k)).unwrap();
        assert!(ok.allowed, "{name}: {:#?}", ok.findings);
        assert!(
            ok.object["spec"]["template"]["metadata"]["annotations"][ADMITTED].is_string(),
            "{name}: an admitted template was not signed"
        );
    }
}

/// Attack: a CronJob whose Jobs run 4 pods x 1 GPU on p5. The CronJob controller (a
/// trusted group) creates the Job; `/mutate` signed its template and `/validate` then
/// left the Job alone on that mark, and the Job controller's pods on theirs: nothing was
/// ever judged. The same Job created by a person is refused; so is the controller's.
#[test]
fn a_controllers_job_is_judged_on_its_content() {
    let k = keys();
    let controller = [KUBE_SYSTEM.to_string()];
    let user = ["alice".to_string()];
    for (name, policy) in policies() {
        let (by_user, _) = admit(&cron_job_child(4), &policy, &as_group(&user, &k));
        assert!(!by_user, "{name}: a person's 4 x 1-GPU Job admitted");
        let who = as_group(&controller, &k);
        let (by_controller, stored) = admit(&cron_job_child(4), &policy, &who);
        assert!(
            !by_controller,
            "{name}: the CronJob controller's Job admitted"
        );
        // Had it been stored, its pods would carry no mark and be judged too.
        let pod = evaluate(&pod_of(&stored), &policy, &who).unwrap();
        assert!(
            !pod.notes.iter().any(|n| n.contains("left as admitted")),
            "{name}: {:?}",
            pod.notes
        );
        assert!(!pod.allowed, "{name}: the Job controller's pod admitted");
        // The routine case still runs: a one-pod Job, and its pod left as admitted.
        let (one, stored) = admit(&cron_job_child(1), &policy, &who);
        assert!(one, "{name}: the controller's 1-pod Job refused");
        let pod = evaluate(&pod_of(&stored), &policy, &who).unwrap();
        assert!(pod.allowed, "{name}: {:#?}", pod.findings);
        assert!(
            pod.notes.iter().any(|n| n.contains("left as admitted")),
            "{name}: {:?}",
            pod.notes
        );
    }
}

/// Attack: replay a mark into a larger workload. A 1-pod Job is admitted and signed
/// (a job of 1 pod); a trusted controller then creates a Job of parallelism 4 from the
/// same template, mark and all. The mark verified for the template's content and the
/// workload was left alone; it is now judged as the 4-pod Job it is.
#[test]
fn a_mark_from_a_smaller_job_does_not_admit_a_larger_workload() {
    let k = keys();
    let controller = [KUBE_SYSTEM.to_string()];
    for (name, policy) in policies() {
        let who = as_group(&controller, &k);
        let (admitted, small) = admit(&cron_job_child(1), &policy, &who);
        assert!(admitted, "{name}");
        let mut large = small.clone();
        large["spec"]["parallelism"] = json!(4);
        let (allowed, _) = admit(&large, &policy, &who);
        assert!(!allowed, "{name}: the 1-pod mark admitted a 4-pod Job");
    }
}
