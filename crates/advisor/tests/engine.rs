//! The emitted jobs already follow the recommended layout: every pod template, turned
//! into the Pod its operator would create (with the operator's labels), passes the
//! webhook engine with no denial and no patch.

mod common;

use common::{karpenter_recommendation, recommendation};
use serde_json::{Map, Value, json};
use trainplace_advisor::artifacts::objects;
use trainplace_engine::evaluate;
use trainplace_engine::{Policy, Requester};

/// A Pod from a template plus the labels/annotations its operator adds.
fn pod(
    template: &Value,
    name: &str,
    labels: &[(&str, &str)],
    annotations: &[(&str, &str)],
) -> Value {
    let mut meta = template
        .get("metadata")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let l = meta
        .as_object_mut()
        .unwrap()
        .entry("labels")
        .or_insert_with(|| json!({}));
    for (k, v) in labels {
        l[*k] = json!(v);
    }
    let a: Map<String, Value> = annotations
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    meta["annotations"] = Value::Object(a);
    meta["name"] = json!(name);
    meta["namespace"] = json!("default");
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": template["spec"]})
}

fn kubeflow(job: &str, replica: &str) -> Vec<(&'static str, String)> {
    vec![
        ("training.kubeflow.org/job-name", job.to_string()),
        ("training.kubeflow.org/replica-type", replica.to_lowercase()),
        ("training.kubeflow.org/replica-index", "0".into()),
    ]
}

/// Pods (name, object) an operator would create from `job`.
fn pods_of(job: &Value) -> Vec<(String, Value)> {
    let name = job["metadata"]["name"].as_str().unwrap();
    let mk = |t: &Value, labels: Vec<(&'static str, String)>, ann: &[(&str, &str)]| {
        let refs: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
        pod(t, &format!("{name}-0"), &refs, ann)
    };
    match job["kind"].as_str().unwrap() {
        "PyTorchJob" => job["spec"]["pytorchReplicaSpecs"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(r, spec)| {
                (
                    format!("PyTorchJob/{r}"),
                    mk(&spec["template"], kubeflow(name, r), &[]),
                )
            })
            .collect(),
        "MPIJob" => job["spec"]["mpiReplicaSpecs"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(r, spec)| {
                (
                    format!("MPIJob/{r}"),
                    mk(&spec["template"], kubeflow(name, r), &[]),
                )
            })
            .collect(),
        "JobSet" => {
            let rj = &job["spec"]["replicatedJobs"][0];
            let labels = vec![
                ("jobset.sigs.k8s.io/jobset-name", name.to_string()),
                (
                    "jobset.sigs.k8s.io/replicatedjob-name",
                    rj["name"].as_str().unwrap().to_string(),
                ),
                ("batch.kubernetes.io/job-completion-index", "0".into()),
            ];
            let ann = [("batch.kubernetes.io/job-completion-index", "0")];
            vec![(
                "JobSet/node".into(),
                mk(&rj["template"]["spec"]["template"], labels, &ann),
            )]
        }
        "TrainJob" => {
            // The torch-distributed runtime's pod with the TrainJob's trainer fields and
            // runtime patch applied; hostIPC comes from the runtime (see job header).
            let patch = &job["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]
                ["replicatedJobs"][0]["template"]["spec"]["template"];
            let trainer = &job["spec"]["trainer"];
            let mut t = patch.clone();
            t["spec"]["hostIPC"] = json!(true);
            let c = &mut t["spec"]["containers"][0];
            c["image"] = trainer["image"].clone();
            c["command"] = trainer["command"].clone();
            c["resources"] = trainer["resourcesPerNode"].clone();
            let labels = vec![
                ("trainer.kubeflow.org/trainjob-name", name.to_string()),
                ("jobset.sigs.k8s.io/jobset-name", name.to_string()),
                ("batch.kubernetes.io/job-completion-index", "0".into()),
            ];
            let ann = [("batch.kubernetes.io/job-completion-index", "0")];
            vec![("TrainJob/node".into(), mk(&t, labels, &ann))]
        }
        other => panic!("unexpected kind {other}"),
    }
}

#[test]
fn emitted_jobs_need_no_patch() {
    let policy = Policy::embedded();
    let who = Requester {
        namespace: "default",
        ..Default::default()
    };
    let mut checked = 0;
    for scenario in ["h100-blocks", "l40s-on-demand", "a100-odcr", "single-node"] {
        for framework in ["pytorchjob", "jobset", "mpijob", "trainjob"] {
            let eksctl = objects(&recommendation(scenario, framework), &policy);
            let karpenter = objects(&karpenter_recommendation(scenario, framework), &policy);
            let jobs = [&eksctl, &karpenter]
                .into_iter()
                .flat_map(|o| std::iter::once(&o.job).chain(o.nccl_tests.as_ref()));
            for (what, p) in jobs.flat_map(pods_of) {
                let v = evaluate(&p, &policy, &who)
                    .unwrap_or_else(|e| panic!("{scenario} {what}: {e}"));
                assert!(
                    v.allowed,
                    "{scenario}/{framework} {what} denied: {:?}",
                    v.reasons()
                );
                assert!(
                    v.patch.is_empty(),
                    "{scenario}/{framework} {what} would be patched: {:#?}\n{}",
                    v.changes,
                    serde_json::to_string_pretty(&p).unwrap()
                );
                checked += 1;
            }
        }
    }
    assert!(checked >= 40, "checked {checked} pods");
}

/// The check is not vacuous: the same pods, stripped of parts of the layout, are patched.
#[test]
fn engine_would_patch_a_pod_missing_the_layout() {
    let policy = Policy::embedded();
    let who = Requester {
        namespace: "default",
        ..Default::default()
    };
    let o = objects(&recommendation("h100-blocks", "pytorchjob"), &policy);
    let (_, mut p) = pods_of(&o.job).remove(0);
    let spec = p["spec"].as_object_mut().unwrap();
    spec.remove("hostIPC");
    spec.remove("tolerations");
    let v = evaluate(&p, &policy, &who).unwrap();
    let what: Vec<&str> = v.changes.iter().map(|c| c.what.as_str()).collect();
    assert!(what.iter().any(|w| w.contains("hostIPC")), "{what:?}");
    assert!(!v.patch.is_empty());
}

/// The emitted workloads themselves (not only their pods) pass the engine's workload
/// path with no denial and no patch: what the webhook sees at submit time.
#[test]
fn emitted_workloads_need_no_patch() {
    let policy = Policy::embedded();
    let who = Requester {
        namespace: "default",
        ..Default::default()
    };
    let mut checked = 0;
    for scenario in ["h100-blocks", "l40s-on-demand", "a100-odcr", "single-node"] {
        for framework in ["pytorchjob", "jobset", "mpijob", "trainjob"] {
            let o = objects(&recommendation(scenario, framework), &policy);
            for job in std::iter::once(&o.job).chain(o.nccl_tests.as_ref()) {
                let kind = job["kind"].as_str().unwrap();
                let v = evaluate(job, &policy, &who)
                    .unwrap_or_else(|e| panic!("{scenario} {kind}: {e}"));
                assert!(
                    v.allowed,
                    "{scenario}/{framework} {kind} denied: {:?}",
                    v.reasons()
                );
                assert!(
                    v.patch.is_empty(),
                    "{scenario}/{framework} {kind} would be patched: {:#?}",
                    v.changes
                );
                checked += 1;
            }
        }
    }
    assert!(checked >= 16, "checked {checked} workloads");
}

/// Where the cluster gives EFA through the EFA DRA driver, the emitted job claims it
/// with a ResourceClaimTemplate (no `vpc.amazonaws.com/efa`, which those nodes do not
/// advertise), and the engine, reading that template, has nothing to change; nodes of
/// the type without EFA in `--from-cluster` choose the same form.
#[test]
fn efa_through_dra_emits_a_claim_the_engine_counts() {
    let policy = Policy::embedded();
    let (mut req, facts) = common::scenario("h100-blocks");
    req.efa_dra = Some(true);
    req.framework = Some("pytorchjob".into());
    let valid = req.validate(&policy.catalog, common::now()).unwrap();
    let rec = trainplace_advisor::recommend(&valid, &policy.catalog, &facts).unwrap();
    assert!(rec.efa_dra);
    let o = objects(&rec, &policy);
    let claim = o.efa_claim.clone().expect("an EFA ResourceClaimTemplate");
    assert_eq!(
        claim["spec"]["spec"]["devices"]["requests"][0]["exactly"],
        json!({"deviceClassName": "efa.networking.k8s.aws", "allocationMode": "All"})
    );
    let text = o.job.to_string();
    assert!(!text.contains("vpc.amazonaws.com/efa\":"), "{text}");
    let mut claims = trainplace_engine::Claims::default();
    claims.add([&claim], "default");
    let who = Requester {
        namespace: "default",
        claims: Some(&claims),
        ..Default::default()
    };
    let mut checked = 0;
    for job in std::iter::once(&o.job).chain(o.nccl_tests.as_ref()) {
        for (what, p) in pods_of(job) {
            let v = evaluate(&p, &policy, &who).unwrap();
            assert!(
                v.allowed && v.findings.is_empty(),
                "{what}: {:?}",
                v.reasons()
            );
            assert!(
                v.patch.is_empty(),
                "{what} would be patched: {:#?}",
                v.changes
            );
            checked += 1;
        }
    }
    assert!(checked >= 2);
    let files: Vec<String> = trainplace_advisor::artifacts::artifacts(&rec, &policy)
        .into_iter()
        .map(|a| {
            if a.name == "aws-cli.sh" {
                let claim = a.content.find("kubectl apply -f efa-claim-template.yaml");
                let job = a.content.find("kubectl apply -f job-");
                assert!(claim.is_some() && claim < job, "{}", a.content);
                assert!(
                    !a.content.contains("efa-device-plugin-values"),
                    "{}",
                    a.content
                );
                assert!(!a.content.contains("karpenter"), "{}", a.content);
            }
            a.name
        })
        .collect();
    assert!(
        files.contains(&"efa-claim-template.yaml".to_string()),
        "{files:?}"
    );
    assert!(
        !files.contains(&"efa-device-plugin-values.yaml".to_string()),
        "{files:?}"
    );
    // The EFA DRA driver is not supported with Karpenter: no Karpenter route, and asking
    // for it is refused with the reason and the EKS guide's page.
    assert!(!files.iter().any(|f| f.contains("karpenter")), "{files:?}");
    let mut on_karpenter = req.clone();
    on_karpenter.route = Some("karpenter".into());
    let valid = on_karpenter
        .validate(&policy.catalog, common::now())
        .unwrap();
    let refused = trainplace_advisor::recommend(&valid, &policy.catalog, &facts).unwrap_err();
    assert_eq!(refused.field, "route");
    assert!(
        refused.message.contains("EFA DRA driver")
            && refused.message.contains(
                "https://docs.aws.amazon.com/eks/latest/userguide/device-management-efa.html"
            ),
        "{refused}"
    );
    // Unasked, nodes of the chosen type that advertise no EFA choose the DRA form too.
    let mut facts = facts;
    req.efa_dra = None;
    let valid = req.validate(&policy.catalog, common::now()).unwrap();
    let node = |efa| trainplace_advisor::inventory::NodeInfo {
        name: "n1".into(),
        instance_type: Some(rec.instance.name.clone()),
        zone: Some("us-east-1a".into()),
        gpus: 8,
        efa,
        group: None,
        capacity_reservation: None,
    };
    facts.nodes = Some(vec![node(32)]);
    let plugin = trainplace_advisor::recommend(&valid, &policy.catalog, &facts).unwrap();
    assert!(
        !plugin.efa_dra,
        "nodes advertise EFA: the device plugin form"
    );
    facts.nodes = Some(vec![node(0)]);
    let dra = trainplace_advisor::recommend(&valid, &policy.catalog, &facts).unwrap();
    assert!(dra.efa_dra, "nodes advertise no EFA: the DRA form");
    // Without the template the engine cannot count the claim and says so.
    let blind = Requester {
        namespace: "default",
        ..Default::default()
    };
    let (_, p) = pods_of(&o.job).remove(0);
    let v = evaluate(&p, &policy, &blind).unwrap();
    assert!(
        v.findings
            .iter()
            .any(|f| f.rule.as_str() == "device-claims"),
        "{:?}",
        v.findings
    );
}
