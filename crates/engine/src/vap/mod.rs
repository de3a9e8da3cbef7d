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
mod checks;
mod controllers;
mod error;
mod facts;
mod ident;
mod sites;
mod text;

use serde_json::{Value, json};

use crate::answer::mark::ADMITTED;
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
/// (Pods on CREATE).
fn resource_rules() -> Value {
    let rule = |group: &str, version: &str, resources: &[&str], ops: &[&str], scope: &str| json!({"apiGroups": [group], "apiVersions": [version], "operations": ops, "resources": resources, "scope": scope});
    let both = ["CREATE", "UPDATE"];
    let ns = "Namespaced";
    json!([
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
    ])
}

/// The resource rules of namespaced kinds.
fn namespaced_rules() -> Value {
    let rules = resource_rules();
    let all = rules.as_array().map(Vec::as_slice).unwrap_or_default();
    Value::Array(
        all.iter()
            .filter(|r| r["scope"] == "Namespaced")
            .cloned()
            .collect(),
    )
}

/// Objects the webhook leaves alone: a granted `skip`, and pods a trusted controller
/// makes from a template that carries trainplace's admission mark (their template
/// was judged with the submitter's grants; CEL cannot verify the mark's HMAC).
fn match_conditions(policy: &Policy) -> Value {
    let ann = "has(object.metadata.annotations)";
    let skip = text::lit(SKIP);
    let admitted = text::lit(ADMITTED);
    json!([
        {
            "name": "not-skipped",
            "expression": format!("!({ann} && {skip} in object.metadata.annotations && object.metadata.annotations[{skip}] == 'true' && {})", facts::skip_granted(policy)),
        },
        {
            "name": "not-a-pod-of-an-admitted-template",
            "expression": format!("!(object.kind == 'Pod' && {ann} && {admitted} in object.metadata.annotations && has(request.userInfo.groups) && request.userInfo.groups.exists(g, g in {}))", text::list(&policy.controller_groups())),
        },
    ])
}

fn labels(check: Check) -> Value {
    json!({"app.kubernetes.io/name": "trainplace", RULE_LABEL: check.rule()})
}

fn admission_policy(policy: &Policy, check: Check) -> Result<Value, ExportError> {
    let variables: Vec<Value> = facts::variables(policy)?
        .into_iter()
        .map(|v| json!({"name": v.name, "expression": text::dyn_map_values(&v.expression)}))
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
                "resourceRules": resource_rules(),
            },
            "matchConditions": match_conditions(policy),
            "variables": variables,
            "validations": [{
                "expression": text::dyn_map_values(&checks::validation(check)),
                "messageExpression": text::dyn_map_values(&checks::message(check)),
                "reason": "Forbidden",
            }],
        },
    }))
}

/// Every policy and binding for `policy`, policies first.
pub fn export(policy: &Policy) -> Result<Vec<Value>, ExportError> {
    let mut policies = Vec::new();
    let mut out_bindings = Vec::new();
    for check in Check::ALL {
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
                spec["matchResources"]["resourceRules"] = namespaced_rules();
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
