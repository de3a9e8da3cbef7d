//! Policy files that cannot be mistyped: schemas/policy.schema.json is what `trainplace
//! policy schema` prints (derived from the reader's own types), every shipped Policy file
//! validates against it and a typo does not, policies/default.yaml shows every key the
//! reader accepts, and `policy check` takes one file as well as a directory.

#[path = "common/golden.rs"]
mod golden;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn trainplace(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_trainplace"))
        .args(args)
        .env_remove("TRAINPLACE_POLICY_DIR")
        .output()
        .unwrap()
}

fn schema() -> Value {
    let path = root().join("schemas/policy.schema.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn validator() -> jsonschema::Validator {
    jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .build(&schema())
        .unwrap()
}

fn yaml_file(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap();
    serde_yaml_ng::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The YAML files under `dir` (recursively) whose first document is `kind: Policy`.
fn policy_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            policy_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            let text = std::fs::read_to_string(&path).unwrap();
            if text.lines().any(|l| l == "kind: Policy") {
                out.push(path);
            }
        }
    }
}

#[test]
fn the_published_schema_is_what_the_reader_derives() {
    let out = trainplace(&["policy", "schema"]);
    assert!(out.status.success());
    let printed = String::from_utf8(out.stdout).unwrap();
    let path = root().join("schemas/policy.schema.json");
    if golden::update() {
        std::fs::write(&path, &printed).unwrap();
    }
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        printed,
        "schemas/policy.schema.json is stale: UPDATE_GOLDEN=1 cargo test --test policy_schema"
    );
    let s = schema();
    assert_eq!(s["$schema"], "https://json-schema.org/draft/2020-12/schema");
    assert_eq!(s["additionalProperties"], false);
    assert_eq!(s["properties"]["kind"]["const"], "Policy");
}

#[test]
fn every_shipped_policy_file_validates_and_typos_do_not() {
    let v = validator();
    let mut files = Vec::new();
    for dir in ["policies", "manifests", "examples", "charts"] {
        policy_files(&root().join(dir), &mut files);
    }
    assert!(files.len() >= 4, "{files:?}");
    for f in &files {
        let doc = yaml_file(f);
        let errors: Vec<String> = v.iter_errors(&doc).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{}: {errors:#?}", f.display());
    }
    let base = yaml_file(&root().join("policies/default.yaml"));
    let typos = [
        ("/rules/partialNodes", Value::from("enforce")),
        ("/rules/partialNode", Value::from("enforced")),
        ("/mutations/hostIpc", Value::from(true)),
        ("/defaults/efaThroughDra", Value::from("yes")),
        ("/optIns/allowPartialNode/users", Value::from(vec!["alice"])),
        ("/kind", Value::from("Policies")),
    ];
    for (pointer, value) in typos {
        let mut doc = base.clone();
        let (parent, key) = pointer.rsplit_once('/').unwrap();
        doc.pointer_mut(if parent.is_empty() { "" } else { parent })
            .unwrap()
            .as_object_mut()
            .unwrap()
            .insert(key.to_string(), value);
        assert!(!v.is_valid(&doc), "{pointer} passes the schema");
    }
}

/// Every key the schema knows in the sections with scalar keys is in
/// policies/default.yaml, set to its default or (unset by default) in a comment.
#[test]
fn the_default_policy_shows_every_key() {
    let s = schema();
    let text = std::fs::read_to_string(root().join("policies/default.yaml")).unwrap();
    let defs = &s["$defs"];
    let mut missing = Vec::new();
    let mut count = 0;
    let top = s["properties"].as_object().unwrap();
    for key in top.keys() {
        count += 1;
        if !text.contains(&format!("\n{key}:")) && !text.contains(&format!("\n# {key}:")) {
            missing.push(key.clone());
        }
    }
    for (section, def) in [
        ("defaults", "Defaults"),
        ("rules", "RuleModes"),
        ("mutations", "Mutations"),
        ("optIns", "OptIns"),
        ("recognizers", "Recognizers"),
    ] {
        for key in defs[def]["properties"].as_object().unwrap().keys() {
            count += 1;
            let set = format!("\n  {key}:");
            let commented = format!("\n  # {key}:");
            if !text.contains(&set) && !text.contains(&commented) {
                missing.push(format!("{section}.{key}"));
            }
        }
    }
    assert!(count > 30, "{count} keys");
    assert!(
        missing.is_empty(),
        "policies/default.yaml does not show: {missing:?}"
    );
}

#[test]
fn policy_check_takes_a_file_or_a_directory() {
    for path in [
        "policies/default.yaml",
        "policies/instances.yaml",
        "policies",
    ] {
        let full = root().join(path);
        let out = trainplace(&["policy", "check", full.to_str().unwrap()]);
        assert!(
            out.status.success(),
            "{path}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stdout).contains(": ok ("));
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mine.yaml");
    std::fs::write(
        &file,
        "apiVersion: trainplace.io/v1alpha1\nkind: Policy\nrules:\n  partialNodes: warn\n",
    )
    .unwrap();
    let out = trainplace(&["policy", "check", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("mine.yaml") && err.contains("partialNodes") && err.contains("line 4"),
        "{err}"
    );
    let out = trainplace(&["policy", "check", "/nonexistent/policy.yaml"]);
    assert_eq!(out.status.code(), Some(2));
}
