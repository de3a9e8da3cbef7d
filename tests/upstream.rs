//! Manifests written by others (tests/fixtures/upstream, see its README for sources and
//! licenses) through `check` and `mutate`: no panic, no input error, and an object is
//! `invalid-object` only where the upstream file is a template that cannot be applied
//! as it is; a core object (Pod, Job, Deployment, Service) that passes the official
//! schema as kubectl reads it still passes after mutation. The YAML round trip over
//! these files is in tests/yaml_round_trip.rs.

mod common;

use common::root;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// Files that are not meant to be applied as they are, and why.
const NOT_APPLICABLE_AS_IS: [(&str, &str); 8] = [
    (
        "aws/pytorch/FSDP/llama3_1_8b-fsdp-hpto.yaml",
        "replicas: $NUM_NODES (envsubst template)",
    ),
    (
        "aws/pytorch/verl/rlvr/setup/raycluster.yaml",
        "replicas: PLACEHOLDER_NUM_NODES (sed template)",
    ),
    (
        "aws/pytorch/FSDP/llama2_7b-fsdp.yaml",
        "replicas: $NUM_NODES (envsubst template)",
    ),
    (
        "aws/pytorch/FSDP/llama3_1_70b-fsdp.yaml",
        "replicas: $NUM_NODES (envsubst template)",
    ),
    (
        "aws/pytorch/FSDP/llama3_1_8b-fsdp.yaml",
        "replicas: $NUM_NODES (envsubst template)",
    ),
    (
        "aws/pytorch/FSDP/llama3_2_1b-fsdp.yaml",
        "replicas: $NUM_NODES (envsubst template)",
    ),
    (
        "aws/pytorch/FSDP/mistral_8x7b-fsdp.yaml",
        "replicas: $NUM_NODES (envsubst template)",
    ),
    (
        "aws/4.validation_and_observability/5.nsight/EKS/fsdp.yaml",
        "nvidia.com/gpu: null (the GPU count is left blank)",
    ),
];

fn manifests() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|e| e == "yaml") {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(&root().join("tests/fixtures/upstream"), &mut out);
    out.sort();
    out
}

#[test]
fn every_upstream_manifest_is_judged_without_input_errors() {
    let files = manifests();
    assert!(files.len() >= 50, "only {} upstream manifests", files.len());
    let mut objects = 0;
    for path in &files {
        let rel = path
            .strip_prefix(root().join("tests/fixtures/upstream"))
            .unwrap()
            .to_string_lossy()
            .to_string();
        for cmd in ["check", "mutate"] {
            let o = Command::new(env!("CARGO_BIN_EXE_trainplace"))
                .args([cmd, "-f", path.to_str().unwrap(), "-o", "report-json"])
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(
                matches!(o.status.code(), Some(0 | 1)),
                "{cmd} {rel}: exit {:?}: {err}",
                o.status.code()
            );
            assert!(!err.contains("panicked"), "{cmd} {rel}: {err}");
            let entries: Vec<Value> = serde_json::from_slice(&o.stdout).unwrap();
            assert!(!entries.is_empty(), "{rel}: no objects");
            objects += entries.len();
            let invalid: Vec<&Value> = entries
                .iter()
                .flat_map(|e| e["findings"].as_array().unwrap())
                .filter(|f| f["rule"] == "invalid-object")
                .collect();
            let expected = NOT_APPLICABLE_AS_IS.iter().any(|(f, _)| *f == rel);
            assert_eq!(
                !invalid.is_empty(),
                expected,
                "{cmd} {rel}: invalid-object findings {invalid:?}"
            );
        }
    }
    assert!(objects > 2 * 55, "{objects} objects judged");
}

/// What kubectl reads from `path` (`kubectl label --local`, no cluster needed).
fn kubectl_reading(path: &Path) -> Vec<Value> {
    let o = Command::new("kubectl")
        .args(["label", "--local", "-o", "json", "-f"])
        .arg(path)
        .arg("trainplace-test-none-")
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .output()
        .expect("kubectl is installed");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::Deserializer::from_slice(&o.stdout)
        .into_iter::<Value>()
        .map(Result::unwrap)
        .map(|mut v| {
            if v["metadata"]["labels"] == serde_json::json!({}) {
                v["metadata"].as_object_mut().unwrap().remove("labels");
            }
            v
        })
        .collect()
}

/// Files `kubernetes-validate --strict` rejects among `files`.
fn invalid_files(files: &[PathBuf]) -> BTreeSet<String> {
    let o = common::strict_validate(files);
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .chain(String::from_utf8_lossy(&o.stderr).lines())
        .filter_map(|l| l.strip_prefix("ERROR ")?.split_whitespace().next())
        .map(|f| {
            Path::new(f)
                .file_name()
                .unwrap()
                .to_string_lossy()
                .to_string()
        })
        .collect()
}

#[test]
fn mutation_never_makes_a_valid_core_object_invalid() {
    let scratch = tempfile::tempdir().unwrap();
    let (before_dir, after_dir) = (scratch.path().join("before"), scratch.path().join("after"));
    std::fs::create_dir_all(&before_dir).unwrap();
    std::fs::create_dir_all(&after_dir).unwrap();
    let (mut before, mut after) = (Vec::new(), Vec::new());
    for (i, path) in manifests().iter().enumerate() {
        let o = Command::new(env!("CARGO_BIN_EXE_trainplace"))
            .args(["mutate", "-f", path.to_str().unwrap(), "-o", "report-json"])
            .output()
            .unwrap();
        let entries: Vec<Value> = serde_json::from_slice(&o.stdout).unwrap();
        let originals = kubectl_reading(path);
        // zip stops at the shorter side: a missing entry would go unchecked.
        assert_eq!(originals.len(), entries.len(), "{}", path.display());
        for (j, (original, entry)) in originals.iter().zip(&entries).enumerate() {
            let core = matches!(
                original["apiVersion"].as_str(),
                Some("v1" | "apps/v1" | "batch/v1")
            );
            if !core || entry["allowed"] != true {
                continue;
            }
            let name = format!("{i}-{j}.json");
            let (b, a) = (before_dir.join(&name), after_dir.join(&name));
            std::fs::write(&b, serde_json::to_vec(original).unwrap()).unwrap();
            std::fs::write(&a, serde_json::to_vec(&entry["object"]).unwrap()).unwrap();
            before.push(b);
            after.push(a);
        }
    }
    assert!(after.len() >= 6, "only {} core objects", after.len());
    let was_invalid = invalid_files(&before);
    let now_invalid = invalid_files(&after);
    let broken: Vec<&String> = now_invalid.difference(&was_invalid).collect();
    assert!(
        broken.is_empty(),
        "mutation made these valid objects invalid: {broken:?} (of {})",
        after.len()
    );
    assert!(
        was_invalid.len() < before.len(),
        "the schema check rejects everything: {was_invalid:?}"
    );
}

/// The Ray, Volcano, HyperPod, PaddlePaddle and Trainer runtime examples are judged as
/// their kinds (sites found), not passed through with a "does not handle" note.
#[test]
fn upstream_examples_of_the_newer_kinds_are_understood() {
    let kinds = [
        ("ray.io/v1", "RayCluster"),
        ("ray.io/v1", "RayJob"),
        ("ray.io/v1", "RayService"),
        ("batch.volcano.sh/v1alpha1", "Job"),
        ("sagemaker.amazonaws.com/v1", "HyperPodPyTorchJob"),
        ("kubeflow.org/v1", "PaddleJob"),
        ("trainer.kubeflow.org/v1alpha1", "ClusterTrainingRuntime"),
    ];
    let mut seen = BTreeSet::new();
    for path in manifests() {
        let o = Command::new(env!("CARGO_BIN_EXE_trainplace"))
            .args(["check", "-f", path.to_str().unwrap(), "-o", "json"])
            .output()
            .unwrap();
        let entries: Vec<Value> = serde_json::from_slice(&o.stdout).unwrap();
        let originals = kubectl_reading(&path);
        assert_eq!(originals.len(), entries.len(), "{}", path.display());
        for (original, entry) in originals.iter().zip(&entries) {
            let key = (
                original["apiVersion"].as_str().unwrap_or(""),
                original["kind"].as_str().unwrap_or(""),
            );
            if !kinds.contains(&key) {
                continue;
            }
            let warnings = entry["warnings"].to_string();
            assert!(
                !warnings.contains("does not handle"),
                "{}: {key:?} passed through: {warnings}",
                path.display()
            );
            seen.insert(key.1.to_string());
        }
    }
    let want: BTreeSet<String> = kinds.iter().map(|(_, k)| k.to_string()).collect();
    assert_eq!(seen, want, "upstream examples of every newer kind");
}

/// A GPU template of an upstream example on a known instance type gets its layout: the
/// PaddleJob GPU example on p5 (its instance type given as the annotation).
#[test]
fn upstream_paddle_gpu_example_is_laid_out_on_p5() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(
        root().join("tests/fixtures/upstream/training-operator/paddlepaddle/simple-gpu.yaml"),
    )
    .unwrap();
    let annotated = text.replacen(
        "  namespace: kubeflow\n",
        "  namespace: kubeflow\n  annotations:\n    trainplace.io/instance-type: p5.48xlarge\n",
        1,
    );
    assert_ne!(annotated, text, "the example's metadata moved");
    let file = dir.path().join("paddle.yaml");
    std::fs::write(&file, annotated).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_trainplace"))
        .args(["mutate", "-f", file.to_str().unwrap(), "-o", "report-json"])
        .output()
        .unwrap();
    let entries: Vec<Value> = serde_json::from_slice(&o.stdout).unwrap();
    let changes = entries[0]["changes"].to_string();
    // 2 of 8 GPUs per pod, 2 pods: denied as partial-node, with its EFA share laid out.
    assert_eq!(entries[0]["allowed"], false, "{entries:?}");
    assert!(changes.contains("vpc.amazonaws.com/efa=8"), "{changes}");
}

/// GPU training examples that run on real clusters as written are allowed (at most
/// warnings): NeMo-RL's GRPO RayJob (8-GPU workers), the TRL elastic HyperPodPyTorchJob
/// on g6e, KubeRay's image-classifier RayJob, the torchtune Qwen runtime.
#[test]
fn upstream_gpu_examples_that_run_as_written_are_allowed() {
    for file in [
        "aws/megatron/nemo-rl/rayjob-grpo.yaml",
        "aws/pytorch/trl/train-lora-hyperpod-elastic-g6e.yaml",
        "kuberay/pytorch-resnet-image-classifier/ray-job.pytorch-image-classifier.yaml",
        "trainer/runtimes/torchtune/qwen2_5/qwen2_5_1.5B.yaml",
    ] {
        let path = root().join("tests/fixtures/upstream").join(file);
        let o = Command::new(env!("CARGO_BIN_EXE_trainplace"))
            .args(["check", "-f", path.to_str().unwrap(), "-o", "json"])
            .output()
            .unwrap();
        let entries: Vec<Value> = serde_json::from_slice(&o.stdout).unwrap();
        assert!(!entries.is_empty(), "{file}");
        for e in &entries {
            assert_eq!(e["allowed"], true, "{file}: {e}");
        }
    }
}
