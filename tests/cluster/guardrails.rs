//! The webhook and the exported ValidatingAdmissionPolicies together in a real API server,
//! as `kubectl apply -k manifests/overlays/guardrails` beside the webhook install leaves
//! them: the policies see what the mutating webhook wrote, and refuse nothing the webhook
//! admits.

use crate::manifests_helpers::kustomize;
use crate::sandbox;

use std::time::Duration;

use sandbox::{Sandbox, corpus, stderr, wait_until};
use serde_json::json;

/// Deletes the policies and bindings it names when dropped, also when the test fails.
struct Removed<'a>(&'a Sandbox, Vec<String>);

impl Drop for Removed<'_> {
    fn drop(&mut self) {
        let mut args = vec!["delete", "--ignore-not-found"];
        args.extend(self.1.iter().map(String::as_str));
        let out = self.0.kubectl(&args);
        if !out.status.success() {
            eprintln!("removing {:?}: {}", self.1, stderr(&out));
        }
    }
}

#[test]
fn with_the_webhook_up_no_object_it_admits_is_refused_by_a_policy() {
    // Beside the other suites: the overlay's policy as it renders, its binding narrowed
    // to this test's namespace, so no other test's objects meet it. Both are deleted when
    // the test ends.
    let turn = sandbox::shared();
    let sb = turn.sb();
    let ns = sb.namespace("corpus");
    let overlay =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests/overlays/guardrails");
    let mut objects = kustomize(&overlay);
    let mut names = Vec::new();
    for o in &mut objects {
        let kind = o["kind"].as_str().unwrap_or("").to_lowercase();
        names.push(format!(
            "{kind}/{}",
            o["metadata"]["name"].as_str().unwrap()
        ));
        if kind == "validatingadmissionpolicybinding" {
            o["spec"]["matchResources"]["namespaceSelector"] =
                json!({"matchLabels": {"kubernetes.io/metadata.name": ns}});
        }
    }
    // The embedded policy's export: one policy holding every rule, and its binding.
    assert_eq!(names.len(), 2, "{names:?}");
    let _removed = Removed(sb, names);
    let list = json!({"apiVersion": "v1", "kind": "List", "items": objects});
    let out = sb.kubectl_stdin(&["apply", "-f", "-"], Some(&list.to_string()));
    assert!(out.status.success(), "{}", stderr(&out));
    let denied = corpus::placed(&corpus::fixture("workloads/job-one-gpu.yaml"), &ns);
    // In force: the policy refuses what the webhook would have refused too, first.
    wait_until(Duration::from_secs(30), "the policy in force", || {
        corpus::dry_run(sb, &denied).is_err_and(|e| e.contains("ValidatingAdmissionPolicy"))
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
