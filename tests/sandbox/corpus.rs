//! The fixture corpus (tests/fixtures/{workloads,pods}) as the sandbox's API server sees it:
//! the fixtures judged under the embedded default policy with no cluster inventory (those
//! that name a policy file, a cluster directory, extra objects, groups or namespace labels
//! set up a context the sandbox does not have; the engine's own tests cover them).

use std::path::PathBuf;

use serde_json::{Value, json};
use trainplace_engine::{Mode, Policy, Requester, evaluate};

use super::Sandbox;

pub struct Fixture {
    pub name: String,
    pub object: Value,
}

const CONTEXT_KEYS: [&str; 6] = [
    "policy",
    "policyFile",
    "cluster",
    "objects",
    "groups",
    "namespaceLabels",
];

pub fn fixtures() -> Vec<Fixture> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut out = Vec::new();
    for dir in ["workloads", "pods"] {
        let mut paths: Vec<_> = std::fs::read_dir(root.join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
            .collect();
        paths.sort();
        for path in paths {
            let doc: Value =
                serde_yaml_ng::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            if CONTEXT_KEYS.iter().any(|k| doc.get(*k).is_some()) {
                continue;
            }
            out.push(Fixture {
                name: format!("{dir}/{}", path.file_name().unwrap().to_string_lossy()),
                object: doc["object"].clone(),
            });
        }
    }
    assert!(out.len() > 100, "the corpus is there: {}", out.len());
    out
}

/// The object of one fixture, by its name under tests/fixtures (`workloads/NAME.yaml`).
pub fn fixture(name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    let doc: Value = serde_yaml_ng::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    doc["object"].clone()
}

/// `object` placed in namespace `ns` (cluster-scoped kinds keep none).
pub fn placed(object: &Value, ns: &str) -> Value {
    let mut o = object.clone();
    if o["kind"] == "ClusterTrainingRuntime" {
        if let Some(m) = o["metadata"].as_object_mut() {
            m.remove("namespace");
        }
    } else {
        o["metadata"]["namespace"] = json!(ns);
    }
    o
}

/// `kubectl create --dry-run=server` of `object`: Ok(stderr with the warnings) when
/// admitted, Err(the refusal) otherwise. Unknown fields are left to the API server
/// (`--validate=ignore`: pruned or dropped as on any cluster).
pub fn dry_run(sb: &Sandbox, object: &Value) -> Result<String, String> {
    let out = dry_run_output(sb, object, &[]);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    if out.status.success() {
        Ok(err)
    } else {
        Err(err)
    }
}

/// The same `kubectl create --dry-run=server`, with kubectl flags before it (an
/// impersonation: `--as`, `--as-group`), and what kubectl answered.
pub fn dry_run_output(sb: &Sandbox, object: &Value, flags: &[String]) -> std::process::Output {
    let mut args: Vec<&str> = flags.iter().map(String::as_str).collect();
    args.extend([
        "create",
        "--dry-run=server",
        "--validate=ignore",
        "-o",
        "name",
        "-f",
        "-",
    ]);
    sb.kubectl_stdin(&args, Some(&object.to_string()))
}

/// The rules the engine denies `object` for, on the raw object with the sandbox admin's
/// groups and no inventory: enforce findings that an opt-in could lift (partial-node,
/// multi-az) and impossible-request; `None` when the engine refuses to read it.
pub fn engine_denies(object: &Value, ns: &str) -> Option<Vec<&'static str>> {
    let policy = Policy::embedded();
    let groups = [
        "system:masters".to_string(),
        "system:authenticated".to_string(),
    ];
    let who = Requester {
        namespace: ns,
        groups: &groups,
        ..Default::default()
    };
    let verdict = evaluate(object, &policy, &who).ok()?;
    let mut rules: Vec<&'static str> = ["partial-node", "multi-az", "impossible-request"]
        .into_iter()
        .filter(|rule| {
            verdict.findings.iter().any(|f| {
                f.rule.as_str() == *rule
                    && f.mode == Mode::Enforce
                    && (*rule == "impossible-request" || f.opt_in.is_some())
            })
        })
        .collect();
    rules.sort_unstable();
    Some(rules)
}
