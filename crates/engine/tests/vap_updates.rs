//! The exported policies judge an UPDATE for what it changes (`oldObject`), under the
//! embedded, the restricted and the strict policy:
//! - a controller's update that changes nothing they judge (the garbage collector
//!   removing a finalizer, Kueue unsuspending a job) is never refused, whatever the
//!   object and whoever sends it, though the same object is refused on CREATE;
//! - an UPDATE that brings the violation (from the same object without devices) is
//!   refused as the CREATE is.

mod vap_support;

use std::collections::BTreeMap;

use serde_json::Value;
use trainplace_engine::Policy;
use trainplace_engine::vap::{Check, export, policy_of};
use vap_support::corpus::{corpus, with_stack};
use vap_support::fixture_env::policy;
use vap_support::{Apiserver, Request};

/// `object` with every extended resource taken out of its limits and requests: nothing
/// in it asks for a device.
fn without_devices(object: &Value) -> Value {
    let mut o = object.clone();
    fn strip(v: &mut Value) {
        match v {
            Value::Object(m) => {
                for (k, child) in m.iter_mut() {
                    if (k == "limits" || k == "requests")
                        && let Some(r) = child.as_object_mut()
                    {
                        r.retain(|name, _| !name.contains('/'));
                    }
                    strip(child);
                }
                m.remove("resourceClaims");
            }
            Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    strip(&mut o);
    o
}

/// The rules whose policy refuses `object` (an UPDATE from `old` when given).
fn refused(
    api: &Apiserver,
    exported: &[Value],
    object: &Value,
    old: Option<&Value>,
    groups: &[String],
) -> Vec<&'static str> {
    let ns = object["metadata"]["namespace"]
        .as_str()
        .unwrap_or("default");
    let mut labels = BTreeMap::new();
    labels.insert("kubernetes.io/metadata.name".to_string(), ns.to_string());
    let req = Request {
        namespace: ns,
        namespace_labels: labels,
        groups,
    };
    Check::ALL
        .into_iter()
        .filter(|check| {
            policy_of(exported, *check)
                .is_some_and(|p| !matches!(api.violates_update(&p, object, old, &req), Ok(None)))
        })
        .map(Check::rule)
        .collect()
}

/// The refusals under `policy` (named `policy_name`) that no UPDATE should bring, and
/// how many corpus objects it refuses on CREATE.
fn updates_under(policy_name: &str, policy: &Policy) -> (usize, Vec<String>) {
    let api = Apiserver::new();
    let controller = vec![
        "system:serviceaccounts".to_string(),
        "system:serviceaccounts:kube-system".to_string(),
    ];
    let mut wrong = Vec::new();
    let mut refused_on_create = 0;
    let exported = export(policy).unwrap();
    for (name, case) in corpus() {
        if case.object["kind"] == "Pod" {
            // Pods are judged on CREATE only.
            continue;
        }
        let create = refused(&api, &exported, &case.object, None, &controller);
        if create.is_empty() {
            continue;
        }
        refused_on_create += 1;
        let mut finalized = case.object.clone();
        finalized["metadata"]["finalizers"] = Value::Array(Vec::new());
        let mut old = case.object.clone();
        old["metadata"]["finalizers"] = serde_json::json!(["batch.kubernetes.io/job-tracking"]);
        let update = refused(&api, &exported, &finalized, Some(&old), &controller);
        if !update.is_empty() {
            wrong.push(format!(
                "{policy_name} {name}: the finalizer's removal refused for {update:?}"
            ));
        }
        let bare = without_devices(&case.object);
        if refused(&api, &exported, &bare, None, &controller).is_empty() {
            let grown = refused(&api, &exported, &case.object, Some(&bare), &controller);
            if grown != create {
                wrong.push(format!(
                    "{policy_name} {name}: devices added by an UPDATE refused for {grown:?}, on CREATE for {create:?}"
                ));
            }
        }
    }
    (refused_on_create, wrong)
}

/// One test per policy, so that the three run side by side.
fn an_update_is_refused_only_for_what_it_changes(policy_name: &'static str, policy: Policy) {
    with_stack(move || {
        let (refused_on_create, wrong) = updates_under(policy_name, &policy);
        // 51, 60 and 156 corpus objects when this was written.
        assert!(
            refused_on_create > 40,
            "only {refused_on_create} refused on CREATE under the {policy_name} policy"
        );
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    });
}

#[test]
fn an_update_is_refused_only_for_what_it_changes_under_the_embedded_policy() {
    an_update_is_refused_only_for_what_it_changes("embedded", Policy::embedded());
}

#[test]
fn an_update_is_refused_only_for_what_it_changes_under_the_restricted_policy() {
    an_update_is_refused_only_for_what_it_changes(
        "restricted",
        policy(Some("examples/policy-restricted.yaml"), None),
    );
}

#[test]
fn an_update_is_refused_only_for_what_it_changes_under_the_strict_policy() {
    an_update_is_refused_only_for_what_it_changes(
        "strict",
        policy(Some("examples/policy-strict.yaml"), None),
    );
}
