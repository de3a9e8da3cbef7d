//! Every YAML file the advisor emits reads the same in a YAML 1.1 reader (PyYAML
//! `safe_load_all`, as the Kubernetes Python client reads) as in serde_yaml_ng (YAML 1.2):
//! no string turns into a datetime, a bool or a number. PyYAML comes from the repo's
//! `.venv` (scripts/test-deps.sh installs it).

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::artifacts;
use serde_json::Value;

fn python() -> PathBuf {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/python");
    assert!(
        p.exists(),
        "{} missing: run scripts/test-deps.sh (installs PyYAML)",
        p.display()
    );
    p
}

/// PyYAML's reading of `text`, as JSON; a value JSON cannot hold (a datetime, a date)
/// is named with its type so the comparison fails on it.
fn pyyaml(text: &str) -> Vec<Value> {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("in.yaml");
    std::fs::write(&file, text).unwrap();
    let script = r#"
import json, sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d is not None]
print(json.dumps(docs, default=lambda v: "<%s %s>" % (type(v).__name__, v)))
"#;
    let out = Command::new(python())
        .args(["-c", script])
        .arg(&file)
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn serde(text: &str) -> Vec<Value> {
    use serde::Deserialize;
    serde_yaml_ng::Deserializer::from_str(text)
        .map(|d| Value::deserialize(d).unwrap())
        .filter(|v| !v.is_null())
        .collect()
}

#[test]
fn checkpoint_by_is_a_string_to_a_yaml_1_1_reader() {
    let files = artifacts("h100-blocks", "pytorchjob");
    let job = &files["job-pytorchjob.yaml"];
    assert!(job.contains("CHECKPOINT_BY"), "{job}");
    let docs = pyyaml(job);
    let text = serde_json::to_string(&docs).unwrap();
    assert!(
        !text.contains("<datetime"),
        "PyYAML read a datetime: {text}"
    );
    assert_eq!(docs, serde(job));
}

#[test]
fn every_emitted_yaml_file_reads_the_same_in_yaml_1_1() {
    for scenario in [
        "h100-blocks",
        "l40s-on-demand",
        "a100-odcr",
        "single-node",
        "trainium",
    ] {
        let files = artifacts(scenario, "pytorchjob");
        for (name, content) in &files {
            if !(name.ends_with(".yaml") || name.ends_with(".yml")) {
                continue;
            }
            assert_eq!(pyyaml(content), serde(content), "{scenario}: {name}");
        }
    }
}
