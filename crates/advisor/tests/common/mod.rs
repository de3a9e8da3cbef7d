//! Shared test helpers: scenarios, the real schemas vendored in `schemas/`.
#![allow(dead_code)]

use std::path::PathBuf;

use serde_json::Value;
use trainplace_advisor::aws::offerings::parse_offerings;
use trainplace_advisor::{AdviceRequest, Facts, Recommendation, recommend};
use trainplace_engine::Policy;

pub fn schemas_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../schemas");
    assert!(
        dir.is_dir(),
        "schemas missing at {} (vendored in the repo: schemas/README.md)",
        dir.display()
    );
    dir
}

fn read(rel: &str) -> String {
    let path = schemas_dir().join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// eksctl's JSON schema (draft-07).
pub fn eksctl_validator() -> jsonschema::Validator {
    // The schema's `$ref`s contain `|` (`#/definitions/k8s.io|api|core|v1.TaintEffect`),
    // which the draft-07 meta-schema's uri-reference format rejects; percent-encoding it
    // in the refs (only) is the same reference, as URI fragments are percent-decoded.
    let text = read("schema.json");
    let mut schema: Value = serde_json::from_str(&text).unwrap();
    encode_refs(&mut schema);
    jsonschema::draft7::new(&schema).expect("eksctl schema compiles")
}

fn encode_refs(v: &mut Value) {
    match v {
        Value::Object(map) => {
            for (k, child) in map.iter_mut() {
                match child {
                    Value::String(s) if k == "$ref" => *s = s.replace('|', "%7C"),
                    _ => encode_refs(child),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(encode_refs),
        _ => {}
    }
}

/// `spec.versions[0].schema.openAPIV3Schema` of a CRD file.
pub fn crd_validator(rel: &str) -> jsonschema::Validator {
    let crd: Value = serde_yaml_ng::from_str(&read(rel)).unwrap();
    let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
    assert!(schema.is_object(), "{rel}: no openAPIV3Schema");
    jsonschema::options()
        .with_draft(jsonschema::Draft::Draft4)
        .build(schema)
        .unwrap_or_else(|e| panic!("{rel}: schema does not compile: {e}"))
}

pub fn assert_valid(v: &jsonschema::Validator, doc: &Value, what: &str) {
    let errors: Vec<String> = v
        .iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "{what} fails its schema:\n{}\n{}",
        errors.join("\n"),
        serde_yaml_ng::to_string(doc).unwrap()
    );
}

pub fn offerings_fixture() -> String {
    std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/capacity-block-offerings.json"),
    )
    .unwrap()
}

pub fn fixture(name: &str) -> String {
    std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures")
            .join(name),
    )
    .unwrap()
}

/// The instant scenarios are planned at.
pub const NOW: &str = "2026-11-22T00:00:00Z";

/// A named scenario: request + facts.
pub fn scenario(name: &str) -> (AdviceRequest, Facts) {
    let base = AdviceRequest {
        region: Some("us-east-1".into()),
        // The fixtures' offerings start 2026-12-01: plan as of a fixed day before.
        now: Some(NOW.into()),
        ..Default::default()
    };
    let offers = Facts {
        offerings: Some(parse_offerings(&offerings_fixture()).unwrap()),
        ..Default::default()
    };
    match name {
        "h100-blocks" => (
            AdviceRequest {
                gpus: Some(64),
                family: Some("h100".into()),
                duration_days: Some(7.0),
                ..base
            },
            offers,
        ),
        "h100-no-offerings" => (
            AdviceRequest {
                gpus: Some(64),
                family: Some("h100".into()),
                duration_days: Some(7.0),
                ..base
            },
            Facts::default(),
        ),
        "l40s-on-demand" => (
            AdviceRequest {
                gpus: Some(16),
                family: Some("l40s".into()),
                duration_hours: Some(30.0),
                availability_zones: vec!["us-east-1b".into()],
                ..base
            },
            Facts::default(),
        ),
        "a100-odcr" => (
            AdviceRequest {
                gpus: Some(16),
                family: Some("a100".into()),
                duration_days: Some(2.0),
                capacity: Some("odcr".into()),
                reservation_id: Some("cr-0123456789abcdef0".into()),
                ..base
            },
            Facts::default(),
        ),
        "single-node" => (
            AdviceRequest {
                gpus: Some(8),
                family: Some("h200".into()),
                duration_hours: Some(10.0),
                capacity: Some("on-demand".into()),
                ..base
            },
            Facts::default(),
        ),
        "trainium" => (
            AdviceRequest {
                gpus: Some(32),
                family: Some("trainium".into()),
                duration_days: Some(2.0),
                capacity: Some("on-demand".into()),
                ..base
            },
            Facts::default(),
        ),
        other => panic!("unknown scenario {other}"),
    }
}

/// The artifacts of a scenario, by file name.
pub fn artifacts(name: &str, framework: &str) -> std::collections::BTreeMap<String, String> {
    let rec = recommendation(name, framework);
    trainplace_advisor::artifacts::artifacts(&rec, &Policy::embedded())
        .into_iter()
        .map(|a| (a.name, a.content))
        .collect()
}

pub fn recommendation(name: &str, framework: &str) -> Recommendation {
    let (mut req, facts) = scenario(name);
    req.framework = Some(framework.into());
    let policy = Policy::embedded();
    let valid = req
        .validate(&policy.catalog, jiff::Timestamp::now())
        .unwrap();
    recommend(&valid, &policy.catalog, &facts).unwrap()
}
