//! The exported ValidatingAdmissionPolicies in a real API server with no webhook registered
//! (SANDBOX_WEBHOOK=0): they are created, type-check without warnings against the real
//! schemas, and refuse what the engine denies, under the same rule names.

use crate::sandbox;

use std::collections::BTreeMap;
use std::time::Duration;

use sandbox::{corpus, stderr, wait_until};

/// The control plane to this test alone, with trainplace's webhook configurations
/// taken away and the guardrails overlay applied and in force; the turn's end puts the
/// webhooks back and deletes the policies.
fn turn() -> sandbox::Turn {
    let turn = sandbox::shared_exclusive();
    turn.without_webhooks();
    let sb = turn.sb();
    let overlay = format!(
        "{}/manifests/overlays/guardrails",
        env!("CARGO_MANIFEST_DIR")
    );
    let out = sb.kubectl(&["apply", "-k", &overlay]);
    assert!(
        out.status.success(),
        "kubectl apply -k {overlay}: {}",
        stderr(&out)
    );
    // The API server's policy informer picks them up asynchronously: wait until a job
    // the engine denies is refused by the policy.
    let ns = sb.namespace("probe");
    let probe = corpus::placed(&corpus::fixture("workloads/job-one-gpu.yaml"), &ns);
    wait_until(Duration::from_secs(30), "the policies in force", || {
        corpus::dry_run(sb, &probe)
            .is_err_and(|e| e.contains("[partial-node]") && e.contains("ValidatingAdmissionPolicy"))
    });
    turn
}

#[test]
fn every_policy_type_checks_against_the_real_schemas_without_warnings() {
    let turn = turn();
    let sb = turn.sb();
    wait_until(
        Duration::from_secs(60),
        "type checking of the policy",
        || {
            let list = sb.json(&[
                "get",
                "validatingadmissionpolicies",
                "-l",
                "app.kubernetes.io/name=trainplace",
            ]);
            let items = list["items"].as_array().unwrap();
            // The embedded policy enforces every rule everywhere: one policy.
            items.len() == 1
                && items
                    .iter()
                    .all(|p| p["status"]["observedGeneration"] == p["metadata"]["generation"])
        },
    );
    let list = sb.json(&[
        "get",
        "validatingadmissionpolicies",
        "-l",
        "app.kubernetes.io/name=trainplace",
    ]);
    for p in list["items"].as_array().unwrap() {
        let warnings = &p["status"]["typeChecking"]["expressionWarnings"];
        assert!(
            warnings.is_null() || warnings.as_array().is_some_and(Vec::is_empty),
            "{}: {warnings:#}",
            p["metadata"]["name"]
        );
    }
}

/// Where the policies and the engine legitimately differ on the object as submitted, and
/// which of the two is stricter: the same cases `crates/engine/tests/vap_equivalence.rs`
/// lists, with why, for its offline CEL evaluator (the real API server agrees with it on
/// every other fixture). Fixtures the engine refuses to read (an input error of the
/// rewrite, not a deny rule) are not compared.
const KNOWN: &[(&str, &str, &str)] = &[
    ("workloads/job-reshape.yaml", "partial-node", "policy"),
    ("workloads/jobset-reshape.yaml", "partial-node", "policy"),
    ("workloads/mpijob-reshape.yaml", "partial-node", "policy"),
    (
        "workloads/pytorchjob-reshape.yaml",
        "partial-node",
        "policy",
    ),
    ("workloads/trainjob-reshape.yaml", "partial-node", "policy"),
    (
        "workloads/rayservice-launcher-evidence.yaml",
        "partial-node",
        "engine",
    ),
];

#[test]
fn without_the_webhook_the_api_server_refuses_what_the_engine_denies_under_the_same_rule() {
    let turn = turn();
    let sb = turn.sb();
    let ns = sb.namespace("corpus");
    let mut differ: BTreeMap<String, String> = BTreeMap::new();
    let mut refused = 0;
    let fixtures = corpus::fixtures();
    for f in &fixtures {
        let object = corpus::placed(&f.object, &ns);
        let Some(want) = corpus::engine_denies(&object, &ns) else {
            continue;
        };
        let got: Vec<&str> = match corpus::dry_run(sb, &object) {
            Ok(_) => Vec::new(),
            Err(e) => {
                if !e.contains("ValidatingAdmissionPolicy") {
                    // Refused before the policies (schema validation): not theirs to judge.
                    differ.insert(
                        f.name.clone(),
                        format!("refused by the API server itself: {e}"),
                    );
                    continue;
                }
                ["impossible-request", "multi-az", "partial-node"]
                    .into_iter()
                    .filter(|r| e.contains(&format!("[{r}]")))
                    .collect()
            }
        };
        if !got.is_empty() {
            refused += 1;
        }
        // The API server reports the first policy that denies, not every one.
        let agree = if want.is_empty() {
            got.is_empty()
        } else {
            !got.is_empty() && got.iter().all(|r| want.contains(r))
        };
        if !agree {
            differ.insert(f.name.clone(), format!("engine {want:?}, policies {got:?}"));
        }
    }
    eprintln!(
        "{} fixtures, {refused} refused by the policies, {} differ",
        fixtures.len(),
        differ.len()
    );
    let unexplained: Vec<String> = differ
        .iter()
        .filter(|(name, _)| !KNOWN.iter().any(|(n, _, _)| n == name))
        .map(|(n, d)| format!("{n}: {d}"))
        .collect();
    assert!(
        unexplained.is_empty(),
        "policies and engine differ:\n{}",
        unexplained.join("\n")
    );
    let stale: Vec<&str> = KNOWN
        .iter()
        .map(|(n, _, _)| *n)
        .filter(|n| !differ.contains_key(*n))
        .collect();
    assert!(
        stale.is_empty(),
        "listed as differing but agree now: {stale:?}"
    );
    assert!(
        refused >= 30,
        "the policies refused only {refused} fixtures"
    );
}
