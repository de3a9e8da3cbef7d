//! The exported ValidatingAdmissionPolicies decide like the engine: for every fixture
//! of the corpus (`tests/fixtures/pods`, `workloads`, `bypass` under the restricted and
//! the default policy) and each exported rule, the CEL verdict (evaluated with the
//! `cel` crate, bound like the apiserver binds it) equals the engine's verdict for that
//! rule, on the raw object (the mutating webhook down) and on the mutated object (what
//! `/validate` sees). Where CEL cannot say what the engine says, the fixture is in
//! [`WEBHOOK_ONLY`] with why; the list must match exactly, so it cannot grow (or
//! shrink) unnoticed, and the README lists the same fixtures.

mod vap_support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;
use trainplace_engine::annotations::ALLOW_PARTIAL_NODE;
use trainplace_engine::vap::{Check, RULE_LABEL, export};
use trainplace_engine::{Catalog, Mode, Policy, Requester, Snapshot, evaluate};
use vap_support::{Apiserver, Outcome, Request, selects};

/// Fixture (`dir/file@policy`), rule, stage (`raw` / `mutated`): what CEL cannot
/// decide like the engine, and why. Kept in step with the README's list.
const WEBHOOK_ONLY: &[(&str, &str, &str, &str)] = &[];

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Case {
    policy_file: Option<String>,
    policy: Option<Value>,
    namespace_labels: Option<BTreeMap<String, String>>,
    #[serde(default)]
    groups: Vec<String>,
    cluster: Option<String>,
    object: Value,
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn policy_for(case: &Case) -> Policy {
    if let Some(file) = &case.policy_file {
        let text = std::fs::read_to_string(repo_root().join(file)).expect("policy file");
        return Policy::from_parts(&text, file, Catalog::embedded()).expect("policy loads");
    }
    if let Some(inline) = &case.policy {
        let text = serde_yaml_ng::to_string(inline).unwrap();
        return Policy::from_parts(&text, "inline", Catalog::embedded()).expect("policy loads");
    }
    Policy::embedded()
}

fn cluster(name: &str) -> Snapshot {
    let dir = repo_root().join("tests/fixtures/cluster").join(name);
    let list = |f: &str| -> Value {
        std::fs::read_to_string(dir.join(f))
            .map(|t| serde_json::from_str(&t).expect("valid JSON list"))
            .unwrap_or_else(|_| serde_json::json!({"items": []}))
    };
    Snapshot::from_lists(
        &list("nodes.json"),
        &list("pods.json"),
        &list("namespaces.json"),
    )
}

fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Enforce => "enforce",
        Mode::Warn => "warn",
        Mode::Audit => "audit",
        Mode::Off => "off",
    }
}

/// The engine's verdict for one rule: the deny-rule findings only (partial-node's
/// single-pod note is a warning of its own, not the rule the policy exports).
fn engine_outcome(verdict: &Result<trainplace_engine::Verdict, impl std::fmt::Debug>, check: Check) -> Outcome {
    let Ok(v) = verdict else {
        return Outcome::Refused;
    };
    let found = v.findings.iter().find(|f| {
        f.rule.as_str() == check.rule()
            && (check != Check::PartialNode || f.opt_in == Some(ALLOW_PARTIAL_NODE))
    });
    match found {
        None => Outcome::Pass,
        Some(f) => Outcome::Flag(mode_name(f.mode)),
    }
}

fn vap_outcome(api: &Apiserver, exported: &[Value], check: Check, object: &Value, req: &Request<'_>) -> Outcome {
    let of_rule = |kind: &'static str| {
        exported
            .iter()
            .filter(move |o| o["kind"] == kind && o["metadata"]["labels"][RULE_LABEL] == check.rule())
    };
    let Some(policy) = of_rule("ValidatingAdmissionPolicy").next() else {
        return Outcome::Pass;
    };
    match api.violates(policy, object, req) {
        Err(_) => Outcome::Refused,
        Ok(None) => Outcome::Pass,
        Ok(Some(_)) => {
            let bound: Vec<&Value> = of_rule("ValidatingAdmissionPolicyBinding")
                .filter(|b| selects(b, &req.namespace_labels))
                .collect();
            assert!(bound.len() <= 1, "bindings overlap for {}", req.namespace);
            match bound.first().map(|b| b["spec"]["validationActions"][0].as_str()) {
                None => Outcome::Pass,
                Some(Some("Deny")) => Outcome::Flag("enforce"),
                Some(Some("Warn")) => Outcome::Flag("warn"),
                Some(Some("Audit")) => Outcome::Flag("audit"),
                other => panic!("action {other:?}"),
            }
        }
    }
}

type Mismatch = (String, &'static str, &'static str, Outcome, Outcome);

fn judge(api: &Apiserver, name: &str, case: &Case, out: &mut Vec<Mismatch>, compared: &mut usize) {
    let policy = policy_for(case);
    let exported = export(&policy).unwrap_or_else(|e| panic!("{name}: export: {e}"));
    let ns = case.object["metadata"]["namespace"]
        .as_str()
        .unwrap_or("default")
        .to_string();
    let snapshot = case.cluster.as_deref().map(cluster);
    let labels = case
        .namespace_labels
        .clone()
        .or_else(|| snapshot.as_ref()?.namespace_labels(&ns).cloned());
    let who = Requester {
        namespace: &ns,
        namespace_labels: labels.as_ref(),
        groups: &case.groups,
        inventory: snapshot.as_ref(),
        marks: None,
        now: None,
    };
    let mut ns_labels = labels.clone().unwrap_or_default();
    ns_labels.insert("kubernetes.io/metadata.name".into(), ns.clone());
    let req = Request {
        namespace: &ns,
        namespace_labels: ns_labels,
        groups: &case.groups,
    };
    let raw = evaluate(&case.object, &policy, &who);
    let mutated_object = raw.as_ref().ok().map(|v| v.object.clone());
    let mut stages = vec![("raw", case.object.clone(), raw)];
    if let Some(m) = mutated_object {
        let again = evaluate(&m, &policy, &who);
        stages.push(("mutated", m, again));
    }
    for (stage, object, verdict) in &stages {
        for check in Check::ALL {
            let want = engine_outcome(verdict, check);
            let got = vap_outcome(api, &exported, check, object, &req);
            *compared += 1;
            if want != got {
                out.push((name.to_string(), check.rule(), stage, want, got));
            }
        }
    }
}

fn corpus() -> Vec<(String, Case)> {
    let mut out = Vec::new();
    for dir in ["pods", "workloads", "bypass"] {
        let mut files: Vec<PathBuf> = std::fs::read_dir(repo_root().join("tests/fixtures").join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
            .collect();
        files.sort();
        for path in files {
            let text = std::fs::read_to_string(&path).unwrap();
            let file = path.file_name().unwrap().to_string_lossy();
            let case: Case = serde_yaml_ng::from_str(&text)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            if dir == "bypass" {
                let mut restricted: Case = serde_yaml_ng::from_str(&text).unwrap();
                restricted.policy_file = Some("examples/policy-restricted.yaml".into());
                out.push((format!("{dir}/{file}@restricted"), restricted));
                out.push((format!("{dir}/{file}@default"), case));
            } else {
                out.push((format!("{dir}/{file}"), case));
            }
        }
    }
    out
}

#[test]
fn exported_policies_decide_like_the_engine_on_every_fixture() {
    let api = Apiserver::new();
    let mut mismatches = Vec::new();
    let mut compared = 0;
    let cases = corpus();
    for (name, case) in &cases {
        judge(&api, name, case, &mut mismatches, &mut compared);
    }
    let got: Vec<String> = mismatches
        .iter()
        .map(|(n, r, s, want, got)| format!("{n} {r} {s}: engine {want:?}, VAP {got:?}"))
        .collect();
    let listed: Vec<String> = WEBHOOK_ONLY
        .iter()
        .map(|(n, r, s, _)| format!("{n} {r} {s}"))
        .collect();
    let got_keys: Vec<String> = mismatches
        .iter()
        .map(|(n, r, s, _, _)| format!("{n} {r} {s}"))
        .collect();
    eprintln!("{} fixtures, {compared} verdicts compared, {} differ", cases.len(), got.len());
    assert_eq!(
        got_keys, listed,
        "VAP verdicts that differ from the engine's:\n{}",
        got.join("\n")
    );
}
