//! Strict mode (`examples/policy-strict.yaml`), proven two ways:
//! - every fixture of `tests/fixtures/strict` (attacks through other resources, owners,
//!   launchers, claims, opt-ins, UPDATEs and sizes) gets the verdict it expects from the
//!   engine, as the validating webhook judges the object it is sent, and, where a
//!   denial is expected, also after the mutating webhook ran;
//! - the exported ValidatingAdmissionPolicies decide exactly as the engine on those
//!   fixtures and on the whole precise corpus (pods, workloads, bypass) replayed under
//!   the strict policy: no exception list, raw and mutated objects alike;
//! - no deny-expected review of the bypass corpus is admitted as sent.

mod vap_support;

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;
use serde_json::Value;
use trainplace_engine::vap::{Check, bindings_of, export, policy_of};
use trainplace_engine::{Mode, Policy, Requester, Verdict, evaluate, judge_change, judge_owned};
use vap_support::corpus::{corpus, with_stack};
use vap_support::fixture_env::{policy, repo_root};
use vap_support::{Apiserver, Outcome, Request, selects};

const STRICT: &str = "examples/policy-strict.yaml";

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Expect {
    allowed: bool,
    #[serde(default)]
    rules: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct StrictCase {
    expect: Expect,
    #[serde(default)]
    groups: Vec<String>,
    object: Value,
    old_object: Option<Value>,
}

fn strict_cases() -> Vec<(String, StrictCase)> {
    let dir = repo_root().join("tests/fixtures/strict");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            let case: StrictCase =
                serde_yaml_ng::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p.file_stem().unwrap().to_string_lossy().into_owned(), case)
        })
        .collect()
}

fn namespace(object: &Value) -> String {
    object["metadata"]["namespace"]
        .as_str()
        .unwrap_or("default")
        .to_string()
}

fn who<'a>(ns: &'a str, groups: &'a [String], updating: Option<&'a Value>) -> Requester<'a> {
    Requester {
        namespace: ns,
        groups,
        updating,
        ..Requester::default()
    }
}

/// The validating webhook's verdict on the object as sent (an UPDATE judged for what
/// it changes).
fn validate(policy: &Policy, object: &Value, old: Option<&Value>, groups: &[String]) -> Verdict {
    let ns = namespace(object);
    let who = who(&ns, groups, old);
    let mut verdict = judge_owned(object.clone(), policy, &who).expect("readable");
    if let Some(old) = old {
        judge_change(old, &mut verdict, policy, &who);
    }
    verdict
}

fn rules_denied(v: &Verdict) -> Vec<String> {
    let mut r: Vec<String> = v
        .findings
        .iter()
        .filter(|f| f.mode == Mode::Enforce)
        .map(|f| f.rule.as_str().to_string())
        .collect();
    r.sort();
    r.dedup();
    r
}

#[test]
fn every_strict_fixture_gets_its_verdict() {
    let policy = policy(Some(STRICT), None);
    let mut wrong = Vec::new();
    let cases = strict_cases();
    assert!(cases.len() >= 40, "{} fixtures", cases.len());
    for (name, case) in &cases {
        let v = validate(
            &policy,
            &case.object,
            case.old_object.as_ref(),
            &case.groups,
        );
        let mut want = case.expect.rules.clone();
        want.sort();
        if v.allowed != case.expect.allowed || (!v.allowed && rules_denied(&v) != want) {
            wrong.push(format!(
                "{name}: allowed {} rules {:?}, expected allowed {} rules {want:?}: {:?}",
                v.allowed,
                rules_denied(&v),
                case.expect.allowed,
                v.findings.iter().map(|f| f.message()).collect::<Vec<_>>()
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// What the mutating webhook fixes (the zone pin) is all it fixes: a pod refused for
/// holding part of a node is refused after mutation too; a pod refused only for its
/// missing pin is admitted once pinned.
#[test]
fn mutation_pins_the_zone_and_nothing_else_changes_a_verdict() {
    let policy = policy(Some(STRICT), None);
    for (name, case) in strict_cases() {
        if case.old_object.is_some() {
            continue;
        }
        let ns = namespace(&case.object);
        let who = who(&ns, &case.groups, None);
        let mutated = evaluate(&case.object, &policy, &who).unwrap().object;
        let v = validate(&policy, &mutated, None, &case.groups);
        let partial = case.expect.rules.iter().any(|r| r == "partial-node");
        assert_eq!(
            v.findings
                .iter()
                .any(|f| f.mode == Mode::Enforce && f.rule.as_str() == "partial-node"),
            partial,
            "{name}: after mutation {:?}",
            v.findings
        );
        if case.expect.rules == ["multi-az"] && !name.contains("opt-in") {
            let pinned = mutated.pointer("/spec/nodeSelector/topology.kubernetes.io~1zone");
            if pinned.is_some() && !name.contains("zone") {
                assert!(
                    v.allowed,
                    "{name}: pinned by the webhook yet {:?}",
                    v.findings
                );
            }
        }
    }
}

/// A deny finding offers its opt-in, or (set but refused) names who the policy grants
/// it to instead; a granted opt-in's warning does neither.
fn engine_outcome(v: &Verdict, check: Check) -> Outcome {
    match v.findings.iter().find(|f| {
        f.rule.as_str() == check.rule()
            && (f.opt_in.is_some() || f.found.contains("is set, but the policy"))
    }) {
        None => Outcome::Pass,
        Some(f) => Outcome::Flag(match f.mode {
            Mode::Enforce => "enforce",
            Mode::Warn => "warn",
            Mode::Audit => "audit",
            Mode::Off => "off",
        }),
    }
}

fn vap_outcome(
    api: &Apiserver,
    exported: &[Value],
    check: Check,
    object: &Value,
    old: Option<&Value>,
    req: &Request<'_>,
) -> (Outcome, Option<String>) {
    let Some(policy) = policy_of(exported, check) else {
        return (Outcome::Pass, None);
    };
    match api.violates_update(&policy, object, old, req) {
        Err(e) => (Outcome::Refused, Some(e)),
        Ok(None) => (Outcome::Pass, None),
        Ok(Some(message)) => {
            let action = bindings_of(exported, check)
                .into_iter()
                .find(|b| selects(b, &req.namespace_labels))
                .and_then(|b| b["spec"]["validationActions"][0].as_str());
            let outcome = match action {
                None => Outcome::Pass,
                Some("Deny") => Outcome::Flag("enforce"),
                Some("Warn") => Outcome::Flag("warn"),
                Some("Audit") => Outcome::Flag("audit"),
                Some(other) => panic!("action {other}"),
            };
            (outcome, Some(message))
        }
    }
}

/// What judges an object: the API server's CEL, the exported policies, the engine's
/// policy.
struct Judges<'a> {
    api: &'a Apiserver,
    exported: &'a [Value],
    policy: &'a Policy,
}

/// What the comparison found: the differences, and how many verdicts flagged alike.
#[derive(Default)]
struct Tally {
    out: Vec<String>,
    flagged: usize,
}

/// One object (and old object) judged by the engine and the exported policies.
fn compare(
    judges: &Judges<'_>,
    name: &str,
    object: &Value,
    old: Option<&Value>,
    groups: &[String],
    tally: &mut Tally,
) {
    let Judges {
        api,
        exported,
        policy,
    } = *judges;
    let ns = namespace(object);
    let mut labels = BTreeMap::new();
    labels.insert("kubernetes.io/metadata.name".to_string(), ns.clone());
    let req = Request {
        namespace: &ns,
        namespace_labels: labels,
        groups,
    };
    let who = who(&ns, groups, old);
    let Ok(raw) = evaluate(object, policy, &who) else {
        return;
    };
    let mut stages = vec![("raw", object.clone())];
    if old.is_none() {
        stages.push(("mutated", raw.object.clone()));
    }
    for (stage, obj) in stages {
        let v = validate(policy, &obj, old, groups);
        for check in [Check::PartialNode, Check::MultiAz] {
            let want = engine_outcome(&v, check);
            let (got, message) = vap_outcome(api, exported, check, &obj, old, &req);
            if want != got {
                tally.out.push(format!(
                    "{name} {} {stage}: engine {want:?}, VAP {got:?} {message:?}",
                    check.rule()
                ));
            } else if let (Outcome::Flag(_), Some(m)) = (&got, &message) {
                tally.flagged += 1;
                assert!(
                    m.starts_with(&format!("[{}] ", check.rule())),
                    "{name}: {m}"
                );
                let f = v
                    .findings
                    .iter()
                    .find(|f| f.rule.as_str() == check.rule())
                    .unwrap();
                assert!(m.contains(&f.fix), "{name}: {m:?} lacks {:?}", f.fix);
            }
        }
    }
}

#[test]
fn exported_policies_decide_like_the_engine_in_strict_mode() {
    with_stack(|| {
        let api = Apiserver::new();
        let policy = policy(Some(STRICT), None);
        let exported = export(&policy).expect("strict mode exports");
        let judges = Judges {
            api: &api,
            exported: &exported,
            policy: &policy,
        };
        let mut tally = Tally::default();
        let mut compared = 0;
        for (name, case) in strict_cases() {
            compare(
                &judges,
                &name,
                &case.object,
                case.old_object.as_ref(),
                &case.groups,
                &mut tally,
            );
            compared += 1;
        }
        for (name, case) in corpus() {
            compare(&judges, &name, &case.object, None, &case.groups, &mut tally);
            compared += 1;
        }
        let (out, flagged) = (tally.out, tally.flagged);
        eprintln!("{compared} objects compared, {flagged} verdicts flagged alike");
        assert!(flagged > 50, "the comparison flagged only {flagged}");
        assert!(out.is_empty(), "{} differ:\n{}", out.len(), out.join("\n"));
    });
}

/// Every review the bypass corpus expects denied is denied under the strict policy as
/// sent to the validating webhook, whoever sends it.
#[test]
fn no_deny_expected_bypass_is_admitted_in_strict_mode() {
    let policy = policy(Some(STRICT), None);
    let dir = repo_root().join("tests/fixtures/bypass");
    let mut admitted = Vec::new();
    let mut denied = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        let doc: Value = serde_yaml_ng::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        if doc["expect"]["allowed"] != Value::Bool(false) {
            continue;
        }
        let groups: Vec<String> = doc["groups"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|g| g.as_str().map(String::from))
            .collect();
        let v = validate(&policy, &doc["object"], None, &groups);
        if v.allowed {
            admitted.push(path.file_name().unwrap().to_string_lossy().into_owned());
        } else {
            denied += 1;
        }
    }
    assert!(denied > 20, "only {denied} deny-expected cases");
    assert!(admitted.is_empty(), "admitted in strict mode: {admitted:?}");
}
