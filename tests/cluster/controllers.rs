//! Controllers doing their job, and users attacking the guardrail, through the sandbox's
//! real API server, Job controller, garbage collector and scheduler, under a platform
//! policy that grants the partial-node opt-in to one group only (`ml-researchers`). A
//! controller's update (Kueue's unsuspend that writes a node selector, the garbage
//! collector's finalizer removal) holds none of the submitter's grants and must still
//! pass; a pod's job label cannot change; bare torchrun pods are held in one zone by
//! their rendezvous; a Karpenter selection of one-GPU nodes is not judged as p5.

use crate::sandbox;

use std::collections::BTreeSet;
use std::time::Duration;

use sandbox::{Sandbox, stderr, wait_until};
use serde_json::{Value, json};

const POLICY: &str = "apiVersion: trainplace.io/v1alpha1
kind: Policy
defaults: { instanceType: p5.48xlarge }
rules: { partialNode: enforce, multiAz: enforce }
optIns:
  allowPartialNode: { namespaces: [\"*\"], groups: [\"ml-researchers\"] }
";

/// The control plane to one test at a time, with trainplace serving `POLICY`: the
/// policy is the webhook's, which judges every namespace, and the tests' jobs take whole
/// p5 nodes (8 per zone) and are held in one zone each. Each test's namespaces are
/// deleted, and the sandbox's own trainplace put back, when its turn ends.
fn turn() -> sandbox::Turn {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target/sandbox-tests/cluster_controllers-policy");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("policy.yaml"), POLICY).unwrap();
    let turn = sandbox::shared_exclusive();
    turn.serve(Some(&dir), &[]);
    turn
}

/// kubectl as a researcher (the sandbox admin impersonating, with the grant's group).
const RESEARCHER: [&str; 3] = [
    "--as=alice",
    "--as-group=system:masters",
    "--as-group=ml-researchers",
];

fn scheduled(pods: &[Value]) -> bool {
    pods.iter().all(|p| p["spec"]["nodeName"].is_string())
}

fn zones(sb: &Sandbox, pods: &[Value]) -> BTreeSet<String> {
    pods.iter()
        .map(|p| {
            let node = p["spec"]["nodeName"].as_str().unwrap();
            sb.node_labels(node)["topology.kubernetes.io/zone"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

#[test]
fn an_opted_in_job_is_unsuspended_run_and_deleted_by_controllers_that_hold_no_grant() {
    let turn = turn();
    let sb = turn.sb();
    let ns = turn.namespace("granted");
    let job = json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "bert", "namespace": ns,
            "annotations": {"trainplace.io/allow-partial-node": "true"}},
        "spec": {"suspend": true, "parallelism": 4, "completions": 4, "completionMode": "Indexed",
            "backoffLimit": 0, "template": {"spec": {"restartPolicy": "Never",
                "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"},
                "containers": [{"name": "c", "image": "busybox",
                    "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}});
    // Refused to someone without the grant; admitted to the researcher.
    let out = sb.apply(&ns, &job.to_string());
    assert!(!out.status.success(), "admitted without the grant");
    assert!(
        stderr(&out).contains("is set, but the policy grants it to"),
        "{}",
        stderr(&out)
    );
    let mut args = RESEARCHER.to_vec();
    args.extend(["apply", "-n", &ns, "-f", "-"]);
    let out = sb.kubectl_stdin(&args, Some(&job.to_string()));
    assert!(out.status.success(), "researcher: {}", stderr(&out));
    // Kueue's unsuspend, as the admin (no grant): it also writes its flavor's node
    // selector into the template, so the template no longer matches its admission mark.
    let out = sb.kubectl(&[
        "-n", &ns, "patch", "job", "bert", "--type=merge", "-p",
        r#"{"spec":{"suspend":false,"template":{"spec":{"nodeSelector":{"eks.amazonaws.com/capacityType":"ON_DEMAND"}}}}}"#,
    ]);
    assert!(out.status.success(), "unsuspend refused: {}", stderr(&out));
    // The Job controller's pods are admitted: all four run.
    wait_until(Duration::from_secs(90), "4 pods running", || {
        let pods = sb.pods(&ns, "batch.kubernetes.io/job-name=bert");
        pods.len() == 4 && pods.iter().all(|p| p["status"]["phase"] == "Running")
    });
    // Foreground deletion: the garbage collector removes its finalizer (an UPDATE).
    let out = sb.kubectl(&[
        "-n",
        &ns,
        "delete",
        "job",
        "bert",
        "--cascade=foreground",
        "--timeout=90s",
    ]);
    assert!(out.status.success(), "foreground delete: {}", stderr(&out));
    wait_until(Duration::from_secs(60), "the job gone", || {
        stderr(&sb.kubectl(&["-n", &ns, "get", "job", "bert"])).contains("NotFound")
    });
}

#[test]
fn a_running_pod_cannot_be_moved_to_another_job_by_its_labels() {
    let turn = turn();
    let sb = turn.sb();
    let ns = turn.namespace("relabel");
    let bound = sb.whole_node_job(&ns, "llama", 2, Duration::from_secs(60));
    let pod = bound[0]["metadata"]["name"].as_str().unwrap().to_string();
    // Attack: relabel a bound pod so the job's next pod is no longer held with it.
    let out = sb.kubectl(&[
        "-n",
        &ns,
        "label",
        "pod",
        &pod,
        "batch.kubernetes.io/job-name=other",
        "--overwrite",
    ]);
    assert!(
        !out.status.success(),
        "a training pod was moved to another job"
    );
    assert!(
        stderr(&out).contains("batch.kubernetes.io/job-name"),
        "{}",
        stderr(&out)
    );
    // Any other label is the pod's own business.
    let out = sb.kubectl(&["-n", &ns, "label", "pod", &pod, "team=nlp"]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn bare_torchrun_pods_meeting_at_one_rendezvous_land_in_one_zone() {
    let turn = turn();
    let sb = turn.sb();
    let ns = turn.namespace("rendezvous");
    for i in 0..3 {
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("trainer-{i}"), "namespace": ns, "labels": {"app": "trainer"}},
            "spec": {"restartPolicy": "Never",
                "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"},
                "containers": [{"name": "c", "image": "busybox",
                    "command": ["torchrun", "--nnodes=3", "--nproc-per-node=8",
                        "--rdzv-backend=c10d", "--rdzv-endpoint=trainer-0.trainer:29400", "train.py"],
                    "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}});
        let out = sb.apply(&ns, &pod.to_string());
        assert!(out.status.success(), "{}", stderr(&out));
    }
    wait_until(Duration::from_secs(60), "3 pods bound", || {
        let pods = sb.pods(&ns, "app=trainer");
        pods.len() == 3 && scheduled(&pods)
    });
    let pods = sb.pods(&ns, "app=trainer");
    let labels: BTreeSet<&str> = pods
        .iter()
        .map(|p| {
            p["metadata"]["labels"]["trainplace.io/rendezvous"]
                .as_str()
                .unwrap_or("")
        })
        .collect();
    assert_eq!(labels.len(), 1, "one rendezvous label: {labels:?}");
    assert!(!labels.contains(""), "every pod carries it");
    assert_eq!(zones(sb, &pods).len(), 1, "held in one zone");
    // A bare pod that says it is one of several but names nothing that ties its pods
    // together is refused: nothing could hold it.
    let lone = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "lone", "namespace": ns},
        "spec": {"restartPolicy": "Never",
            "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"},
            "containers": [{"name": "c", "image": "busybox", "command": ["torchrun", "train.py"],
                "env": [{"name": "PET_NNODES", "value": "3"}],
                "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}});
    let out = sb.apply(&ns, &lone.to_string());
    assert!(!out.status.success(), "an unholdable pod was admitted");
    assert!(
        stderr(&out).contains("no label ties the job's pods together"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_karpenter_selection_of_one_gpu_nodes_is_not_judged_as_the_default_p5() {
    let turn = turn();
    let sb = turn.sb();
    let ns = turn.namespace("karpenter");
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "w-0", "namespace": ns,
            "labels": {"batch.kubernetes.io/job-name": "l4-sweep"}},
        "spec": {"restartPolicy": "Never",
            "nodeSelector": {"karpenter.k8s.aws/instance-family": "g6",
                "karpenter.k8s.aws/instance-size": "xlarge"},
            "containers": [{"name": "c", "image": "busybox",
                "command": ["torchrun", "--nnodes=4", "--rdzv-endpoint=w-0.l4:29400", "train.py"],
                "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}});
    let out = sb.kubectl_stdin(
        &["apply", "--dry-run=server", "-n", &ns, "-f", "-"],
        Some(&pod.to_string()),
    );
    assert!(
        out.status.success(),
        "g6.xlarge pods refused: {}",
        stderr(&out)
    );
}

#[test]
fn a_zone_named_by_its_id_is_the_same_zone_as_the_jobs_pods() {
    let turn = turn();
    let sb = turn.sb();
    let ns = turn.namespace("zoneid");
    let bound = sb.whole_node_job(&ns, "gpt", 2, Duration::from_secs(60));
    let node = bound[0]["spec"]["nodeName"].as_str().unwrap().to_string();
    let zone_id = sb.node_labels(&node)["topology.k8s.aws/zone-id"]
        .as_str()
        .unwrap()
        .to_string();
    // One more pod of the job, pinned by the zone's id rather than its name: the same
    // zone, admitted (the live inventory maps the id to the name the nodes carry).
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "gpt-extra", "namespace": ns,
            "labels": {"batch.kubernetes.io/job-name": "gpt", "batch.kubernetes.io/job-completion-index": "2"}},
        "spec": {"restartPolicy": "Never",
            "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge",
                "topology.k8s.aws/zone-id": zone_id},
            "containers": [{"name": "c", "image": "busybox",
                "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}});
    let out = sb.kubectl_stdin(
        &["apply", "--dry-run=server", "-n", &ns, "-f", "-"],
        Some(&pod.to_string()),
    );
    assert!(
        out.status.success(),
        "pinned by zone id, refused: {}",
        stderr(&out)
    );
}

#[test]
fn a_job_created_with_generate_name_is_held_in_one_zone() {
    let turn = turn();
    let sb = turn.sb();
    let ns = turn.namespace("generated");
    let job = json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"generateName": "sweep-", "namespace": ns},
        "spec": {"parallelism": 4, "completions": 4, "completionMode": "Indexed",
            "template": {"metadata": {"labels": {"app": "sweep"}}, "spec": {"restartPolicy": "Never",
                "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"},
                "containers": [{"name": "c", "image": "busybox",
                    "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}}});
    let out = sb.kubectl_stdin(&["create", "-n", &ns, "-f", "-"], Some(&job.to_string()));
    assert!(out.status.success(), "{}", stderr(&out));
    wait_until(Duration::from_secs(60), "4 pods bound", || {
        let pods = sb.pods(&ns, "app=sweep");
        pods.len() == 4 && scheduled(&pods)
    });
    let pods = sb.pods(&ns, "app=sweep");
    let keys: BTreeSet<&str> = pods
        .iter()
        .map(|p| {
            p["metadata"]["labels"]["trainplace.io/job"]
                .as_str()
                .unwrap_or("")
        })
        .collect();
    assert_eq!(keys.len(), 1, "one trainplace.io/job label: {keys:?}");
    assert!(!keys.contains(""), "every pod carries it");
    assert_eq!(zones(sb, &pods).len(), 1, "held in one zone");
}
