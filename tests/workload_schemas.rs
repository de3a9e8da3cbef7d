//! Every mutated workload fixture validates against its real CRD schema from
//! `schemas/` (tightened: an object schema that lists properties rejects
//! others, as the API server's pruning would silently drop them), and batch Jobs
//! against the official Kubernetes schema with `kubernetes-validate --strict`.
//! Not enforced by a JSON-schema validator: `x-kubernetes-*` extensions and CEL rules.

mod common;

use std::path::{Path, PathBuf};

use serde_json::Value;
use trainplace_engine::{Claims, Policy, Requester, evaluate};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn schemas() -> PathBuf {
    let dir = root().join("schemas");
    assert!(
        dir.is_dir(),
        "schemas missing at {} (vendored in the repo: schemas/README.md)",
        dir.display()
    );
    dir
}

/// Reject properties a structural schema does not list, unless it preserves unknown fields.
fn tighten(v: &mut Value) {
    match v {
        Value::Object(m) => {
            let preserves =
                m.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
            if m.contains_key("properties") && !m.contains_key("additionalProperties") && !preserves
            {
                m.insert("additionalProperties".into(), Value::Bool(false));
            }
            m.values_mut().for_each(tighten);
        }
        Value::Array(a) => a.iter_mut().for_each(tighten),
        _ => {}
    }
}

fn validator(file: &str) -> jsonschema::Validator {
    let text = std::fs::read_to_string(schemas().join(file)).unwrap();
    let crd: Value = serde_yaml_ng::from_str(&text).unwrap();
    let mut schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone();
    // metadata is validated by the API server itself, not by the CRD.
    if let Some(p) = schema.get_mut("properties") {
        p["metadata"] = serde_json::json!({"type": "object"});
    }
    tighten(&mut schema);
    jsonschema::options()
        .with_draft(jsonschema::Draft::Draft4)
        .build(&schema)
        .unwrap()
}

fn crd_for(kind: &str) -> Option<&'static str> {
    Some(match kind {
        "JobSet" => "jobset.x-k8s.io_jobsets.yaml",
        "PyTorchJob" => "kubeflow.org_pytorchjobs.yaml",
        "MPIJob" => "mpi-operator-v2beta1/kubeflow.org_mpijobs.yaml",
        "TrainJob" => "trainer.kubeflow.org_trainjobs.yaml",
        "LeaderWorkerSet" => "leaderworkerset.x-k8s.io_leaderworkersets.yaml",
        "ComputeDomain" => "resource.nvidia.com_computedomains.yaml",
        _ => return None,
    })
}

#[test]
fn mutated_workloads_validate_against_their_crds() {
    let policy = Policy::embedded();
    let dir = tempfile::tempdir().unwrap();
    let mut checked = 0;
    let mut jobs = Vec::new();
    for entry in std::fs::read_dir(root().join("tests/fixtures/workloads")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        let case: Value =
            serde_yaml_ng::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        if case["expect"].get("error").is_some() || name.contains("unknown-fields") {
            continue;
        }
        let object = &case["object"];
        let groups = vec!["system:authenticated".to_string()];
        // DRA templates and ComputeDomains submitted alongside, as in one input file.
        let mut claims = Claims::default();
        claims.add(case["objects"].as_array().into_iter().flatten(), "ml");
        let who = Requester {
            namespace: "ml",
            namespace_labels: None,
            groups: &groups,
            inventory: None,
            marks: None,
            now: None,
            claims: Some(&claims),
        };
        let v = evaluate(object, &policy, &who).unwrap();
        let kind = object["kind"].as_str().unwrap();
        if let Some(file) = crd_for(kind) {
            let errors: Vec<String> = validator(file)
                .iter_errors(&v.object)
                .map(|e| format!("{e} at {}", e.instance_path()))
                .collect();
            assert!(
                errors.is_empty(),
                "{name}: mutated {kind} fails its CRD schema:\n{}",
                errors.join("\n")
            );
            checked += 1;
        } else if kind == "Job" {
            let out = dir.path().join(format!("{name}.yaml"));
            std::fs::write(&out, serde_yaml_ng::to_string(&v.object).unwrap()).unwrap();
            jobs.push(out);
        }
    }
    assert!(checked >= 15, "only {checked} CRD workloads checked");
    common::assert_strictly_valid("mutated batch Jobs", &jobs);
}

#[test]
fn tightened_schema_rejects_a_misplaced_field() {
    let v = validator("kubeflow.org_pytorchjobs.yaml");
    let bad = serde_json::json!({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "x"},
        "spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 1, "template": {"spec": {"hostIpc": true, "containers": [{"name": "c"}]}}}}}});
    assert!(
        !v.is_valid(&bad),
        "a typo'd pod field must fail the tightened schema"
    );
}

/// The DRA objects fixtures submit alongside their workload are real: ComputeDomains
/// against NVIDIA's CRD, ResourceClaimTemplates against the official schema of
/// Kubernetes 1.34 (resource.k8s.io/v1), strictly.
#[test]
fn submitted_dra_objects_validate() {
    let dir = tempfile::tempdir().unwrap();
    let mut templates = Vec::new();
    let mut domains = 0;
    for sub in ["pods", "workloads", "bypass"] {
        for entry in std::fs::read_dir(root().join("tests/fixtures").join(sub)).unwrap() {
            let path = entry.unwrap().path();
            let case: Value =
                serde_yaml_ng::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            for (i, o) in case["objects"].as_array().into_iter().flatten().enumerate() {
                let name = path.file_stem().unwrap().to_string_lossy().to_string();
                match o["kind"].as_str().unwrap() {
                    "ComputeDomain" => {
                        let errors: Vec<String> = validator(crd_for("ComputeDomain").unwrap())
                            .iter_errors(o)
                            .map(|e| format!("{e} at {}", e.instance_path()))
                            .collect();
                        assert!(errors.is_empty(), "{name}: {}", errors.join("\n"));
                        domains += 1;
                    }
                    kind => {
                        assert_eq!(o["apiVersion"], "resource.k8s.io/v1", "{name}: {kind}");
                        let out = dir.path().join(format!("{name}-{i}.yaml"));
                        std::fs::write(&out, serde_yaml_ng::to_string(o).unwrap()).unwrap();
                        templates.push(out);
                    }
                }
            }
        }
    }
    assert!(
        domains >= 5 && templates.len() >= 8,
        "{domains} domains, {} templates",
        templates.len()
    );
    let v = std::process::Command::new(common::kubernetes_validate())
        .args(["--strict", "-k", "1.34.0"])
        .args(&templates)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&v.stdout);
    assert!(
        v.status.success() && !said.contains("Couldn't find schema"),
        "ResourceClaimTemplates fail the official schema:\n{said}\n{}",
        String::from_utf8_lossy(&v.stderr)
    );
}
