//! The CLI keeps kubectl's habits: `-o yaml|json|name` where objects are printed (the
//! report has its own `-o report-json|report-yaml`), `--diff` exits 1 when something
//! would change, `-f` repeats and `-R` walks directories, `--warnings-as-errors` for CI,
//! `audit --kubeconfig --context`, cluster-scoped objects without a namespace, a warning
//! naming the closest annotation for a misspelt `trainplace.io/` one, colour only on a
//! terminal and never with NO_COLOR, and progress on stderr (a terminal's) for a live
//! audit.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};

use common::root;
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_trainplace");

fn run(args: &[&str]) -> Output {
    run_env(args, &[])
}

fn run_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .current_dir(root())
        .stdin(Stdio::null())
        .env_remove("NO_COLOR")
        .env_remove("CLICOLOR_FORCE")
        .env_remove("KUBECONFIG");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("binary runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).to_string()
}

fn code(o: &Output) -> i32 {
    o.status.code().expect("exited")
}

#[test]
fn mutate_o_json_is_a_list_of_the_mutated_objects() {
    let o = run(&[
        "mutate",
        "-f",
        "examples/workloads/pytorchjob.yaml",
        "-o",
        "json",
    ]);
    assert_eq!(code(&o), 0, "{}", text(&o.stderr));
    let list: Value = serde_json::from_slice(&o.stdout).expect("JSON on stdout");
    assert_eq!(list["kind"], "List");
    assert_eq!(list["apiVersion"], "v1");
    let items = list["items"].as_array().unwrap();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["kind"], "PyTorchJob");
    let template = &items[0]["spec"]["pytorchReplicaSpecs"]["Worker"]["template"];
    assert!(
        template["metadata"]["annotations"]["trainplace.io/mutated"].is_string(),
        "the object as mutated: {template}"
    );
    // The report is on stderr, as for the YAML objects.
    assert!(text(&o.stderr).contains("PyTorchJob ml/llama: allowed"));
}

#[test]
fn mutate_o_json_leaves_denied_objects_out() {
    let o = run(&[
        "mutate",
        "-f",
        "examples/pods/one-gpu-per-pod.yaml",
        "-o",
        "json",
    ]);
    assert_eq!(code(&o), 1);
    let list: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(list["items"].as_array().unwrap().len(), 0);
    assert!(text(&o.stderr).contains("not written to stdout"));
}

#[test]
fn the_report_has_its_own_format() {
    for cmd in ["check", "mutate"] {
        let o = run(&[
            cmd,
            "-f",
            "examples/workloads/pytorchjob.yaml",
            "-o",
            "report-json",
        ]);
        assert_eq!(code(&o), 0, "{cmd}");
        let report: Value = serde_json::from_slice(&o.stdout).unwrap();
        let entry = &report[0];
        assert_eq!(entry["kind"], "PyTorchJob", "{cmd}");
        assert_eq!(entry["allowed"], true);
        assert!(entry["patch"].is_array() && entry["findings"].is_array());
        let o = run(&[
            cmd,
            "-f",
            "examples/workloads/pytorchjob.yaml",
            "-o",
            "report-yaml",
        ]);
        assert!(text(&o.stdout).contains("allowed: true"), "{cmd}");
    }
    // check's json and yaml stay the report.
    let o = run(&[
        "check",
        "-f",
        "examples/workloads/pytorchjob.yaml",
        "-o",
        "json",
    ]);
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report[0]["allowed"], true);
}

#[test]
fn change_lists_name_the_template_each_change_is_made_in() {
    let file = "examples/workloads/pytorchjob-one-gpu.yaml";
    let out = run(&["check", "-f", file]);
    let report = text(&out.stdout);
    let master = "  in spec.pytorchReplicaSpecs.Master.template.spec:\n";
    let worker = "  in spec.pytorchReplicaSpecs.Worker.template.spec:\n";
    let (Some(m), Some(w)) = (report.find(master), report.find(worker)) else {
        panic!("no template headings in:\n{report}");
    };
    assert!(m < w, "Master's changes come first:\n{report}");
    // Each heading is followed by that template's own change lines.
    for block in [&report[m + master.len()..w], &report[w + worker.len()..]] {
        assert!(block.starts_with("    + "), "{block}");
        assert!(block.contains("+ hostIPC=true"), "{block}");
    }

    let out = run(&["mutate", "-o", "report-json", "-f", file]);
    let reports: Value = serde_json::from_slice(&out.stdout).expect("report-json is JSON");
    let changes = reports[0]["changes"].as_array().expect("changes");
    let sites: Vec<&str> = changes.iter().filter_map(|c| c["site"].as_str()).collect();
    assert_eq!(sites.len(), changes.len(), "every change carries its site");
    assert!(sites.contains(&"spec.pytorchReplicaSpecs.Master.template.spec"));
    assert!(sites.contains(&"spec.pytorchReplicaSpecs.Worker.template.spec"));
}

#[test]
fn o_name_prints_resource_group_slash_name() {
    let o = run(&["mutate", "-f", "examples/workloads/", "-o", "name"]);
    assert_eq!(code(&o), 1, "one example is denied");
    let names = text(&o.stdout);
    assert!(names.contains("pytorchjob.kubeflow.org/llama\n"), "{names}");
    assert!(names.contains("job.batch/llama-pretrain\n"), "{names}");
    assert!(
        !names.contains("pytorchjob.kubeflow.org/bert\n"),
        "the denied one is not printed: {names}"
    );
    let o = run(&["check", "-f", "examples/pods/inference.yaml", "-o", "name"]);
    assert_eq!(text(&o.stdout), "pod/vllm-7d9f-abcde\n");
}

#[test]
fn diff_exits_1_when_something_would_change() {
    for cmd in ["check", "mutate"] {
        let o = run(&[cmd, "-f", "examples/workloads/jobset.yaml", "--diff"]);
        assert_eq!(code(&o), 1, "{cmd}: changes");
        let out = text(&o.stdout);
        assert!(out.starts_with("--- a/JobSet ml/llama3-8b\n"), "{out}");
        assert!(text(&o.stderr).contains("JobSet ml/llama3-8b: allowed"));
        let o = run(&[cmd, "-f", "examples/pods/inference.yaml", "--diff"]);
        assert_eq!(code(&o), 0, "{cmd}: nothing changes");
        assert!(o.stdout.is_empty());
    }
    // --diff prints a diff: no other output format with it.
    let o = run(&[
        "check",
        "-f",
        "examples/workloads/jobset.yaml",
        "--diff",
        "-o",
        "json",
    ]);
    assert_eq!(code(&o), 2);
    assert!(
        text(&o.stderr).contains("cannot be used with"),
        "{}",
        text(&o.stderr)
    );
}

fn tree_with_a_denied_job_below(dir: &Path) {
    std::fs::create_dir_all(dir.join("team/sub")).unwrap();
    std::fs::copy(
        root().join("examples/workloads/pytorchjob.yaml"),
        dir.join("allowed.yaml"),
    )
    .unwrap();
    std::fs::copy(
        root().join("examples/workloads/pytorchjob-one-gpu.yaml"),
        dir.join("team/sub/denied.yaml"),
    )
    .unwrap();
}

#[test]
fn recursive_reads_subdirectories_and_says_what_it_did_not_read() {
    let dir = tempfile::tempdir().unwrap();
    tree_with_a_denied_job_below(dir.path());
    let d = dir.path().to_str().unwrap();

    let o = run(&["check", "-f", d, "-R"]);
    assert_eq!(code(&o), 1, "the denied job below is read");
    assert!(text(&o.stdout).contains("PyTorchJob ml/bert: DENIED"));
    let o = run(&["check", "-f", d, "--recursive", "-o", "name"]);
    assert_eq!(code(&o), 1);

    let o = run(&["check", "-f", d]);
    assert_eq!(code(&o), 0, "only the top directory's file");
    let err = text(&o.stderr);
    assert!(
        err.contains(&format!("note: {d}/team: a subdirectory, not read (-R")),
        "{err}"
    );

    // Only subdirectories: nothing to read without -R, and the message says why.
    let o = run(&["check", "-f", &format!("{d}/team")]);
    assert_eq!(code(&o), 2);
    assert!(
        text(&o.stderr).contains("read with -R"),
        "{}",
        text(&o.stderr)
    );
}

/// Issue 41: one file of a directory that is not Kubernetes (a Helm values.yaml) is
/// reported and the others are judged, as `kubectl apply -f DIR` goes on past a bad file
/// (exit 2 says something was not read); trainplace's own Policy file is not judged as a
/// workload but named as configuration.
#[test]
fn a_directory_with_a_values_file_and_a_policy_judges_the_manifests() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for (from, to) in [
        ("examples/workloads/pytorchjob-one-gpu.yaml", "denied.yaml"),
        ("charts/trainplace/values.yaml", "values.yaml"),
        ("policies/default.yaml", "policy.yaml"),
        ("examples/workloads/pytorchjob.yaml", "z-allowed.yaml"),
    ] {
        std::fs::copy(root().join(from), d.join(to)).unwrap();
    }
    let o = run(&["check", "-f", d.to_str().unwrap()]);
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(code(&o), 2, "a file was not read: {err}");
    assert!(out.contains("PyTorchJob ml/bert: DENIED"), "{out}");
    assert!(
        out.matches("PyTorchJob ").count() == 2,
        "both manifests judged, nothing else: {out}"
    );
    assert!(!out.contains("Policy"), "the Policy is not judged: {out}");
    assert!(
        err.contains("values.yaml: document 1") && err.contains("(the other files are judged)"),
        "{err}"
    );
    assert!(
        err.contains(
            "policy.yaml: document 1: a trainplace Policy, configuration rather than a workload"
        ),
        "{err}"
    );
    // Named on its own, an unreadable file still stops the command.
    let o = run(&["check", "-f", d.join("values.yaml").to_str().unwrap()]);
    assert_eq!(code(&o), 2);
    assert!(text(&o.stdout).is_empty());
}

/// The README's `trainplace check -f examples/ -R` reads every file under examples/ as
/// manifests: none is refused as unreadable (exit 2); the denied examples give exit 1.
#[test]
fn the_examples_directory_is_all_manifests() {
    let o = run(&["check", "-f", "examples/", "-R"]);
    assert_eq!(code(&o), 1, "{}", text(&o.stderr));
    assert!(!text(&o.stderr).contains("error:"), "{}", text(&o.stderr));
}

#[test]
fn filename_repeats() {
    let o = run(&[
        "check",
        "-f",
        "examples/pods/inference.yaml",
        "-f",
        "examples/pods/one-gpu-per-pod.yaml",
    ]);
    assert_eq!(code(&o), 1);
    let out = text(&o.stdout);
    let inference = out.find("Pod team-a/vllm-7d9f-abcde").expect("first file");
    let denied = out
        .find("Pod team-a/bert-worker-0: DENIED")
        .expect("second file");
    assert!(inference < denied, "in the order given");
}

#[test]
fn warnings_as_errors() {
    // hostNetwork without ClusterFirstWithHostNet on a JobSet's training pod: allowed
    // with a warning.
    let pod = r#"
apiVersion: v1
kind: Pod
metadata:
  name: p-0
  namespace: team-a
  labels: {jobset.sigs.k8s.io/jobset-name: llama3-8b}
spec:
  hostNetwork: true
  nodeSelector: {node.kubernetes.io/instance-type: p5.48xlarge}
  containers:
  - name: trainer
    image: x
    command: [torchrun]
    resources:
      limits: {nvidia.com/gpu: 8, memory: 512Gi}
"#;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pod.yaml");
    std::fs::write(&file, pod).unwrap();
    let f = file.to_str().unwrap();
    let o = run(&["check", "-f", f]);
    assert_eq!(code(&o), 0, "{}", text(&o.stdout));
    assert!(text(&o.stdout).contains("[host-network-dns]"));
    let o = run(&["check", "-f", f, "--warnings-as-errors"]);
    assert_eq!(code(&o), 1);
    let o = run(&[
        "check",
        "-f",
        "examples/workloads/pytorchjob.yaml",
        "--warnings-as-errors",
    ]);
    assert_eq!(code(&o), 0, "no warning, no error");
}

#[test]
fn a_misspelt_annotation_gets_the_closest_name() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("job.yaml");
    let job = std::fs::read_to_string(root().join("examples/workloads/pytorchjob-one-gpu.yaml"))
        .unwrap()
        .replacen(
            "metadata:\n",
            "metadata:\n  annotations:\n    trainplace.io/allow-partial-nodes: \"true\"\n",
            1,
        );
    std::fs::write(&file, job).unwrap();
    let o = run(&["check", "-f", file.to_str().unwrap()]);
    let err = text(&o.stderr);
    assert!(
        err.contains("warning: PyTorchJob ml/bert: metadata.annotations: trainplace.io/allow-partial-nodes is not an annotation trainplace reads, so it has no effect; did you mean trainplace.io/allow-partial-node?"),
        "{err}"
    );
    assert_eq!(code(&o), 1, "still denied: the misspelt opt-in did nothing");
}

#[test]
fn cluster_scoped_objects_have_no_namespace() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("runtime.yaml");
    std::fs::write(
        &file,
        "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: ClusterTrainingRuntime\nmetadata: {name: torch}\nspec: {template: {spec: {replicatedJobs: []}}}\n---\napiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: high}\nvalue: 1000\n",
    )
    .unwrap();
    let f = file.to_str().unwrap();
    let out = text(&run(&["check", "-f", f]).stdout);
    assert!(
        out.contains("ClusterTrainingRuntime torch: allowed"),
        "{out}"
    );
    assert!(out.contains("PriorityClass high: allowed"), "{out}");
    assert!(!out.contains("default/"), "{out}");
    let report: Value =
        serde_json::from_slice(&run(&["check", "-f", f, "-o", "report-json"]).stdout).unwrap();
    for entry in report.as_array().unwrap() {
        assert!(entry.get("namespace").is_none(), "{entry}");
    }
    let report: Value = serde_json::from_slice(
        &run(&[
            "check",
            "-f",
            "examples/pods/inference.yaml",
            "-o",
            "report-json",
        ])
        .stdout,
    )
    .unwrap();
    assert_eq!(
        report[0]["namespace"], "team-a",
        "namespaced objects keep theirs"
    );
}

fn has_escapes(b: &[u8]) -> bool {
    b.contains(&0x1b)
}

#[test]
fn colour_only_on_a_terminal_and_never_with_no_color() {
    // Piped: no escape codes, in the report or in clap's messages.
    let o = run(&["check", "-f", "examples/pods/one-gpu-per-pod.yaml"]);
    assert!(!has_escapes(&o.stdout) && !has_escapes(&o.stderr));
    let o = run(&["check", "--no-such-flag"]);
    assert_eq!(code(&o), 2);
    assert!(!has_escapes(&o.stderr), "{}", text(&o.stderr));
    // Colour, where there is any (clap's errors and help), is what a terminal gets:
    // forced, it appears; NO_COLOR wins over forcing.
    let o = run_env(&["check", "--no-such-flag"], &[("CLICOLOR_FORCE", "1")]);
    assert!(has_escapes(&o.stderr), "forced colour: {}", text(&o.stderr));
    let o = run_env(
        &["check", "--no-such-flag"],
        &[("CLICOLOR_FORCE", "1"), ("NO_COLOR", "1")],
    );
    assert!(!has_escapes(&o.stderr), "NO_COLOR: {}", text(&o.stderr));
}

/// A stand-in API server on plain HTTP that answers every request with an empty list,
/// recording the paths it was asked for.
fn fake_apiserver() -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let paths = Arc::new(Mutex::new(Vec::new()));
    let seen = paths.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let seen = seen.clone();
            std::thread::spawn(move || serve(stream, &seen));
        }
    });
    (url, paths)
}

fn serve(stream: std::net::TcpStream, seen: &Mutex<Vec<String>>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
            return;
        }
        let mut length = 0usize;
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            if header == "\r\n" {
                break;
            }
            if let Some(v) = header.to_ascii_lowercase().strip_prefix("content-length:") {
                length = v.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; length];
        let _ = reader.read_exact(&mut body);
        let path = request_line
            .split_whitespace()
            .nth(1)
            .unwrap_or("")
            .to_string();
        seen.lock().unwrap().push(path);
        let list =
            r#"{"apiVersion":"v1","kind":"List","metadata":{"resourceVersion":"1"},"items":[]}"#;
        let answer = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{list}",
            list.len()
        );
        if writer.write_all(answer.as_bytes()).is_err() {
            return;
        }
    }
}

fn kubeconfig(dir: &Path, one: &str, two: &str) -> std::path::PathBuf {
    let file = dir.join("kubeconfig");
    std::fs::write(
        &file,
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: one\n\
             clusters:\n- name: one\n  cluster: {{server: \"{one}\"}}\n- name: two\n  cluster: {{server: \"{two}\"}}\n\
             users:\n- name: u\n  user: {{token: t}}\n\
             contexts:\n- name: one\n  context: {{cluster: one, user: u}}\n- name: two\n  context: {{cluster: two, user: u}}\n"
        ),
    )
    .unwrap();
    file
}

#[test]
fn audit_takes_kubeconfig_and_context() {
    let (one, one_seen) = fake_apiserver();
    let (two, two_seen) = fake_apiserver();
    let dir = tempfile::tempdir().unwrap();
    let config = kubeconfig(dir.path(), &one, &two);
    let config = config.to_str().unwrap();

    let o = run(&["audit", "--kubeconfig", config, "--context", "two"]);
    assert_eq!(code(&o), 0, "{}", text(&o.stderr));
    assert!(one_seen.lock().unwrap().is_empty(), "context one not used");
    let asked = two_seen.lock().unwrap().clone();
    assert!(
        asked.iter().any(|p| p.starts_with("/api/v1/pods?")),
        "{asked:?}"
    );
    assert!(
        asked.iter().any(|p| p.starts_with("/api/v1/nodes?")),
        "{asked:?}"
    );
    // Piped stderr: no progress.
    assert!(!text(&o.stderr).contains("listing"), "{}", text(&o.stderr));

    let o = run(&["audit", "--kubeconfig", config]);
    assert_eq!(code(&o), 0, "{}", text(&o.stderr));
    assert!(!one_seen.lock().unwrap().is_empty(), "the current context");

    // The same context through $KUBECONFIG.
    let before = two_seen.lock().unwrap().len();
    let o = run_env(&["audit", "--context", "two"], &[("KUBECONFIG", config)]);
    assert_eq!(code(&o), 0, "{}", text(&o.stderr));
    assert!(two_seen.lock().unwrap().len() > before);

    let o = run(&["audit", "--kubeconfig", config, "--context", "three"]);
    assert_eq!(code(&o), 2);
    assert!(text(&o.stderr).contains("three"), "{}", text(&o.stderr));
}

#[test]
fn a_live_audit_shows_progress_on_a_terminal() {
    let (url, _) = fake_apiserver();
    let dir = tempfile::tempdir().unwrap();
    let config = kubeconfig(dir.path(), &url, &url);
    // script(1) gives the command a terminal; what it printed comes back on stdout.
    let command = format!("{BIN} audit --kubeconfig {}", config.display());
    let o = Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .current_dir(root())
        .stdin(Stdio::null())
        .output()
        .expect("script(1) runs (util-linux)");
    let seen = text(&o.stdout);
    assert!(o.status.success(), "{seen}");
    // First where every pod runs (the inventory), then each kind judged page by page.
    assert!(seen.contains("audit: reading nodes (2/22)"), "{seen}");
    assert!(seen.contains("audit: reading pods (3/22): 0"), "{seen}");
    assert!(seen.contains("audit: judging pods (7/22)"), "{seen}");
    assert!(
        seen.contains("audit: judging hyperpodpytorchjobs (22/22)"),
        "{seen}"
    );
}

/// `--policy-dir` takes one Policy file as well as a directory: the README's strict
/// examples.
#[test]
fn policy_dir_takes_one_policy_file() {
    let strict = "examples/policy-strict.yaml";
    let o = run(&[
        "check",
        "--policy-dir",
        strict,
        "-f",
        "examples/pods/inference.yaml",
    ]);
    assert_eq!(code(&o), 1, "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("strict mode"),
        "{}",
        text(&o.stdout)
    );
    let o = run(&[
        "check",
        "--policy-dir",
        strict,
        "-f",
        "examples/workloads/job.yaml",
    ]);
    assert_eq!(code(&o), 0, "{}{}", text(&o.stdout), text(&o.stderr));
}
