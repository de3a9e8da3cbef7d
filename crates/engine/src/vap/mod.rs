//! The deny rules CEL can express, exported as `ValidatingAdmissionPolicy` and
//! `ValidatingAdmissionPolicyBinding` objects (admissionregistration.k8s.io/v1, GA
//! since Kubernetes 1.30): guardrails the API server evaluates itself, so they hold
//! while the webhook is down. One policy per rule (`partial-node`, `multi-az`,
//! `impossible-request`) over Pods and the pod templates of Job, JobSet, PyTorchJob,
//! MPIJob, PaddleJob, LeaderWorkerSet, TrainJob, the Ray kinds, Volcano Jobs,
//! HyperPodPyTorchJobs and training runtimes; one binding per namespace region with one
//! mode.
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

/// The label naming the rule a policy or binding exports.
pub const RULE_LABEL: &str = "trainplace.io/rule";
const API_VERSION: &str = "admissionregistration.k8s.io/v1";

/// The policy's name for a rule.
pub fn policy_name(check: Check) -> String {
    format!("trainplace-{}", check.rule())
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
            &["pytorchjobs", "mpijobs", "paddlejobs"],
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

fn labels(check: Check) -> Value {
    json!({"app.kubernetes.io/name": "trainplace", RULE_LABEL: check.rule()})
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

fn admission_policy(policy: &Policy, check: Check) -> Result<Value, ExportError> {
    let strict = strict_check(policy, check);
    // Strict mode's variables in every policy of a strict export: its `tooLarge` reads
    // no env (the impossible-request policy carries the too-large check).
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
    // The too-large check rides in the impossible-request policy (both always
    // enforced): one policy less is one conversion of the object less per list of
    // expressions (see `judged`).
    let checks: &[Check] = match check {
        Check::ImpossibleRequest => &[Check::TooLarge, Check::ImpossibleRequest],
        _ => std::slice::from_ref(&check),
    };
    let validations: Vec<Value> = checks
        .iter()
        .map(|c| validation_entry(policy, *c, strict, &renames))
        .collect();
    Ok(json!({
        "apiVersion": API_VERSION,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": policy_name(check), "labels": labels(check)},
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

/// `check`'s policy among `exported` (the objects [`export`] made), with only the
/// validation that exports `check`; `None` when the rule is off everywhere.
pub fn policy_of(exported: &[Value], check: Check) -> Option<Value> {
    let mut found = exported
        .iter()
        .find(|o| {
            o["kind"] == "ValidatingAdmissionPolicy"
                && o["metadata"]["labels"][RULE_LABEL] == check.policy().rule()
        })?
        .clone();
    let tag = format!("'[{}] '", check.rule());
    if let Some(all) = found["spec"]["validations"].as_array_mut() {
        all.retain(|v| {
            v["messageExpression"]
                .as_str()
                .is_some_and(|m| m.contains(&tag))
        });
    }
    Some(found)
}

/// Every policy and binding for `policy`, policies first.
pub fn export(policy: &Policy) -> Result<Vec<Value>, ExportError> {
    let mut policies = Vec::new();
    let mut out_bindings = Vec::new();
    for check in Check::ALL {
        if check == Check::TooLarge {
            // A validation of the impossible-request policy.
            continue;
        }
        let regions = bindings::regions(policy, check)?;
        if regions.is_empty() {
            continue;
        }
        policies.push(admission_policy(policy, check)?);
        for r in regions {
            let mut spec = json!({
                "policyName": policy_name(check),
                "validationActions": bindings::actions(r.mode),
            });
            if let Some(sel) = r.selector {
                spec["matchResources"] = json!({"namespaceSelector": sel});
            }
            if r.namespaced_only {
                spec["matchResources"]["resourceRules"] = namespaced_rules(policy.strict());
            }
            out_bindings.push(json!({
                "apiVersion": API_VERSION,
                "kind": "ValidatingAdmissionPolicyBinding",
                "metadata": {"name": format!("{}{}", policy_name(check), r.suffix), "labels": labels(check)},
                "spec": spec,
            }));
        }
    }
    policies.extend(out_bindings);
    Ok(policies)
}
