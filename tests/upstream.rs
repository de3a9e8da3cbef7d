//! Manifests written by others (tests/fixtures/upstream, see its README for sources and
//! licenses) through `check` and `mutate`: no panic, no input error, and an object is
//! `invalid-object` only where the upstream file is a template that cannot be applied
//! as it is. The YAML round trip over these files is in tests/yaml_round_trip.rs.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Files that are not meant to be applied as they are, and why.
const NOT_APPLICABLE_AS_IS: [(&str, &str); 6] = [
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
    assert!(files.len() >= 40, "only {} upstream manifests", files.len());
    let mut objects = 0;
    for path in &files {
        let rel = path
            .strip_prefix(root().join("tests/fixtures/upstream"))
            .unwrap()
            .to_string_lossy()
            .to_string();
        for cmd in ["check", "mutate"] {
            let o = Command::new(env!("CARGO_BIN_EXE_trainplace"))
                .args([cmd, "-f", path.to_str().unwrap(), "-o", "json"])
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
    assert!(objects > 2 * 45, "{objects} objects judged");
}
