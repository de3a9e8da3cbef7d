//! The deny rules CEL can express, exported as `ValidatingAdmissionPolicy` and
//! `ValidatingAdmissionPolicyBinding` objects (admissionregistration.k8s.io/v1, GA
//! since Kubernetes 1.30): guardrails the API server evaluates itself, so they hold
//! while the webhook is down. The rules (`too-large`, `partial-node`, `multi-az`,
//! `impossible-request`) judge Pods and the pod templates of Job, JobSet, PyTorchJob,
//! MPIJob, PaddleJob, LeaderWorkerSet, TrainJob, the Ray kinds, Volcano Jobs,
//! HyperPodPyTorchJobs and training runtimes. Rules whose bindings cover the same
//! namespaces with the same mode share one policy (with the embedded policy, all of
//! them); each policy has one binding per namespace region with one mode.
//!
//! One policy for several rules because the API server converts a typed object (a Pod)
//! to the form CEL reads once per policy binding and per list of expressions it
//! evaluates (validations, messages, audit annotations; k8s.io/apiserver
//! pkg/admission/plugin/policy/validating/validator.go, each `ForInput`), whether the
//! list is empty or not. On a pod of many small objects that conversion is most of
//! what the policies cost, so every policy more is three conversions more.
//!
//! Pure: a [`Policy`] in, objects out. `tests/vap_equivalence.rs` evaluates the CEL
//! against the fixture corpus and compares each verdict with the engine's.

mod bindings;
mod bounds;
mod checks;
mod controllers;
mod error;
mod facts;
mod ident;
mod old;
mod sites;
mod strict;
mod text;

use serde_json::{Value, json};

use crate::facts::mark::ADMITTED;
use crate::facts::policy::Policy;
use crate::read::annotations::SKIP;

pub use checks::Check;
pub use error::ExportError;

/// The label naming the rules a policy or binding exports, joined by `.`
/// (`partial-node.multi-az`).
pub const RULES_LABEL: &str = "trainplace.io/rules";
const API_VERSION: &str = "admissionregistration.k8s.io/v1";

/// The checks in the order a policy holds them: an object past the bounds is answered
/// as too large before any rule reads it.
const ORDER: [Check; 4] = [
    Check::TooLarge,
    Check::PartialNode,
    Check::MultiAz,
    Check::ImpossibleRequest,
];

/// The rules of a group of checks, as the label and the policy's name say them.
fn rules(checks: &[Check]) -> String {
    let names: Vec<&str> = checks
        .iter()
        .filter(|c| **c != Check::TooLarge)
        .map(|c| c.rule())
        .collect();
    names.join(".")
}

/// The name of the policy that exports `checks`.
fn policy_name(checks: &[Check]) -> String {
    format!("trainplace-{}", rules(checks))
}

/// The kinds the webhook judges (manifests/base/webhooks.yaml), on CREATE and UPDATE
/// (Pods on CREATE); in strict mode also the core controllers' pod templates and DRA
/// claims.
fn resource_rules(strict: bool) -> Value {
    let rule = |group: &str, version: &str, resources: &[&str], ops: &[&str], scope: &str| json!({"apiGroups": [group], "apiVersions": [version], "operations": ops, "resources": resources, "scope": scope});
    let both = ["CREATE", "UPDATE"];
    let ns = "Namespaced";
    let mut rules = json!([
        rule("", "v1", &["pods"], &["CREATE"], ns),
        rule("batch", "v1", &["jobs"], &both, ns),
        rule("jobset.x-k8s.io", "*", &["jobsets"], &both, ns),
        rule(
            "kubeflow.org",
            "*",
            &[
                "pytorchjobs",
                "mpijobs",
                "paddlejobs",
                "tfjobs",
                "xgboostjobs",
                "jaxjobs"
            ],
            &both,
            ns
        ),
        rule(
            "leaderworkerset.x-k8s.io",
            "*",
            &["leaderworkersets"],
            &both,
            ns
        ),
        rule(
            "trainer.kubeflow.org",
            "*",
            &["trainjobs", "trainingruntimes"],
            &both,
            ns
        ),
        rule(
            "trainer.kubeflow.org",
            "*",
            &["clustertrainingruntimes"],
            &both,
            "Cluster"
        ),
        rule(
            "ray.io",
            "*",
            &["rayclusters", "rayjobs", "rayservices"],
            &both,
            ns
        ),
        rule("batch.volcano.sh", "*", &["jobs"], &both, ns),
        rule(
            "sagemaker.amazonaws.com",
            "*",
            &["hyperpodpytorchjobs"],
            &both,
            ns
        ),
    ]);
    if strict && let Some(all) = rules.as_array_mut() {
        all.extend([
            rule(
                "apps",
                "v1",
                &["deployments", "replicasets", "statefulsets", "daemonsets"],
                &both,
                ns,
            ),
            rule("", "v1", &["replicationcontrollers"], &both, ns),
            rule("batch", "v1", &["cronjobs"], &both, ns),
            rule(
                "resource.k8s.io",
                "*",
                &["resourceclaims", "resourceclaimtemplates"],
                &both,
                ns,
            ),
        ]);
    }
    rules
}

/// The resource rules of namespaced kinds.
fn namespaced_rules(strict: bool) -> Value {
    let rules = resource_rules(strict);
    let all = rules.as_array().map(Vec::as_slice).unwrap_or_default();
    Value::Array(
        all.iter()
            .filter(|r| r["scope"] == "Namespaced")
            .cloned()
            .collect(),
    )
}

/// Whether the policy judges the object at all (the webhook leaves the rest alone): not
/// a granted `skip`, and not a pod a trusted controller makes from a template that
/// carries trainplace's admission mark (its template was judged with the submitter's
/// grants; CEL cannot verify the mark's HMAC). Strict mode trusts no mark: only the
/// granted `skip`.
///
/// A condition of the validation, not a `matchConditions` entry: the API server
/// converts a typed object (a Pod) to the form CEL reads once for each list of
/// expressions it evaluates (match conditions, validations, messages, audit
/// annotations), and on a large pod that conversion is most of what a policy costs.
fn judged(policy: &Policy) -> String {
    let ann = "has(object.metadata.annotations)";
    let skip = text::lit(SKIP);
    let admitted = text::lit(ADMITTED);
    let not_skipped = format!(
        "!({ann} && {skip} in object.metadata.annotations && object.metadata.annotations[{skip}] == 'true' && {})",
        facts::skip_granted(policy)
    );
    if policy.strict() {
        return not_skipped;
    }
    format!(
        "{not_skipped} && !(object.kind == 'Pod' && {ann} && {admitted} in object.metadata.annotations && has(request.userInfo.groups) && request.userInfo.groups.exists(g, g in {}))",
        text::list(&policy.controller_groups())
    )
}

fn labels(checks: &[Check]) -> Value {
    json!({"app.kubernetes.io/name": "trainplace", RULES_LABEL: rules(checks)})
}

/// Whether `check` is exported in its strict form.
fn strict_check(policy: &Policy, check: Check) -> bool {
    policy.strict() && matches!(check, Check::PartialNode | Check::MultiAz)
}

/// One validation of a policy: `check`'s rule (strict mode's form when `strict`) and
/// its message, each reading the bounds and the skip first, and holding on an UPDATE
/// that brings nothing new (`renames`: the old object's variables).
fn validation_entry(
    policy: &Policy,
    check: Check,
    strict: bool,
    renames: &[(String, String)],
) -> Value {
    let (validation, message) = if strict {
        (strict::validation(check), strict::message(check))
    } else {
        (checks::validation(check), checks::message(check))
    };
    // An object past the bounds is the too-large check's; the others read nothing of
    // it. The message too: the API server evaluates every messageExpression of a policy
    // on every request, the validation passing or not (k8s.io/apiserver
    // pkg/admission/plugin/policy/validating/validator.go, `messageFilter.ForInput`).
    let (validation, message) = if check == Check::TooLarge {
        (validation, message)
    } else {
        (
            format!("variables.tooLarge != '' || ({validation})"),
            format!("variables.tooLarge != '' ? '' : ({message})"),
        )
    };
    // A precise check in a strict export: strict mode's bounds do not cover the device
    // lists it reads, so past the precise ones it holds (the webhook judges the object).
    let (validation, message) = if policy.strict() && !strict && check != Check::TooLarge {
        let past = format!("variables.{} != ''", strict::PRECISE_TOO_LARGE);
        (
            format!("{past} || ({validation})"),
            format!("{past} ? '' : ({message})"),
        )
    } else {
        (validation, message)
    };
    let judged = judged(policy);
    let validation = format!("!({judged}) || ({validation})");
    let message = format!("!({judged}) ? '' : ({message})");
    let validation = old::on_update(&validation, renames);
    json!({
        "expression": text::dyn_map_values(&validation),
        "messageExpression": text::dyn_map_values(&message),
        "reason": "Forbidden",
    })
}

/// The policy that exports `checks` (in [`ORDER`]).
fn admission_policy(policy: &Policy, checks: &[Check]) -> Result<Value, ExportError> {
    // Strict mode's variables in every policy of a strict export: its `tooLarge` reads
    // no env.
    let named: Vec<(String, String)> = if policy.strict() {
        strict::variables(policy, facts::variables(policy)?)?
    } else {
        facts::variables(policy)?
            .into_iter()
            .map(|v| (v.name.to_string(), v.expression))
            .collect()
    };
    let (named, renames) = old::with_old(named);
    let variables: Vec<Value> = named
        .into_iter()
        .map(|(name, expression)| json!({"name": name, "expression": text::dyn_map_values(&expression)}))
        .collect();
    let validations: Vec<Value> = checks
        .iter()
        .map(|c| validation_entry(policy, *c, strict_check(policy, *c), &renames))
        .collect();
    Ok(json!({
        "apiVersion": API_VERSION,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": policy_name(checks), "labels": labels(checks)},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "matchPolicy": "Equivalent",
                "namespaceSelector": {"matchExpressions": [{
                    "key": "kubernetes.io/metadata.name",
                    "operator": "NotIn",
                    "values": ["kube-system", "kube-node-lease", "trainplace"],
                }]},
                "resourceRules": resource_rules(policy.strict()),
            },
            "variables": variables,
            "validations": validations,
        },
    }))
}

/// Whether `validation` (an entry of a policy's `validations`) exports `check`: its
/// message carries the rule's tag.
fn exports(validation: &Value, check: Check) -> bool {
    let tag = format!("'[{}] '", check.rule());
    validation["messageExpression"]
        .as_str()
        .is_some_and(|m| m.contains(&tag))
}

/// The policy among `exported` (the objects [`export`] made) that holds `check`.
fn holding(exported: &[Value], check: Check) -> Option<&Value> {
    exported.iter().find(|o| {
        o["kind"] == "ValidatingAdmissionPolicy"
            && o["spec"]["validations"]
                .as_array()
                .is_some_and(|all| all.iter().any(|v| exports(v, check)))
    })
}

/// `check`'s policy among `exported` (the objects [`export`] made), with only the
/// validation that exports `check`; `None` when the rule is off everywhere.
pub fn policy_of(exported: &[Value], check: Check) -> Option<Value> {
    let mut found = holding(exported, check)?.clone();
    if let Some(all) = found["spec"]["validations"].as_array_mut() {
        all.retain(|v| exports(v, check));
    }
    Some(found)
}

/// The bindings of `check`'s policy among `exported`.
pub fn bindings_of(exported: &[Value], check: Check) -> Vec<&Value> {
    let Some(name) = holding(exported, check).map(|p| &p["metadata"]["name"]) else {
        return Vec::new();
    };
    exported
        .iter()
        .filter(|o| {
            o["kind"] == "ValidatingAdmissionPolicyBinding" && o["spec"]["policyName"] == *name
        })
        .collect()
}

/// `exported` less the validations of `leave_out`; a policy left with none goes, with
/// its bindings.
pub fn without(exported: &[Value], leave_out: &[Check]) -> Vec<Value> {
    let mut kept: Vec<Value> = exported.to_vec();
    let mut gone = Vec::new();
    for o in kept
        .iter_mut()
        .filter(|o| o["kind"] == "ValidatingAdmissionPolicy")
    {
        if let Some(all) = o["spec"]["validations"].as_array_mut() {
            all.retain(|v| !leave_out.iter().any(|c| exports(v, *c)));
            if all.is_empty() {
                gone.push(o["metadata"]["name"].clone());
            }
        }
    }
    kept.retain(|o| {
        !gone.contains(&o["metadata"]["name"]) && !gone.contains(&o["spec"]["policyName"])
    });
    kept
}

/// Every policy and binding for `policy`, policies first: the checks whose bindings
/// agree share a policy.
pub fn export(policy: &Policy) -> Result<Vec<Value>, ExportError> {
    let mut groups: Vec<(Vec<Check>, Vec<bindings::Region>)> = Vec::new();
    for check in ORDER {
        let regions = bindings::regions(policy, check)?;
        if regions.is_empty() {
            continue;
        }
        let same = |(_, r): &&mut (Vec<Check>, Vec<bindings::Region>)| {
            r.len() == regions.len() && r.iter().zip(&regions).all(|(a, b)| a.same_as(b))
        };
        match groups.iter_mut().find(|g| same(g)) {
            Some((checks, _)) => checks.push(check),
            None => groups.push((vec![check], regions)),
        }
    }
    let mut policies = Vec::new();
    let mut out_bindings = Vec::new();
    for (checks, regions) in &groups {
        policies.push(admission_policy(policy, checks)?);
        let name = policy_name(checks);
        for r in regions {
            let mut spec = json!({
                "policyName": name,
                "validationActions": bindings::actions(r.mode),
            });
            if let Some(sel) = &r.selector {
                spec["matchResources"] = json!({"namespaceSelector": sel});
            }
            if r.namespaced_only {
                spec["matchResources"]["resourceRules"] = namespaced_rules(policy.strict());
            }
            out_bindings.push(json!({
                "apiVersion": API_VERSION,
                "kind": "ValidatingAdmissionPolicyBinding",
                "metadata": {"name": format!("{name}{}", r.suffix), "labels": labels(checks)},
                "spec": spec,
            }));
        }
    }
    policies.extend(out_bindings);
    Ok(policies)
}

#[cfg(test)]
mod tests {
    use super::{Check, bindings_of, export, policy_of, without};
    use crate::facts::policy::Policy;
    use serde_json::Value;
    use trainplace_catalog::Catalog;

    fn names(objects: &[Value], kind: &str) -> Vec<String> {
        objects
            .iter()
            .filter(|o| o["kind"] == kind)
            .map(|o| o["metadata"]["name"].as_str().unwrap_or("").to_string())
            .collect()
    }

    fn tags(policy: &Value) -> Vec<String> {
        let all = policy["spec"]["validations"].as_array().unwrap();
        all.iter()
            .map(|v| {
                let m = v["messageExpression"].as_str().unwrap_or("");
                let from = m.find("'[").map_or(0, |i| i + 2);
                m[from..].split(']').next().unwrap_or("").to_string()
            })
            .collect()
    }

    #[test]
    fn rules_of_one_mode_everywhere_share_one_policy_too_large_first() {
        let exported = export(&Policy::embedded()).unwrap();
        let policies = names(&exported, "ValidatingAdmissionPolicy");
        assert_eq!(
            policies,
            ["trainplace-partial-node.multi-az.impossible-request"]
        );
        assert_eq!(
            tags(&exported[0]),
            [
                "too-large",
                "partial-node",
                "multi-az",
                "impossible-request"
            ]
        );
        assert_eq!(
            names(&exported, "ValidatingAdmissionPolicyBinding"),
            policies
        );
        for check in Check::ALL {
            assert_eq!(tags(&policy_of(&exported, check).unwrap()), [check.rule()]);
            assert_eq!(bindings_of(&exported, check).len(), 1, "{check:?}");
        }
    }

    #[test]
    fn a_rule_with_regions_of_its_own_gets_its_own_policy_and_bindings() {
        let text = "apiVersion: trainplace.io/v1alpha1\nkind: Policy\nnamespaces:\n  - match: { names: [research] }\n    rules: { partialNode: warn }\n";
        let policy = Policy::from_parts(text, "test", Catalog::embedded()).unwrap();
        let exported = export(&policy).unwrap();
        assert_eq!(
            names(&exported, "ValidatingAdmissionPolicy"),
            [
                "trainplace-multi-az.impossible-request",
                "trainplace-partial-node"
            ]
        );
        assert_eq!(bindings_of(&exported, Check::PartialNode).len(), 2);
        assert_eq!(bindings_of(&exported, Check::MultiAz).len(), 1);
        // Leaving a rule out drops its validation; a policy left with none goes, and
        // its bindings with it.
        let kept = without(&exported, &[Check::PartialNode]);
        assert_eq!(
            names(&kept, "ValidatingAdmissionPolicy"),
            ["trainplace-multi-az.impossible-request"]
        );
        assert!(bindings_of(&kept, Check::PartialNode).is_empty());
        let kept = without(&exported, &[Check::MultiAz, Check::TooLarge]);
        assert_eq!(tags(&kept[0]), ["impossible-request"]);
        assert_eq!(kept.len(), exported.len());
    }
}
