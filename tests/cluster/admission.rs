//! trainplace registered in a real control plane (scripts/sandbox.sh): the Job controller
//! makes the pods, the API server applies trainplace's patches, the scheduler binds them to
//! kwok's simulated EKS nodes, and users see denials and dry-runs through the real kubectl.

use crate::sandbox;

use std::collections::BTreeSet;
use std::time::Duration;

use sandbox::{Sandbox, stderr, stdout, wait_until};
use serde_json::{Value, json};

/// Every test here stays in its own namespaces: any number run at once.
fn turn() -> sandbox::Turn {
    sandbox::shared()
}

/// A fixture's object (tests/fixtures/*/NAME.yaml `object:`, or a plain manifest), with
/// its namespace set to `ns`, as JSON.
fn manifest(path: &str, ns: &str) -> Value {
    let text = std::fs::read_to_string(format!("{}/{path}", env!("CARGO_MANIFEST_DIR"))).unwrap();
    let doc: Value = serde_yaml_ng::from_str(&text).unwrap();
    let mut obj = doc.get("object").cloned().unwrap_or(doc);
    obj["metadata"]["namespace"] = json!(ns);
    obj
}

fn scheduled(pods: &[Value]) -> bool {
    pods.iter().all(|p| p["spec"]["nodeName"].is_string())
}

fn zone_of(sb: &Sandbox, node: &str) -> String {
    sb.node_labels(node)["topology.kubernetes.io/zone"]
        .as_str()
        .unwrap()
        .to_string()
}

/// examples/workloads/job.yaml (4 pods x 8 GPUs on p5) as job `name` in `ns`, once the
/// scheduler has bound all 4 pods; its pods.
fn four_node_job(sb: &Sandbox, ns: &str, name: &str) -> Vec<Value> {
    let mut job = manifest("examples/workloads/job.yaml", ns);
    job["metadata"]["name"] = json!(name);
    let out = sb.apply(ns, &job.to_string());
    assert!(out.status.success(), "{}", stderr(&out));
    let selector = format!("batch.kubernetes.io/job-name={name}");
    wait_until(
        Duration::from_secs(60),
        "4 pods bound by the scheduler",
        || {
            let pods = sb.pods(ns, &selector);
            pods.len() == 4 && scheduled(&pods)
        },
    );
    sb.pods(ns, &selector)
}

/// A sandbox zone other than `zone`.
fn other_zone(zone: &str) -> &'static str {
    ["us-east-1a", "us-east-1b", "us-east-1c"]
        .into_iter()
        .find(|z| *z != zone)
        .unwrap()
}

#[test]
fn an_indexed_job_of_four_whole_nodes_lands_one_pod_per_p5_in_one_zone() {
    let turn = turn();
    let sb = turn.sb();
    let ns = sb.namespace("layout");
    let selector = "batch.kubernetes.io/job-name=llama-pretrain";
    let pods = four_node_job(sb, &ns, "llama-pretrain");
    let nodes: BTreeSet<String> = pods
        .iter()
        .map(|p| p["spec"]["nodeName"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(nodes.len(), 4, "one pod per node: {nodes:?}");
    let zones: BTreeSet<String> = nodes.iter().map(|n| zone_of(sb, n)).collect();
    assert_eq!(zones.len(), 1, "one zone: {zones:?}");
    for node in &nodes {
        assert_eq!(
            sb.node_labels(node)["node.kubernetes.io/instance-type"],
            "p5.48xlarge"
        );
    }
    for pod in &pods {
        let c = &pod["spec"]["containers"][0];
        assert_eq!(c["resources"]["limits"]["nvidia.com/gpu"], "8");
        assert_eq!(c["resources"]["limits"]["vpc.amazonaws.com/efa"], "32");
        assert_eq!(c["resources"]["requests"]["vpc.amazonaws.com/efa"], "32");
        assert_eq!(pod["spec"]["hostIPC"], true);
        let shm = pod["spec"]["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["emptyDir"]["medium"] == "Memory")
            .unwrap_or_else(|| panic!("a memory-backed volume: {}", pod["spec"]["volumes"]));
        assert!(
            c["volumeMounts"]
                .as_array()
                .unwrap()
                .iter()
                .any(|m| m["mountPath"] == "/dev/shm" && m["name"] == shm["name"]),
            "/dev/shm mounted"
        );
        let tolerated: BTreeSet<&str> = pod["spec"]["tolerations"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t["key"].as_str())
            .collect();
        assert!(tolerated.contains("nvidia.com/gpu"), "{tolerated:?}");
        assert!(tolerated.contains("vpc.amazonaws.com/efa"), "{tolerated:?}");
        assert!(
            pod["metadata"]["annotations"]["trainplace.io/mutated"].is_string(),
            "the template's trainplace.io/mutated annotation reaches the pod"
        );
    }
    // kwok runs them: the kubelet's part, simulated.
    wait_until(Duration::from_secs(30), "4 running pods", || {
        sb.pods(&ns, selector)
            .iter()
            .all(|p| p["status"]["phase"] == "Running")
    });
}

#[test]
fn kubectl_apply_of_one_gpu_per_pod_says_rule_fix_and_opt_in_and_persists_nothing() {
    let turn = turn();
    let sb = turn.sb();
    let ns = sb.namespace("deny");
    let job = manifest("tests/fixtures/workloads/job-one-gpu.yaml", &ns);
    let out = sb.apply(&ns, &job.to_string());
    assert!(!out.status.success(), "denied: {}", stdout(&out));
    let err = stderr(&out);
    for needle in [
        "admission webhook \"validate.trainplace.io\" denied the request",
        "[partial-node]",
        "spec.template.spec",
        "8 pods x 1 GPU",
        "Fix:",
        "trainplace.io/allow-partial-node",
    ] {
        assert!(err.contains(needle), "{needle:?} in:\n{err}");
    }
    let get = sb.kubectl(&["-n", &ns, "get", "job", "bert"]);
    assert!(
        !get.status.success() && stderr(&get).contains("NotFound"),
        "nothing persisted"
    );
}

#[test]
fn the_opt_in_admits_the_job_and_kubectl_prints_the_warnings() {
    let turn = turn();
    let sb = turn.sb();
    let ns = sb.namespace("optin");
    let mut job = manifest("tests/fixtures/workloads/job-one-gpu.yaml", &ns);
    job["metadata"]["annotations"] = json!({"trainplace.io/allow-partial-node": "true"});
    // 8 pods of 1 GPU share nodes: no CPU or memory requests that would take a node each.
    job["spec"]["template"]["spec"]["containers"][0]["resources"] =
        json!({"limits": {"nvidia.com/gpu": "1"}});
    let out = sb.apply(&ns, &job.to_string());
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("Warning:"),
        "kubectl prints the webhook's warnings:\n{err}"
    );
    assert!(
        err.contains("[partial-node]")
            && err.contains("Admitted under the opt-in trainplace.io/allow-partial-node"),
        "{err}"
    );
    // The Job controller's pods are admitted too: all 8 are created and bound.
    wait_until(Duration::from_secs(60), "8 pods bound", || {
        let pods = sb.pods(&ns, "batch.kubernetes.io/job-name=bert");
        pods.len() == 8 && scheduled(&pods)
    });
}

#[test]
fn dry_run_server_shows_the_mutated_job_and_persists_nothing() {
    let turn = turn();
    let sb = turn.sb();
    let ns = sb.namespace("dryrun");
    let job = manifest("examples/workloads/job.yaml", &ns);
    let out = sb.kubectl_stdin(
        &[
            "apply",
            "--dry-run=server",
            "-o",
            "json",
            "-n",
            &ns,
            "-f",
            "-",
        ],
        Some(&job.to_string()),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let mutated: Value = serde_json::from_slice(&out.stdout).unwrap();
    let spec = &mutated["spec"]["template"]["spec"];
    assert_eq!(spec["hostIPC"], true);
    assert_eq!(
        spec["containers"][0]["resources"]["limits"]["vpc.amazonaws.com/efa"],
        "32"
    );
    assert!(
        spec["affinity"]["podAffinity"].is_object(),
        "held in one zone: {}",
        spec["affinity"]
    );
    assert!(
        mutated["spec"]["template"]["metadata"]["annotations"]["trainplace.io/mutated"].is_string()
    );
    let get = sb.kubectl(&["-n", &ns, "get", "job", "llama-pretrain"]);
    assert!(stderr(&get).contains("NotFound"), "nothing persisted");
}

#[test]
fn controllers_are_never_refused_single_pod_jobs_start_suspend_resume_and_foreground_delete() {
    let turn = turn();
    let sb = turn.sb();
    let ns = sb.namespace("controllers");
    // A single-pod job on 1 of 8 GPUs: allowed (one pod is not a partial-node job); its
    // pod, made by the Job controller, must be admitted too.
    let job = json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "one", "namespace": ns},
        "spec": {"suspend": true, "backoffLimit": 0, "template": {"spec": {
            "restartPolicy": "Never",
            "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"},
            "containers": [{"name": "c", "image": "busybox",
                "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}
    });
    let out = sb.apply(&ns, &job.to_string());
    assert!(out.status.success(), "{}", stderr(&out));
    // Kueue (or a user) unsuspends: an UPDATE of an admitted Job.
    let out = sb.kubectl(&[
        "-n",
        &ns,
        "patch",
        "job",
        "one",
        "--type=merge",
        "-p",
        r#"{"spec":{"suspend":false}}"#,
    ]);
    assert!(out.status.success(), "unsuspend: {}", stderr(&out));
    wait_until(Duration::from_secs(60), "the job's pod running", || {
        sb.pods(&ns, "batch.kubernetes.io/job-name=one")
            .iter()
            .any(|p| p["status"]["phase"] == "Running")
    });
    // Suspend again and resume: the controller deletes and recreates pods.
    for suspend in [true, false] {
        let patch = format!(r#"{{"spec":{{"suspend":{suspend}}}}}"#);
        let out = sb.kubectl(&[
            "-n",
            &ns,
            "patch",
            "job",
            "one",
            "--type=merge",
            "-p",
            &patch,
        ]);
        assert!(out.status.success(), "suspend={suspend}: {}", stderr(&out));
    }
    // Foreground deletion: the garbage collector adds and removes its finalizer (an
    // UPDATE of the Job) and deletes the pods.
    let out = sb.kubectl(&[
        "-n",
        &ns,
        "delete",
        "job",
        "one",
        "--cascade=foreground",
        "--timeout=60s",
    ]);
    assert!(out.status.success(), "foreground delete: {}", stderr(&out));
    wait_until(Duration::from_secs(60), "the job gone", || {
        stderr(&sb.kubectl(&["-n", &ns, "get", "job", "one"])).contains("NotFound")
    });
}

#[test]
fn a_pod_pinned_to_another_zone_than_its_bound_siblings_is_denied_through_the_live_inventory() {
    let turn = turn();
    let sb = turn.sb();
    let ns = sb.namespace("zones");
    let pods = four_node_job(sb, &ns, "llama-pretrain");
    let node = pods[0]["spec"]["nodeName"].as_str().unwrap().to_string();
    let labels = sb.node_labels(&node);
    let zone = labels["topology.kubernetes.io/zone"].as_str().unwrap();
    let other = other_zone(zone);
    let other_id = ["use1-az4", "use1-az6", "use1-az1"]
        .into_iter()
        .find(|z| *z != labels["topology.k8s.aws/zone-id"])
        .unwrap();
    for (key, value) in [
        ("topology.kubernetes.io/zone", other),
        ("topology.k8s.aws/zone-id", other_id),
    ] {
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "straggler", "namespace": ns,
                "labels": {"batch.kubernetes.io/job-name": "llama-pretrain"}},
            "spec": {"nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge", key: value},
                "containers": [{"name": "c", "image": "busybox",
                    "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}
        });
        // The siblings' bindings reach trainplace through its pod watch: a dry-run is
        // retried until the inventory has them (bounded), then judged.
        let dry_run = || {
            sb.kubectl_stdin(
                &["create", "--dry-run=server", "-n", &ns, "-f", "-"],
                Some(&pod.to_string()),
            )
        };
        let mut out = dry_run();
        // The watch delivers them in well under a second; 60 s only bounds one that never does.
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while out.status.success() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(200));
            out = dry_run();
        }
        assert!(
            !out.status.success(),
            "pinned by {key} to {value}: {}",
            stdout(&out)
        );
        let err = stderr(&out);
        assert!(
            err.contains("[multi-az]") && err.contains(zone),
            "{key}: {err}"
        );
    }
}

/// Every document of the upstream example manifests (Kubeflow, JobSet, LWS, KubeRay,
/// Volcano, MPI Operator, aws-samples; tests/fixtures/upstream) and of the fixture corpus,
/// through the real API server: admitted, or denied by a trainplace rule, and never made
/// invalid by trainplace's patch (the same object with `trainplace.io/skip` is the control).
#[test]
fn upstream_examples_and_fixtures_are_admitted_or_denied_by_a_rule_never_broken_by_the_patch() {
    let turn = turn();
    let sb = turn.sb();
    let ns = sb.namespace("upstream");
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut objects: Vec<(String, Value)> = Vec::new();
    let mut stack = vec![root.join("tests/fixtures/upstream")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
                let text = std::fs::read_to_string(&path).unwrap();
                for (i, doc) in serde_yaml_ng::Deserializer::from_str(&text).enumerate() {
                    let Ok(v) = <Value as serde::Deserialize>::deserialize(doc) else {
                        continue;
                    };
                    if v.get("kind").is_some() && v.get("apiVersion").is_some() {
                        let name = path.strip_prefix(&root).unwrap().display().to_string();
                        objects.push((format!("{name}#{i}"), v));
                    }
                }
            }
        }
    }
    let upstream = objects.len();
    assert!(upstream >= 50, "upstream documents: {upstream}");
    objects.extend(
        sandbox::corpus::fixtures()
            .into_iter()
            .map(|f| (f.name, f.object)),
    );
    let (mut admitted, mut denied, mut broken) = (0, 0, Vec::new());
    for (name, object) in &objects {
        let object = sandbox::corpus::placed(object, &ns);
        match sandbox::corpus::dry_run(sb, &object) {
            Ok(_) => admitted += 1,
            Err(e) if e.contains("denied the request") && e.contains("trainplace.io") => {
                denied += 1
            }
            Err(e) => {
                let mut control = object.clone();
                control["metadata"]["annotations"]["trainplace.io/skip"] = json!("true");
                if sandbox::corpus::dry_run(sb, &control).is_ok() {
                    broken.push(format!(
                        "{name}: valid as submitted, refused after trainplace: {e}"
                    ));
                }
            }
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
    eprintln!(
        "{} objects ({upstream} upstream): {admitted} admitted, {denied} denied by a rule",
        objects.len()
    );
    assert!(
        admitted >= 80 && denied >= 30,
        "{admitted} admitted, {denied} denied"
    );
}

/// Pods of a failed attempt hold no zone: once they are Failed, a pod of the same job
/// pinned to another zone (the retry, or an update that moves the job) is admitted.
#[test]
fn failed_pods_of_an_earlier_attempt_do_not_hold_the_job_in_their_zone() {
    let turn = turn();
    let sb = turn.sb();
    let ns = sb.namespace("retry");
    let selector = "batch.kubernetes.io/job-name=attempt";
    let pods = four_node_job(sb, &ns, "attempt");
    let zone = zone_of(sb, pods[0]["spec"]["nodeName"].as_str().unwrap());
    let other = other_zone(&zone);
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "retry", "namespace": ns,
            "labels": {"batch.kubernetes.io/job-name": "attempt"}},
        "spec": {"nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge",
                "topology.kubernetes.io/zone": other},
            "containers": [{"name": "c", "image": "busybox",
                "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}
    });
    let dry_run = || sandbox::corpus::dry_run(sb, &pod);
    wait_until(
        Duration::from_secs(15),
        "the running siblings hold the job",
        || dry_run().is_err_and(|e| e.contains("[multi-az]")),
    );
    // The attempt fails (the kubelet's part: kwok plays it, here by hand). With
    // backoffLimit 0 the Job controller then deletes the pods not yet failed.
    for p in &pods {
        let name = p["metadata"]["name"].as_str().unwrap();
        let out = sb.kubectl(&[
            "-n",
            &ns,
            "patch",
            "pod",
            name,
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"phase":"Failed"}}"#,
        ]);
        assert!(
            out.status.success() || stderr(&out).contains("NotFound"),
            "{}",
            stderr(&out)
        );
    }
    wait_until(
        Duration::from_secs(30),
        "the attempt over: no pod of it running",
        || {
            sb.pods(&ns, selector)
                .iter()
                .all(|p| p["status"]["phase"] == "Failed")
        },
    );
    assert!(
        !sb.pods(&ns, selector).is_empty(),
        "a failed pod stays, still bound to its node"
    );
    wait_until(
        Duration::from_secs(15),
        "the failed pods let go of the zone",
        || dry_run().is_ok(),
    );
}
