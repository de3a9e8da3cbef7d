//! `trainplace policy export --format vap`: the exported ValidatingAdmissionPolicies
//! and bindings pass `kubernetes-validate --strict` (embedded and restricted policy,
//! YAML and JSON), the guardrails overlay holds exactly what the generator writes
//! (scripts/export-vap.sh refreshes it) and renders with the real kubectl, and a policy
//! a namespaceSelector cannot say is refused with the override named.

mod common;
#[path = "common/manifests_helpers.rs"]
#[allow(dead_code)]
mod manifests_helpers;

use common::root;
use std::process::{Command, Output};

use serde::Deserialize;
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_trainplace");
const OVERLAY: &str = "manifests/overlays/guardrails";
const EXPORTED: &str = "validating-admission-policies.yaml";

fn export(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(["policy", "export", "--format", "vap"])
        .args(args)
        .env_remove("TRAINPLACE_POLICY_DIR")
        .output()
        .expect("trainplace runs")
}

fn stdout_ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "export failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

fn documents(yaml: &str) -> Vec<Value> {
    serde_yaml_ng::Deserializer::from_str(yaml)
        .map(|d| Value::deserialize(d).unwrap())
        .filter(|v| !v.is_null())
        .collect()
}

/// A policy directory holding the platform team's restricted policy.
fn restricted_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        root().join("examples/policy-restricted.yaml"),
        dir.path().join("policy.yaml"),
    )
    .unwrap();
    dir
}

fn kinds(docs: &[Value]) -> Vec<String> {
    docs.iter()
        .map(|d| {
            format!(
                "{}/{}",
                d["kind"].as_str().unwrap(),
                d["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect()
}

#[test]
fn exported_objects_pass_strict_schema_validation() {
    let tmp = tempfile::tempdir().unwrap();
    let restricted = restricted_dir();
    let cases = [
        ("embedded", stdout_ok(&export(&[]))),
        (
            "restricted",
            stdout_ok(&export(&[
                "--policy-dir",
                restricted.path().to_str().unwrap(),
            ])),
        ),
    ];
    for (name, yaml) in &cases {
        let docs = documents(yaml);
        let policies = docs
            .iter()
            .filter(|d| d["kind"] == "ValidatingAdmissionPolicy")
            .count();
        // The embedded policy enforces every rule everywhere: one policy holds them
        // all. The restricted one gives partial-node and multi-az regions of their own.
        let want = if *name == "embedded" { 1 } else { 3 };
        assert_eq!(policies, want, "{name}: {:?}", kinds(&docs));
        // One file per object, as kubernetes-validate reads them.
        let mut files = Vec::new();
        for (i, d) in docs.iter().enumerate() {
            let path = tmp.path().join(format!("{name}-{i}.yaml"));
            std::fs::write(&path, serde_yaml_ng::to_string(d).unwrap()).unwrap();
            files.push(path);
        }
        common::assert_strictly_valid(&format!("policy export ({name})"), &files);
    }
    // The restricted policy's overrides become bindings: research warns, the sandbox
    // label audits partial-node, everyone else is denied.
    let docs = documents(&cases[1].1);
    let bindings: Vec<(String, Value, Value)> = docs
        .iter()
        .filter(|d| d["kind"] == "ValidatingAdmissionPolicyBinding")
        .map(|d| {
            (
                d["metadata"]["name"].as_str().unwrap().to_string(),
                d["spec"]["validationActions"].clone(),
                d["spec"]["matchResources"]["namespaceSelector"].clone(),
            )
        })
        .collect();
    let find = |n: &str| {
        bindings
            .iter()
            .find(|b| b.0 == n)
            .unwrap_or_else(|| panic!("{n}: {bindings:?}"))
    };
    assert_eq!(
        find("trainplace-partial-node-ns1").1,
        serde_json::json!(["Audit"])
    );
    assert_eq!(
        find("trainplace-partial-node-ns0").1,
        serde_json::json!(["Warn"])
    );
    assert_eq!(
        find("trainplace-partial-node").1,
        serde_json::json!(["Deny"])
    );
    assert_eq!(
        find("trainplace-partial-node").2["matchExpressions"],
        serde_json::json!([
            {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["research"]},
            {"key": "trainplace.io/tier", "operator": "NotIn", "values": ["sandbox"]},
        ])
    );
    assert_eq!(
        find("trainplace-impossible-request").1,
        serde_json::json!(["Deny"])
    );
}

#[test]
fn json_output_is_a_list_of_the_same_objects() {
    let yaml = documents(&stdout_ok(&export(&[])));
    let json: Value = serde_json::from_str(&stdout_ok(&export(&["-o", "json"]))).unwrap();
    assert_eq!(json["kind"], "List");
    assert_eq!(json["items"].as_array().unwrap(), &yaml);
}

#[test]
fn guardrails_overlay_holds_what_the_generator_writes() {
    let root = root();
    let on_disk = std::fs::read_to_string(root.join(OVERLAY).join(EXPORTED)).unwrap();
    assert!(
        on_disk == stdout_ok(&export(&[])),
        "{OVERLAY}/{EXPORTED} is stale: run scripts/export-vap.sh"
    );
}

#[test]
fn guardrails_overlay_renders_the_policies_alone() {
    let docs = manifests_helpers::kustomize(&root().join(OVERLAY));
    let names = kinds(&docs);
    assert_eq!(
        names.len(),
        2,
        "one policy of every rule and its binding, nothing else: {names:?}"
    );
    for want in [
        "ValidatingAdmissionPolicy/trainplace-partial-node.multi-az.impossible-request",
        "ValidatingAdmissionPolicyBinding/trainplace-partial-node.multi-az.impossible-request",
    ] {
        assert!(names.iter().any(|n| n == want), "{want} not in {names:?}");
    }
    // Cluster-scoped: kustomize must not have put them in the trainplace namespace.
    for d in docs.iter().filter(|d| {
        d["kind"]
            .as_str()
            .unwrap()
            .starts_with("ValidatingAdmissionPolicy")
    }) {
        assert!(d["metadata"].get("namespace").is_none(), "{d}");
    }
    let tmp = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for (i, d) in docs
        .iter()
        .filter(|d| {
            d["apiVersion"]
                .as_str()
                .unwrap()
                .starts_with("admissionregistration.k8s.io/")
        })
        .enumerate()
    {
        let path = tmp.path().join(format!("{i}.yaml"));
        std::fs::write(&path, serde_yaml_ng::to_string(d).unwrap()).unwrap();
        files.push(path);
    }
    common::assert_strictly_valid("guardrails overlay", &files);
}

#[test]
fn an_override_no_namespace_selector_can_say_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("policy.yaml"),
        "apiVersion: trainplace.io/v1alpha1\nkind: Policy\nnamespaces:\n  - match: { names: [a], selector: { matchLabels: { team: x } } }\n    rules: { multiAz: warn }\n",
    )
    .unwrap();
    let out = export(&["--policy-dir", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("namespaces[0]") && err.contains("cannot be exported"),
        "{err}"
    );
    assert!(
        out.stdout.is_empty(),
        "a refused export writes no part of it"
    );
}
