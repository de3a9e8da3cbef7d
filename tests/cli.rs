//! The offline dry-run through the real binary: exit codes, output formats, stdin,
//! parse errors, the kubectl plugin through real kubectl, and strict validation of
//! every mutated pod against the official Kubernetes schema.

mod common;

use common::root;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_trainplace");

fn run(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .current_dir(root())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    let mut child = cmd.spawn().expect("binary runs");
    if let Some(input) = stdin {
        use std::io::Write;
        child.stdin.take().unwrap().write_all(input).unwrap();
    }
    child.wait_with_output().unwrap()
}

fn text(o: &[u8]) -> String {
    String::from_utf8_lossy(o).to_string()
}

#[test]
fn check_exit_codes() {
    let ok = run(
        &["check", "-f", "examples/pods/llama3-jobset-pods.yaml"],
        None,
    );
    assert_eq!(ok.status.code(), Some(0), "{}", text(&ok.stderr));
    assert!(text(&ok.stdout).contains("Pod team-a/llama3-8b-node-0-0-x0k2p: allowed (12 changes)"));

    let denied = run(&["check", "-f", "examples/pods/one-gpu-per-pod.yaml"], None);
    assert_eq!(denied.status.code(), Some(1));
    let out = text(&denied.stdout);
    assert!(
        out.contains("DENIED")
            && out.contains("[partial-node]")
            && out.contains("opt in: trainplace.io/allow-partial-node"),
        "{out}"
    );

    let untouched = run(&["check", "-f", "examples/pods/inference.yaml"], None);
    assert_eq!(untouched.status.code(), Some(0));
    assert!(text(&untouched.stdout).contains("allowed (no changes)"));
}

#[test]
fn stdin_mixed_documents() {
    let mut all = Vec::new();
    for f in [
        "examples/pods/llama3-jobset-pods.yaml",
        "examples/pods/inference.yaml",
        "examples/pods/one-gpu-per-pod.yaml",
    ] {
        all.extend(std::fs::read(root().join(f)).unwrap());
        all.extend(b"\n---\n");
    }
    let o = run(&["check", "-f", "-", "-o", "json"], Some(&all));
    assert_eq!(o.status.code(), Some(1));
    let entries: Vec<Value> = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(entries.len(), 7);
    let allowed: Vec<bool> = entries
        .iter()
        .map(|e| e["allowed"].as_bool().unwrap())
        .collect();
    assert_eq!(allowed, [true, true, true, false, false, false, false]);
}

#[test]
fn json_output_shape_and_patch() {
    let o = run(
        &[
            "mutate",
            "-f",
            "examples/pods/llama3-jobset-pods.yaml",
            "-o",
            "report-json",
        ],
        None,
    );
    assert_eq!(o.status.code(), Some(0));
    let entries: Vec<Value> = serde_json::from_slice(&o.stdout).unwrap();
    let input: Vec<Value> = serde_yaml_ng::Deserializer::from_str(
        &std::fs::read_to_string(root().join("examples/pods/llama3-jobset-pods.yaml")).unwrap(),
    )
    .map(|d| serde::Deserialize::deserialize(d).unwrap())
    .collect();
    // zip stops at the shorter side: an empty output would check nothing.
    assert_eq!(entries.len(), input.len());
    for (e, original) in entries.iter().zip(&input) {
        for key in [
            "kind",
            "name",
            "namespace",
            "allowed",
            "warnings",
            "reasons",
            "patch",
            "object",
        ] {
            assert!(e.get(key).is_some(), "missing {key}");
        }
        let patch: json_patch::Patch = serde_json::from_value(e["patch"].clone()).unwrap();
        let mut patched = original.clone();
        json_patch::patch(&mut patched, &patch).unwrap();
        assert_eq!(patched, e["object"]);
    }
}

#[test]
fn mutate_yaml_and_diff() {
    let o = run(
        &["mutate", "-f", "examples/pods/llama3-jobset-pods.yaml"],
        None,
    );
    assert_eq!(o.status.code(), Some(0));
    let docs: Vec<Value> = serde_yaml_ng::Deserializer::from_str(&text(&o.stdout))
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .collect();
    assert_eq!(docs.len(), 2);
    assert_eq!(docs[0]["spec"]["hostIPC"], true);
    assert!(
        text(&o.stderr).contains("allowed (12 changes)"),
        "summary goes to stderr"
    );

    let d = run(
        &[
            "mutate",
            "-f",
            "examples/pods/llama3-jobset-pods.yaml",
            "--diff",
        ],
        None,
    );
    // Changes: exit 1, as kubectl diff.
    assert_eq!(d.status.code(), Some(1), "{}", text(&d.stderr));
    let diff = text(&d.stdout);
    assert!(
        diff.contains("--- a/Pod team-a/llama3-8b-node-0-0-x0k2p"),
        "{diff}"
    );
    assert!(diff.contains("+  hostIPC: true"), "{diff}");
}

#[test]
fn unreadable_input_exits_2_naming_document_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("bad.yaml");
    std::fs::write(&f, "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: [b\n").unwrap();
    let o = run(&["check", "-f", f.to_str().unwrap()], None);
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    assert!(err.contains("bad.yaml: document 2 (line "), "{err}");

    let o = run(&["check", "-f", "/nonexistent/x.yaml"], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("/nonexistent/x.yaml: cannot read"));

    let o = run(
        &[
            "check",
            "-f",
            "examples/pods/inference.yaml",
            "--policy-dir",
            "/nonexistent",
        ],
        None,
    );
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn yaml_aliases_past_the_bound_exit_2_naming_file_line_and_limit() {
    // "Billion laughs": 700 bytes whose aliases would build 10^9 strings.
    let mut laughs = String::from("a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for i in 1..10 {
        let refs = vec![format!("*a{}", i - 1); 10].join(", ");
        laughs.push_str(&format!("a{i}: &a{i} [{refs}]\n"));
    }
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("laughs.yaml");
    std::fs::write(&f, &laughs).unwrap();
    let o = run(&["check", "-f", f.to_str().unwrap()], None);
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    assert!(
        err.contains("laughs.yaml: document 1 (line 5): aliases expand to more than 100000 nodes"),
        "{err}"
    );
}

#[test]
fn policy_check_reports_file_and_line() {
    let o = run(&["policy", "check", "policies"], None);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("p.yaml"),
        "apiVersion: trainplace.io/v1alpha1\nkind: Policy\nmutations:\n  hostIpc: true\n",
    )
    .unwrap();
    let o = run(&["policy", "check", dir.path().to_str().unwrap()], None);
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    assert!(
        err.contains("p.yaml:4:") && err.contains("hostIpc"),
        "{err}"
    );
}

#[test]
fn policy_check_reports_a_duplicate_key_at_the_duplicate() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("p.yaml"),
        "apiVersion: trainplace.io/v1alpha1\nkind: Policy\nrules:\n  partialNode: enforce\n  multiAz: enforce\n  partialNode: warn\n",
    )
    .unwrap();
    let o = run(&["policy", "check", dir.path().to_str().unwrap()], None);
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    assert!(
        err.contains("p.yaml:6: duplicate key \"partialNode\" (first at line 4)"),
        "{err}"
    );
}

/// JSON as `kubectl apply -f` reads it: a stream of objects, and (with its default
/// strict field validation) no duplicate keys.
#[test]
fn json_input_is_a_stream_without_duplicate_keys() {
    let pod = |name: &str| {
        format!(
            r#"{{"apiVersion": "v1", "kind": "Pod", "metadata": {{"name": "{name}"}}, "spec": {{"containers": [{{"name": "c", "image": "x"}}]}}}}"#
        )
    };
    let stream = format!("{}\n{}{}\n", pod("a"), pod("b"), pod("c"));
    let o = run(&["check", "-f", "-", "-o", "json"], Some(stream.as_bytes()));
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let out: Value = serde_json::from_slice(&o.stdout).unwrap();
    let names: Vec<&str> = out
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["object"]["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a", "b", "c"], "{out}");

    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("dup.json");
    std::fs::write(
        &f,
        "{\n  \"apiVersion\": \"v1\",\n  \"kind\": \"Pod\",\n  \"kind\": \"Service\"\n}\n",
    )
    .unwrap();
    let o = run(&["check", "-f", f.to_str().unwrap()], None);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stdout));
    let err = text(&o.stderr);
    assert!(
        err.contains("dup.json: document 1 (line 4): duplicate key \"kind\""),
        "{err}"
    );

    let o = run(&["check", "-f", "-"], Some(b"foo: bar\n"));
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("<stdin>: document 1 (line 1): not a Kubernetes object"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn kubectl_plugin_through_real_kubectl() {
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("kubectl-trainplace");
    std::os::unix::fs::symlink(BIN, &link).unwrap();
    let path = format!(
        "{}:{}",
        dir.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let kubectl = |args: &[&str]| {
        Command::new("kubectl")
            .args(args)
            .env("PATH", &path)
            .env("KUBECONFIG", dir.path().join("no-kubeconfig"))
            .current_dir(root())
            .output()
            .expect("kubectl is installed on every machine")
    };
    let list = kubectl(&["plugin", "list"]);
    assert!(
        text(&list.stdout).contains("kubectl-trainplace"),
        "{}{}",
        text(&list.stdout),
        text(&list.stderr)
    );
    let ok = kubectl(&[
        "trainplace",
        "check",
        "-f",
        "examples/pods/llama3-jobset-pods.yaml",
    ]);
    assert_eq!(ok.status.code(), Some(0), "{}", text(&ok.stderr));
    assert!(text(&ok.stdout).contains("allowed (12 changes)"));
    let denied = kubectl(&[
        "trainplace",
        "check",
        "-f",
        "examples/pods/one-gpu-per-pod.yaml",
    ]);
    assert_eq!(denied.status.code(), Some(1));
}

/// The command-line flags that give `mutate` what a fixture's case runs under (as
/// crates/engine/tests/fixtures.rs gives it to the engine): its policy (written into
/// `policy_dir`), the submitter's groups, the namespace's labels, the cluster.
fn fixture_env(case: &Value, policy_dir: &Path) -> Vec<String> {
    let mut args = Vec::new();
    let policy = match (case["policyFile"].as_str(), case.get("policy")) {
        (Some(file), _) => Some(std::fs::read_to_string(root().join(file)).unwrap()),
        (None, Some(inline)) => Some(serde_yaml_ng::to_string(inline).unwrap()),
        (None, None) => None,
    };
    if let Some(policy) = policy {
        std::fs::create_dir_all(policy_dir).unwrap();
        std::fs::write(policy_dir.join("policy.yaml"), policy).unwrap();
        args.extend(["--policy-dir".into(), policy_dir.display().to_string()]);
    }
    for group in case["groups"].as_array().into_iter().flatten() {
        args.extend(["--group".into(), group.as_str().unwrap().to_string()]);
    }
    if let Some(labels) = case["namespaceLabels"].as_object() {
        let labels: Vec<String> = labels
            .iter()
            .map(|(k, v)| format!("{k}={}", v.as_str().unwrap()))
            .collect();
        args.extend(["--namespace-labels".into(), labels.join(",")]);
    }
    if let Some(cluster) = case["cluster"].as_str() {
        let dir = root().join("tests/fixtures/cluster").join(cluster);
        args.extend(["--cluster".into(), dir.display().to_string()]);
    }
    args
}

#[test]
fn every_mutated_pod_passes_the_official_schema_strictly() {
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    let mut denied = 0;
    for entry in std::fs::read_dir(root().join("tests/fixtures/pods")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let case: Value =
            serde_yaml_ng::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        if case["expect"].get("error").is_some() {
            continue;
        }
        let input = dir.path().join(format!("in-{name}"));
        // DRA templates submitted with the pod go in the same file, as a user would.
        let mut submitted = String::new();
        for o in case["objects"].as_array().into_iter().flatten() {
            submitted.push_str(&serde_yaml_ng::to_string(o).unwrap());
            submitted.push_str("---\n");
        }
        submitted.push_str(&serde_yaml_ng::to_string(&case["object"]).unwrap());
        std::fs::write(&input, submitted).unwrap();
        let mut args = vec![
            "mutate".to_string(),
            "-f".into(),
            input.display().to_string(),
        ];
        args.extend(fixture_env(
            &case,
            &dir.path().join(format!("policy-{name}")),
        ));
        let o = run(&args.iter().map(String::as_str).collect::<Vec<_>>(), None);
        // A denied pod is not written (it is no mutated pod to validate; the validator
        // would pass the empty output): exit 1, and no Pod on stdout (the DRA templates
        // submitted with it are).
        if case["expect"]["allowed"] == false {
            assert_eq!(o.status.code(), Some(1), "{name}: {}", text(&o.stderr));
            let out = text(&o.stdout);
            assert!(!out.contains("\nkind: Pod\n"), "{name}: {out}");
            denied += 1;
            continue;
        }
        assert_eq!(o.status.code(), Some(0), "{name}: {}", text(&o.stderr));
        let mut mutated = text(&o.stdout);
        assert!(mutated.contains("\nkind: Pod\n"), "{name}: {mutated}");
        // Unknown fields are preserved on purpose in that fixture; strict mode would
        // (rightly) reject them, so its mutation is validated without the invented
        // fields, each removed from the output (and each must be there to remove).
        if path.file_stem().unwrap() == "unknown-fields" {
            let mut pod: Value = serde_yaml_ng::from_str(&mutated).unwrap();
            for (parent, field) in [
                ("/metadata", "futureMeta"),
                ("/spec", "futureSchedulingHint"),
                ("/spec/containers/0", "fancyNewField"),
                ("/spec/containers/0/env/0", "futureEnvKnob"),
                ("/status", "futureStatus"),
            ] {
                let map = pod.pointer_mut(parent).and_then(Value::as_object_mut);
                assert!(
                    map.and_then(|m| m.remove(field)).is_some(),
                    "{parent}/{field} was not preserved:\n{mutated}"
                );
            }
            mutated = serde_yaml_ng::to_string(&pod).unwrap();
        }
        let out = dir.path().join(format!("out-{name}"));
        std::fs::write(&out, mutated).unwrap();
        files.push(out);
    }
    assert!(files.len() > 30, "only {} fixtures", files.len());
    assert!(denied > 10, "only {denied} denied fixtures");
    common::assert_strictly_valid("mutated pods", &files);
}

#[test]
fn mixed_kinds_in_one_file() {
    let mut all = Vec::new();
    let mut names: Vec<_> = std::fs::read_dir(root().join("examples/workloads"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    names.sort();
    names.push(root().join("examples/pods/inference.yaml"));
    for f in &names {
        all.extend(std::fs::read(f).unwrap());
        all.extend(b"\n---\n");
    }
    let o = run(&["mutate", "-f", "-", "-o", "report-json"], Some(&all));
    assert_eq!(o.status.code(), Some(1), "one PyTorchJob is denied");
    let entries: Vec<Value> = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(entries.len(), names.len());
    let kinds: Vec<&str> = entries
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    for k in [
        "Job",
        "JobSet",
        "PyTorchJob",
        "MPIJob",
        "TrainJob",
        "LeaderWorkerSet",
        "Pod",
    ] {
        assert!(kinds.contains(&k), "{k} missing from {kinds:?}");
    }
    let denied: Vec<&str> = entries
        .iter()
        .filter(|e| e["allowed"] == false)
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(denied, ["bert"]);
    let d = run(
        &["mutate", "-f", "examples/workloads/jobset.yaml", "--diff"],
        None,
    );
    // Changes: exit 1, as kubectl diff.
    assert_eq!(d.status.code(), Some(1), "{}", text(&d.stderr));
    assert!(
        text(&d.stdout).contains("+            hostIPC: true"),
        "{}",
        text(&d.stdout)
    );
}

/// `trainplace mutate -f x.yaml | kubectl apply -f -` must never apply a denied object:
/// stdout carries only allowed objects (what the real kubectl reads from it is checked
/// with `kubectl label --local`), stderr names what was held back and why.
#[test]
fn mutate_stdout_never_carries_a_denied_object() {
    let mut both = std::fs::read(root().join("examples/pods/llama3-jobset-pods.yaml")).unwrap();
    both.extend(b"\n---\n");
    both.extend(std::fs::read(root().join("examples/pods/one-gpu-per-pod.yaml")).unwrap());
    let o = run(&["mutate", "-f", "-"], Some(&both));
    assert_eq!(o.status.code(), Some(1), "a denial still fails the command");
    let err = text(&o.stderr);
    assert!(
        err.contains("DENIED") && err.contains("not written to stdout (denied, reasons above)"),
        "{err}"
    );
    let mut kubectl = Command::new("kubectl")
        .args([
            "label",
            "--local",
            "-o",
            "name",
            "-f",
            "-",
            "trainplace-test-none-",
        ])
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl is installed");
    {
        use std::io::Write;
        kubectl.stdin.take().unwrap().write_all(&o.stdout).unwrap();
    }
    let read = kubectl.wait_with_output().unwrap();
    assert!(read.status.success(), "{}", text(&read.stderr));
    assert_eq!(
        text(&read.stdout),
        "pod/llama3-8b-node-0-0-x0k2p\npod/llama3-8b-node-1-0-x1k2p\n",
        "kubectl would apply only the two allowed pods"
    );

    let denied_only = run(
        &["mutate", "-f", "examples/pods/one-gpu-per-pod.yaml"],
        None,
    );
    assert_eq!(denied_only.status.code(), Some(1));
    assert!(
        denied_only.stdout.is_empty(),
        "{}",
        text(&denied_only.stdout)
    );
    assert!(
        text(&denied_only.stderr).contains("stdout is empty: nothing may be applied"),
        "{}",
        text(&denied_only.stderr)
    );
}

/// `--cluster DIR` reads the Trainer runtimes there (trainingruntimes.json,
/// clustertrainingruntimes.json): a TrainJob of 4 x 1 GPU that names a p5 runtime is
/// denied with the runtime's instance type; without the directory it is not.
#[test]
fn cluster_dir_runtimes_are_read_for_trainjobs() {
    let job = b"apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: llama, namespace: ml}
spec:
  runtimeRef: {name: torch-distributed-p5}
  trainer:
    numNodes: 4
    resourcesPerNode:
      limits: {nvidia.com/gpu: 1}
      requests: {nvidia.com/gpu: 1}
";
    let with = run(
        &[
            "check",
            "-f",
            "-",
            "--cluster",
            "tests/fixtures/cluster/eks-p5-runtimes",
        ],
        Some(job),
    );
    let out = text(&with.stdout);
    assert_eq!(with.status.code(), Some(1), "{out}{}", text(&with.stderr));
    assert!(out.contains("4 pods x 1 GPU on p5.48xlarge"), "{out}");
    assert!(
        out.contains(
            "judged with the node template of ClusterTrainingRuntime torch-distributed-p5"
        ),
        "{out}"
    );
    let without = run(&["check", "-f", "-"], Some(job));
    assert_eq!(without.status.code(), Some(0), "{}", text(&without.stdout));
}

/// `-f DIR` reads the directory's manifests as kubectl does; an empty one is an error.
#[test]
fn a_directory_is_read_like_kubectl_reads_it() {
    let out = run(&["check", "-f", "tests/fixtures/upstream/lws/sglang"], None);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("LeaderWorkerSet default/sglang")
            && stdout.contains("Service default/sglang-leader"),
        "{stdout}"
    );
    let empty = tempfile::tempdir().unwrap();
    let none = run(&["check", "-f", &empty.path().to_string_lossy()], None);
    assert_eq!(none.status.code(), Some(2));
    assert!(
        text(&none.stderr).contains("a directory with no .yaml, .yml or .json files"),
        "{}",
        text(&none.stderr)
    );
}

/// Attack on agreement: a Deployment, StatefulSet or ReplicaSet whose template runs
/// `torchrun --nnodes=4` on one GPU. trainplace does not judge the workload itself, but
/// the webhook refuses every pod its controller makes; `check` must say so (exit 1),
/// not "allowed, does not handle".
#[test]
fn check_says_what_the_webhook_does_to_the_pods_a_deployment_makes() {
    for kind in ["Deployment", "StatefulSet", "ReplicaSet"] {
        let doc = format!(
            "apiVersion: apps/v1
kind: {kind}
metadata: {{name: ranks, namespace: team-a}}
spec:
  replicas: 4
  selector: {{matchLabels: {{app: ranks}}}}
  template:
    metadata: {{labels: {{app: ranks}}}}
    spec:
      containers:
      - name: trainer
        image: train:1
        command: [torchrun, --nnodes=4, --rdzv-endpoint=ranks-0.ranks:29400, train.py]
        resources: {{limits: {{nvidia.com/gpu: 1}}}}
      nodeSelector: {{node.kubernetes.io/instance-type: p5.48xlarge}}
"
        );
        let o = run(&["check", "-f", "-"], Some(doc.as_bytes()));
        let out = text(&o.stdout);
        assert_eq!(o.status.code(), Some(1), "{kind}: {out}");
        assert!(
            out.contains("[partial-node] spec.template (Pods it makes)")
                && out.contains("4 pods x 1 GPU"),
            "{kind}: {out}"
        );
    }
    // A whole-node template is not refused: its pods get the layout when created.
    let ok = "apiVersion: apps/v1
kind: Deployment
metadata: {name: serve, namespace: team-a}
spec:
  selector: {matchLabels: {app: serve}}
  template:
    metadata: {labels: {app: serve}}
    spec:
      containers:
      - {name: server, image: serve:1, resources: {limits: {nvidia.com/gpu: 8}}}
      nodeSelector: {node.kubernetes.io/instance-type: p5.48xlarge}
";
    let o = run(&["check", "-f", "-"], Some(ok.as_bytes()));
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stdout));
}
