//! The webhook and the exported ValidatingAdmissionPolicies together in a real API server,
//! as `kubectl apply -k manifests/overlays/guardrails` beside the webhook install leaves
//! them: the policies see what the mutating webhook wrote, and refuse nothing the webhook
//! admits.

use crate::sandbox;

use std::time::Duration;

use sandbox::{corpus, stderr, wait_until};

#[test]
fn with_the_webhook_up_no_object_it_admits_is_refused_by_a_policy() {
    // The policies are cluster-wide: the control plane to this test alone, and they are
    // deleted when it ends.
    let turn = sandbox::shared_exclusive();
    let sb = turn.sb();
    let overlay = format!(
        "{}/manifests/overlays/guardrails",
        env!("CARGO_MANIFEST_DIR")
    );
    let out = sb.kubectl(&["apply", "-k", &overlay]);
    assert!(out.status.success(), "{}", stderr(&out));
    let ns = sb.namespace("corpus");
    let denied = corpus::placed(&corpus::fixture("workloads/job-one-gpu.yaml"), &ns);
    wait_until(Duration::from_secs(30), "the policies loaded", || {
        let list = sb.json(&["get", "validatingadmissionpolicies"]);
        // The embedded policy's export: one policy holding every rule.
        list["items"].as_array().is_some_and(|i| i.len() == 1)
    });
    let mut admitted = 0;
    let mut refused_by_policy = Vec::new();
    for f in corpus::fixtures() {
        let object = corpus::placed(&f.object, &ns);
        match corpus::dry_run(sb, &object) {
            Ok(_) => admitted += 1,
            // The API server runs the policies before the validating webhook, so a
            // policy answers first for what both deny; only an object the engine
            // admits counts against the policies.
            Err(e) if e.contains("ValidatingAdmissionPolicy") => {
                if corpus::engine_denies(&object, &ns).is_some_and(|d| d.is_empty()) {
                    refused_by_policy.push(format!("{}: {e}", f.name));
                }
            }
            Err(_) => {}
        }
    }
    assert!(
        refused_by_policy.is_empty(),
        "refused by a policy after the webhook admitted (or mutated) them:\n{}",
        refused_by_policy.join("\n")
    );
    assert!(admitted >= 60, "only {admitted} fixtures admitted");
    let e = corpus::dry_run(sb, &denied).unwrap_err();
    assert!(e.contains("[partial-node]"), "{e}");
}
