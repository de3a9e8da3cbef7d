//! Strict mode (`examples/policy-strict.yaml`) through the sandbox's real API server,
//! Job and CronJob controllers, garbage collector and scheduler: first with trainplace
//! registered as webhook, then with its webhook configurations deleted and strict mode's
//! exported ValidatingAdmissionPolicies alone; last, the restricted example's precise
//! policies alone, replaying controllers' updates. One test, in phases, because the
//! second phase takes the webhooks away from the whole control plane.

use crate::sandbox;

use std::path::{Path, PathBuf};
use std::time::Duration;

use sandbox::{Sandbox, corpus, stderr, stdout, wait_until};
use serde_json::{Value, json};
use trainplace_engine::vap::{self, Check};
use trainplace_engine::{Catalog, Mode, Policy, Requester, judge_owned};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn policy_dir() -> PathBuf {
    let dir = repo().join("target/sandbox-tests/cluster_strict-policy");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(
        repo().join("examples/policy-strict.yaml"),
        dir.join("policy.yaml"),
    )
    .unwrap();
    dir
}

fn strict() -> Policy {
    let text = std::fs::read_to_string(repo().join("examples/policy-strict.yaml")).unwrap();
    Policy::from_parts(&text, "examples/policy-strict.yaml", Catalog::embedded()).unwrap()
}

/// The groups kubectl impersonates for a fixture (the admin's own when it names none).
fn as_groups(groups: &[String]) -> Vec<String> {
    let mut args = vec!["--as=fixture-user".to_string()];
    for g in groups {
        args.push(format!("--as-group={g}"));
    }
    args
}

fn job(ns: &str, name: &str, gpus: u32, pods: u32, annotations: Value) -> Value {
    json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": ns, "annotations": annotations.clone()},
        "spec": {
            "parallelism": pods, "completions": pods, "completionMode": "Indexed",
            "template": {
                "metadata": {"annotations": annotations},
                "spec": {
                    "restartPolicy": "Never",
                    "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"},
                    "tolerations": [{"operator": "Exists"}],
                    "containers": [{"name": "trainer", "image": "registry.example/trainer:1",
                        "resources": {"limits": {"nvidia.com/gpu": gpus}}}]
                }
            }
        }
    })
}

/// `kubectl patch JOB` in `ns` as the service account `sa` of namespace `sa_ns` would
/// (system:masters for RBAC only: no grant of the policies names it); what the API
/// server answered.
fn controller_patch(
    sb: &Sandbox,
    sa_ns: &str,
    ns: &str,
    what: &str,
    kind: &str,
    patch: &str,
) -> std::process::Output {
    let who = as_groups(&[
        "system:masters".into(),
        "system:serviceaccounts".into(),
        format!("system:serviceaccounts:{sa_ns}"),
    ]);
    let mut args: Vec<&str> = who.iter().map(String::as_str).collect();
    args.extend(["-n", ns, "patch", "job", what, kind, "-p", patch]);
    sb.kubectl(&args)
}

/// Kueue unsuspends Job `job` and the garbage collector removes its finalizers: both
/// must pass.
fn replay_controllers(sb: &Sandbox, ns: &str, job: &str) {
    let out = controller_patch(sb, "kueue-system", ns, job, "--type=merge", UNSUSPEND);
    assert!(out.status.success(), "Kueue's unsuspend: {}", stderr(&out));
    let out = controller_patch(sb, "kube-system", ns, job, "--type=json", NO_FINALIZERS);
    assert!(
        out.status.success(),
        "the finalizer's removal: {}",
        stderr(&out)
    );
}

const UNSUSPEND: &str = r#"{"spec":{"suspend":false}}"#;
const NO_FINALIZERS: &str = r#"[{"op":"remove","path":"/metadata/finalizers"}]"#;

/// Replace the trainplace policies installed (if any) with those `trainplace policy
/// export` writes for the policy in `dir`, less the checks in `leave_out`, and wait until
/// a 4 x 1-GPU Job in `ns` is refused by them.
fn apply_exported(sb: &Sandbox, ns: &str, dir: &Path, leave_out: &[Check], what: &str) {
    let exported = std::process::Command::new(env!("CARGO_BIN_EXE_trainplace"))
        .args([
            "policy",
            "export",
            "--format",
            "vap",
            "-o",
            "json",
            "--policy-dir",
        ])
        .arg(dir)
        .output()
        .unwrap();
    assert!(exported.status.success(), "{}", stderr(&exported));
    let objects: Value = serde_json::from_slice(&exported.stdout).unwrap();
    let kept = vap::without(objects["items"].as_array().unwrap(), leave_out);
    sb.ok(&[
        "delete",
        "validatingadmissionpolicies,validatingadmissionpolicybindings",
        "-l",
        "app.kubernetes.io/name=trainplace",
    ]);
    let list = json!({"apiVersion": "v1", "kind": "List", "items": kept});
    let out = sb.kubectl_stdin(&["apply", "-f", "-"], Some(&list.to_string()));
    assert!(out.status.success(), "{}", stderr(&out));
    let probe = job(ns, "probe", 1, 4, json!({}));
    let mut last = Ok(String::new());
    let waited = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        wait_until(Duration::from_secs(60), &format!("{what} in force"), || {
            last = corpus::dry_run(sb, &probe);
            // Both rules refuse the probe (1 GPU of a p5, no zone); the API server
            // answers with the first policy that denies, in no order it promises.
            last.as_ref().is_err_and(|e| {
                e.contains("ValidatingAdmissionPolicy")
                    && (e.contains("[partial-node]") || e.contains("[multi-az]"))
            })
        })
    }));
    assert!(
        waited.is_ok(),
        "{what} not in force after 60 s; the probe Job's last dry run: {last:?}"
    );
}

/// The ResourceClaim kube-scheduler creates for a pod's extended resources backed by
/// DRA (KEP-5004): one request per container of the pod's own count, annotated. Created
/// by the scheduler it is admitted (the pod was judged); the same claim from a user,
/// annotation and all, is judged as any claim and refused. `what` names the phase.
fn scheduler_claims(sb: &Sandbox, ns: &str, what: &str) {
    let claim = json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "w-0-extended-resources-x8k2z", "namespace": ns,
            "annotations": {"resource.kubernetes.io/extended-resource-claim": "true"}},
        "spec": {"devices": {"requests": [
            {"name": "container-0-request-0",
             "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 4}},
            {"name": "container-1-request-0",
             "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 4}}
        ]}}
    });
    let scheduler = [
        "--as=system:kube-scheduler".to_string(),
        "--as-group=system:masters".to_string(),
        "--as-group=system:authenticated".to_string(),
    ];
    let out = corpus::dry_run_output(sb, &claim, &scheduler);
    assert!(
        out.status.success(),
        "{what}: the scheduler's claim was refused: {}",
        stderr(&out)
    );
    let out = corpus::dry_run_output(sb, &claim, &as_groups(&["system:masters".into()]));
    assert!(
        !out.status.success() && stderr(&out).contains("[partial-node]"),
        "{what}: a user's claim with the scheduler's annotation: {}",
        stderr(&out)
    );
}

fn create(sb: &Sandbox, object: &Value, extra: &[String]) -> Result<String, String> {
    let mut args: Vec<&str> = extra.iter().map(String::as_str).collect();
    args.extend(["create", "-f", "-"]);
    let out = sb.kubectl_stdin(&args, Some(&object.to_string()));
    if out.status.success() {
        Ok(stderr(&out))
    } else {
        Err(stderr(&out))
    }
}

fn webhook_phase(sb: &Sandbox) {
    let ns = sb.namespace("strict");
    // A person's Job of 4 pods x 1 GPU on p5, and the same as a CronJob: refused at
    // their own admission, whatever they say about launchers or sizes.
    let person = job(&ns, "four-by-one", 1, 4, json!({}));
    let e = create(sb, &person, &[]).expect_err("a 4 x 1-GPU Job is refused");
    assert!(e.contains("[partial-node]"), "{e}");
    let cron = json!({
        "apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": {"name": "nightly", "namespace": ns},
        "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": person["spec"].clone()}}
    });
    let e = create(sb, &cron, &[]).expect_err("a CronJob of 4 x 1-GPU Jobs is refused");
    assert!(e.contains("[partial-node]"), "{e}");

    // The platform admins may skip trainplace, so their Job is created; its pods are
    // created by the Job controller, which is granted nothing: every one is refused.
    let admin = as_groups(&["system:masters".into(), "ml-platform-admins".into()]);
    let skipped = job(&ns, "skipped", 1, 4, json!({"trainplace.io/skip": "true"}));
    create(sb, &skipped, &admin).expect("the admins' skip is granted");
    wait_until(
        Duration::from_secs(60),
        "the Job controller's pod creation refused",
        || {
            let events = sb.ok(&["-n", &ns, "get", "events", "-o", "json"]);
            events.contains("FailedCreate") && events.contains("[partial-node]")
        },
    );
    let pods = sb.pods(&ns, "batch.kubernetes.io/job-name=skipped");
    assert!(pods.is_empty(), "pods of 1 GPU were created: {pods:?}");

    // Whole nodes: admitted, pinned by the mutating webhook to the namespace's zone,
    // and scheduled there by the real scheduler.
    let whole = job(&ns, "whole", 8, 2, json!({}));
    create(sb, &whole, &[]).expect("a whole-node Job is admitted");
    wait_until(Duration::from_secs(90), "both pods scheduled", || {
        let pods = sb.pods(&ns, "batch.kubernetes.io/job-name=whole");
        pods.len() == 2 && pods.iter().all(|p| p["spec"]["nodeName"].is_string())
    });
    for p in sb.pods(&ns, "batch.kubernetes.io/job-name=whole") {
        assert_eq!(
            p["spec"]["nodeSelector"]["topology.kubernetes.io/zone"], "us-east-1a",
            "{p}"
        );
        let node = p["spec"]["nodeName"].as_str().unwrap();
        assert_eq!(
            sb.node_labels(node)["topology.kubernetes.io/zone"],
            "us-east-1a",
            "{node}"
        );
    }

    // spec.nodeName on a node in another zone: the webhook knows the node's zone.
    let nodes = sb.json(&[
        "get",
        "nodes",
        "-l",
        "node.kubernetes.io/instance-type=p5.48xlarge,topology.kubernetes.io/zone=us-east-1b",
        "-o",
        "json",
    ]);
    let elsewhere = nodes["items"][0]["metadata"]["name"].as_str().unwrap();
    let bound = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "bound", "namespace": ns},
        "spec": {"nodeName": elsewhere, "restartPolicy": "Never",
            "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"},
            "containers": [{"name": "t", "image": "registry.example/trainer:1",
                "resources": {"limits": {"nvidia.com/gpu": 8}}}]}
    });
    let e = corpus::dry_run(sb, &bound).expect_err("a pod bound to another zone's node");
    assert!(e.contains("[multi-az]") && e.contains(elsewhere), "{e}");
    scheduler_claims(sb, &ns, "webhook");
}

/// The engine's strict verdict (partial-node, multi-az) for `object` as `groups`.
fn engine_denies(
    policy: &Policy,
    object: &Value,
    ns: &str,
    groups: &[String],
) -> Vec<&'static str> {
    let who = Requester {
        namespace: ns,
        groups,
        ..Default::default()
    };
    let Ok(v) = judge_owned(object.clone(), policy, &who) else {
        return vec!["unreadable"];
    };
    ["multi-az", "partial-node"]
        .into_iter()
        .filter(|r| {
            v.findings
                .iter()
                .any(|f| f.rule.as_str() == *r && f.mode == Mode::Enforce)
        })
        .collect()
}

fn strict_fixtures() -> Vec<(String, Value)> {
    let dir = repo().join("tests/fixtures/strict");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let doc: Value =
                serde_yaml_ng::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
            (p.file_name().unwrap().to_string_lossy().into_owned(), doc)
        })
        .collect()
}

fn policies_alone_phase(sb: &Sandbox) {
    let ns = sb.namespace("alone");
    // Admitted before the policies: a suspended 1-GPU Job with a finalizer, and a
    // 1-GPU Deployment, for the controllers' updates below.
    let old = job(&ns, "before", 1, 4, json!({}));
    let mut old = old;
    old["spec"]["suspend"] = json!(true);
    old["metadata"]["finalizers"] = json!(["example.com/hold"]);
    for kind in [
        "mutatingwebhookconfiguration",
        "validatingwebhookconfiguration",
    ] {
        sb.ok(&["delete", kind, "trainplace"]);
    }
    create(sb, &old, &[]).expect("no guardrail yet");
    let deployment = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "before", "namespace": ns},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "before"}},
            "template": old["spec"]["template"].clone()}
    });
    let mut deployment = deployment;
    deployment["spec"]["template"]["metadata"] = json!({"labels": {"app": "before"}});
    deployment["spec"]["template"]["spec"]["restartPolicy"] = json!("Always");
    create(sb, &deployment, &[]).expect("no guardrail yet");

    // Strict mode's partial-node and multi-az alone (the impossible-request policy is
    // the precise one, not what this phase compares).
    apply_exported(
        sb,
        &ns,
        &policy_dir(),
        &[Check::ImpossibleRequest, Check::TooLarge],
        "the strict policies",
    );
    let policies = sb.json(&["get", "validatingadmissionpolicies", "-o", "json"]);
    for p in policies["items"].as_array().unwrap() {
        let warnings = &p["status"]["typeChecking"]["expressionWarnings"];
        assert!(
            warnings.is_null() || warnings.as_array().is_some_and(Vec::is_empty),
            "{}: {warnings:#}",
            p["metadata"]["name"]
        );
    }

    // Controllers doing their job on objects admitted before: never refused.
    replay_controllers(sb, &ns, "before");
    let out = sb.kubectl(&["-n", &ns, "scale", "deployment", "before", "--replicas=0"]);
    assert!(out.status.success(), "a scale: {}", stderr(&out));
    // An update that brings a new layout of part of a node is refused.
    let out = sb.kubectl(&[
        "-n", &ns, "patch", "deployment", "before", "--type=json", "-p",
        r#"[{"op":"replace","path":"/spec/template/spec/containers/0/resources/limits/nvidia.com~1gpu","value":2}]"#,
    ]);
    assert!(
        out.status.success(),
        "still part of a node, as before: {}",
        stderr(&out)
    );
    // A whole-node Deployment in its zone is admitted; an update that makes it part of a
    // node is refused.
    let mut good = deployment.clone();
    good["metadata"]["name"] = json!("good");
    good["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] =
        json!(8);
    good["spec"]["template"]["spec"]["nodeSelector"]["topology.kubernetes.io/zone"] =
        json!("us-east-1a");
    create(sb, &good, &[]).expect("a whole-node Deployment in its zone");
    let out = sb.kubectl(&[
        "-n", &ns, "patch", "deployment", "good", "--type=json", "-p",
        r#"[{"op":"replace","path":"/spec/template/spec/containers/0/resources/limits/nvidia.com~1gpu","value":1}]"#,
    ]);
    assert!(
        !out.status.success() && stderr(&out).contains("[partial-node]"),
        "an update to 1 GPU: {}",
        stderr(&out)
    );

    scheduler_claims(sb, &ns, "the policies alone");

    // Every fixture: the API server alone decides as the engine.
    let policy = strict();
    let research = "research";
    let _ = sb.kubectl(&["create", "namespace", research]);
    let mut differ = Vec::new();
    let mut refused = 0;
    let mut cases: Vec<(String, Value, Vec<String>)> = Vec::new();
    for (name, doc) in strict_fixtures() {
        if !doc["oldObject"].is_null() {
            continue;
        }
        let groups: Vec<String> = doc["groups"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|g| g.as_str().map(String::from))
            .collect();
        cases.push((name, doc["object"].clone(), groups));
    }
    for f in corpus::fixtures() {
        cases.push((f.name.clone(), f.object.clone(), Vec::new()));
    }
    for (name, object, groups) in &cases {
        let target = if object["metadata"]["namespace"] == research {
            research.to_string()
        } else {
            ns.clone()
        };
        let object = corpus::placed(object, &target);
        let mut all = groups.clone();
        all.push("system:masters".into());
        let mut with_auth = all.clone();
        with_auth.push("system:authenticated".into());
        let want = engine_denies(&policy, &object, &target, &with_auth);
        if want == ["unreadable"] {
            continue;
        }
        let out = corpus::dry_run_output(sb, &object, &as_groups(&all));
        let got: Vec<&str> = if out.status.success() {
            Vec::new()
        } else {
            let e = stderr(&out);
            if !e.contains("ValidatingAdmissionPolicy") {
                // Refused by the API server itself (schema): not the policies' to judge.
                continue;
            }
            ["multi-az", "partial-node"]
                .into_iter()
                .filter(|r| e.contains(&format!("[{r}]")))
                .collect()
        };
        if !got.is_empty() {
            refused += 1;
        }
        let agree = if want.is_empty() {
            got.is_empty()
        } else {
            !got.is_empty() && got.iter().all(|r| want.contains(r))
        };
        if !agree {
            differ.push(format!(
                "{name}: engine {want:?}, policies {got:?} {}",
                stdout(&out)
            ));
        }
    }
    eprintln!(
        "{} objects, {refused} refused by the policies alone",
        cases.len()
    );
    assert!(
        differ.is_empty(),
        "policies and engine differ:\n{}",
        differ.join("\n")
    );
    assert!(refused >= 40, "the policies refused only {refused}");
}

/// The precise policies of the restricted example judge an UPDATE for what it changes:
/// the admins' skipped Job, updated by Kueue and the garbage collector (granted
/// nothing), is not refused; the same Job created by them is.
fn precise_updates_phase(sb: &Sandbox) {
    let ns = sb.namespace("precise");
    apply_exported(
        sb,
        &ns,
        &repo().join("target/sandbox-tests/cluster_strict-restricted"),
        &[],
        "the precise policies",
    );
    let admin = as_groups(&["system:masters".into(), "ml-platform-admins".into()]);
    let mut skipped = job(&ns, "skipped", 1, 4, json!({"trainplace.io/skip": "true"}));
    skipped["spec"]["suspend"] = json!(true);
    skipped["metadata"]["finalizers"] = json!(["example.com/hold"]);
    create(sb, &skipped, &admin).expect("the admins may skip");
    replay_controllers(sb, &ns, "skipped");
    let kueue = as_groups(&[
        "system:masters".into(),
        "system:serviceaccounts".into(),
        "system:serviceaccounts:kueue-system".into(),
    ]);
    let mut again = job(&ns, "again", 1, 4, json!({"trainplace.io/skip": "true"}));
    again["spec"]["suspend"] = json!(true);
    let e = create(sb, &again, &kueue).expect_err("Kueue may not create it");
    assert!(e.contains("[partial-node]"), "{e}");
}

#[test]
fn strict_mode_holds_through_the_real_controllers_with_the_webhook_and_with_the_policies_alone() {
    // Strict mode is the webhook's policy for every namespace, and the second phase
    // takes the webhooks away from the whole control plane: the control plane to this
    // test alone, with trainplace serving strict mode; put back when it ends.
    let turn = sandbox::shared_exclusive();
    turn.serve(Some(&policy_dir()), &[]);
    let sb = turn.sb();
    let restricted = repo().join("target/sandbox-tests/cluster_strict-restricted");
    std::fs::create_dir_all(&restricted).unwrap();
    std::fs::copy(
        repo().join("examples/policy-restricted.yaml"),
        restricted.join("policy.yaml"),
    )
    .unwrap();
    webhook_phase(sb);
    policies_alone_phase(sb);
    precise_updates_phase(sb);
    hostile_phase(sb);
}

/// Hostile pods through the whole strict export (its precise impossible-request check
/// included), the webhook still down: each is answered by the policies. A strict export
/// bounds what strict mode reads, and its precise check reads nothing past the precise
/// bounds; before that check was guarded, the zone-values pod ran the request into the
/// API server's timeout, and a pod of 3 MiB of env cost it 19 s (docs/performance.md).
fn hostile_phase(sb: &Sandbox) {
    let ns = sb.namespace("hostile");
    apply_exported(sb, &ns, &policy_dir(), &[], "the whole strict export");
    let pod = |name: &str, container: Value, affinity: Value| {
        let mut c = json!({"name": "t", "image": "registry.example/trainer:1",
            "resources": {"limits": {"nvidia.com/gpu": 8}}});
        if let (Some(c), Some(extra)) = (c.as_object_mut(), container.as_object()) {
            c.extend(extra.clone());
        }
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"containers": [c], "affinity": affinity,
                "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge",
                    "topology.kubernetes.io/zone": "us-east-1a"}}})
    };
    let env: Vec<Value> = (0..60_000)
        .map(|i| json!({"name": format!("E{i}"), "value": "xxxxxxxx"}))
        .collect();
    let many_env = pod("many-env", json!({"env": env}), json!({}));
    let mut values = vec![json!("us-east-1a")];
    values.extend((0..100_000).map(|i| json!(format!("z{i}"))));
    let zone_values = pod(
        "zone-values",
        json!({}),
        json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "topology.kubernetes.io/zone",
                "operator": "In", "values": values}]}]}}}),
    );
    let dry = ["--dry-run=server".to_string()];
    // A whole p5 in the namespace's zone: strict mode reads no env, and the precise
    // check holds past its bounds.
    let answer = create(sb, &many_env, &dry);
    assert!(
        answer.is_ok(),
        "{} bytes of env: {answer:?}",
        many_env.to_string().len()
    );
    // Past strict mode's own bound on zone values: refused as holding part of a node,
    // by the policy.
    let e = create(sb, &zone_values, &dry).expect_err("past strict mode's bounds");
    assert!(
        e.contains("ValidatingAdmissionPolicy") && e.contains("[partial-node]"),
        "{} bytes of zone values: {e}",
        zone_values.to_string().len()
    );
}
