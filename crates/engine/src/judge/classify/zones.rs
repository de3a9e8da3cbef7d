//! What a template's scheduling constraints say about zones: the instance types and
//! zones its required node affinity allows, and the pod (anti-)affinities that hold the
//! job's own pods together.

use std::collections::HashSet;

use serde_json::Value;

use crate::read::annotations::{
    LABEL_HYPERPOD_JOB, LABEL_JOBSET_NAME, LABEL_RAY_CLUSTER, LABEL_REPLICATED_JOB,
    LABEL_VOLCANO_JOB, LWS_GROUP_KEY, ZONE_KEYS,
};
use crate::read::json::{items, str_at};
use crate::read::podspec::required_node_terms;

/// What the pod's scheduling constraints say about availability zones.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Zones {
    /// A single zone the pod is pinned to.
    pub pinned: Option<String>,
    /// Node affinity whose `In` lists explicitly allow more than one zone (described).
    pub allows_many: Option<String>,
    /// A hard topology spread constraint over zones (`DoNotSchedule`, the default).
    pub spread: bool,
    /// A required pod affinity on the zone topology already holds the job together.
    pub held: bool,
    /// A required pod anti-affinity on a zone key between the job's own pods.
    pub anti: bool,
}

/// What required node affinity allows for a label: a finite list, or anything.
#[derive(Debug, PartialEq)]
pub(crate) enum Allowed {
    Values(Vec<String>),
    Unbounded(String),
}

/// Combine the required node selector terms (ORed) for `keys`. `None` when no term
/// constrains the key at all.
pub(crate) fn affinity_values(pod: &Value, keys: &[&str]) -> Option<Allowed> {
    let terms = required_node_terms(pod);
    let mut any_constrained = false;
    let mut values: Vec<String> = Vec::new();
    let mut unbounded: Option<String> = None;
    if !crate::budget::draw_len(AFFINITY, terms.len()) {
        return None;
    }
    for term in terms {
        let exprs: Vec<&Value> = items(term, &["matchExpressions"])
            .iter()
            .filter(|e| {
                e.get("key")
                    .and_then(Value::as_str)
                    .is_some_and(|k| keys.contains(&k))
            })
            .collect();
        if exprs.is_empty() {
            unbounded
                .get_or_insert_with(|| "a node selector term that does not constrain it".into());
            continue;
        }
        any_constrained = true;
        // The values every `In` of the term allows: a set, so intersecting lists of
        // n values costs n lookups, not n x n comparisons.
        let mut term_values: Option<Vec<&str>> = None;
        for e in exprs {
            let op = e.get("operator").and_then(Value::as_str).unwrap_or("");
            let vals = items(e, &["values"]);
            if !crate::budget::draw_len(AFFINITY, vals.len()) {
                return None;
            }
            let vals = vals.iter().filter_map(Value::as_str);
            if op == "In" {
                term_values = Some(match term_values {
                    Some(mut prev) => {
                        let allowed: HashSet<&str> = vals.collect();
                        prev.retain(|v| allowed.contains(v));
                        prev
                    }
                    None => vals.collect(),
                });
            } else if term_values.is_none() {
                unbounded.get_or_insert_with(|| format!("operator {op}"));
            }
        }
        match term_values {
            Some(v) => values.extend(v.into_iter().map(String::from)),
            None => {
                unbounded.get_or_insert_with(|| "a term without an In list".into());
            }
        }
    }
    if !any_constrained {
        return None;
    }
    match unbounded {
        Some(why) => Some(Allowed::Unbounded(why)),
        None => {
            values.sort();
            Some(Allowed::Values(values))
        }
    }
}

const AFFINITY: &str = "spec.affinity.nodeAffinity";

/// Labels an operator sets on every pod of a job (or of a LeaderWorkerSet group) alike;
/// JobSet's replicated-job name is how a training runtime holds its node pods. They count
/// in a hold only through `matchLabelKeys` (the pod's own value), never as a literal.
const SPANNING_LABELS: [&str; 10] = [
    LABEL_JOBSET_NAME,
    LABEL_REPLICATED_JOB,
    "training.kubeflow.org/job-name",
    LWS_GROUP_KEY,
    "leaderworkerset.sigs.k8s.io/name",
    "trainer.kubeflow.org/trainjob-name",
    LABEL_RAY_CLUSTER,
    crate::read::annotations::LABEL_RAY_NODE,
    LABEL_VOLCANO_JOB,
    LABEL_HYPERPOD_JOB,
];

/// Labels an operator writes at one value on every pod of the job it holds: KubeRay's
/// `ray.io/is-ray-node: yes`, and the replicated job Kubeflow Trainer runs its training
/// nodes in, which a runtime must name `node` (how a runtime holds its node pods).
const FIXED_LABELS: [(&str, &str); 2] = [
    crate::read::annotations::RAY_NODE,
    (LABEL_REPLICATED_JOB, "node"),
];

/// A pod affinity term that selects every pod of the job and only those, so it holds
/// the job together and not some other workload or some decoy. The rule is exact: the
/// selector names the identity label at the job's own value (`matchLabels`, or `In`
/// listing that value and no other; `Exists` on the identity key adds nothing), or
/// through `matchLabelKeys`, which may also add a label the operator writes on every pod
/// of the job alike, because the scheduler fills those in with the pod's own value. A
/// further literal label counts only at the value the job's own pods carry (the
/// template's label, or one an operator always writes at one value). Why nothing more: a required pod affinity admits any zone
/// that holds one matching pod. Another literal label, even one an operator also writes
/// (`training.kubeflow.org/job-name`, a JobSet's name), can be given a value the
/// operator does not write on this job's pods; then no pod of the job matches, and the
/// pods go wherever pods carrying both labels run: decoys placed in several zones split
/// the job. `In` with a second value selects another job's pods as well. Only the
/// identity label is what the inventory counts as the job's pods, so only a hold on it
/// alone is the job's hold. A term that also names another namespace, a namespace
/// selector or `mismatchLabelKeys` selects something else again. Such a term is not
/// refused: it is not counted as the hold, and trainplace writes the exact one beside it.
fn selects_job(term: &Value, pod: &Value, identity: Option<(&str, &str)>) -> bool {
    let Some((key, value)) = identity else {
        return false;
    };
    let selector = term.get("labelSelector");
    let labels = selector
        .and_then(|s| s.get("matchLabels"))
        .and_then(Value::as_object);
    let exprs = items(term, &["labelSelector", "matchExpressions"]);
    let keys = items(term, &["matchLabelKeys"]);
    let on_key = |e: &Value| e.get("key").and_then(Value::as_str) == Some(key);
    fn operator(e: &Value) -> Option<&str> {
        e.get("operator").and_then(Value::as_str)
    }
    let names_value = |e: &Value| {
        let values = items(e, &["values"]);
        on_key(e)
            && operator(e) == Some("In")
            && !values.is_empty()
            && values.iter().all(|v| v.as_str() == Some(value))
    };
    let spans = |k: &str| k == key || SPANNING_LABELS.contains(&k);
    // Another literal label holds no decoy apart when every pod of the job carries it
    // at that value: a label the operator writes alike on all of them that the template
    // already carries at that value (a role label, `replica-type: master`, is carried by
    // part of the job only), or one the operator writes at one value.
    let carried = |k: &str, v: &Value| {
        v.as_str().is_some_and(|v| {
            (SPANNING_LABELS.contains(&k) && str_at(pod, &["metadata", "labels", k]) == Some(v))
                || FIXED_LABELS.contains(&(k, v))
        })
    };
    let exact = |k: &String, v: &Value| {
        if k == key {
            v.as_str() == Some(value)
        } else {
            carried(k, v)
        }
    };
    let inexact = labels.is_some_and(|m| m.iter().any(|(k, v)| !exact(k, v)))
        || exprs
            .iter()
            .any(|e| !(names_value(e) || (on_key(e) && operator(e) == Some("Exists"))))
        || keys.iter().any(|k| !k.as_str().is_some_and(spans))
        || !items(term, &["mismatchLabelKeys"]).is_empty()
        || term
            .get("namespaces")
            .is_some_and(|n| n.as_array().is_none_or(|a| !a.is_empty()))
        || term.get("namespaceSelector").is_some();
    if inexact {
        return false;
    }
    let has_selector = selector.is_some_and(|s| s.as_object().is_some_and(|m| !m.is_empty()));
    labels.and_then(|m| m.get(key)).and_then(Value::as_str) == Some(value)
        || exprs.iter().any(names_value)
        || (has_selector && keys.iter().any(|k| k.as_str() == Some(key)))
}

pub(super) fn required_pod_terms<'v>(pod: &'v Value, kind: &str) -> &'v [Value] {
    let terms = items(
        pod,
        &[
            "spec",
            "affinity",
            kind,
            "requiredDuringSchedulingIgnoredDuringExecution",
        ],
    );
    if crate::budget::draw_len("spec.affinity.podAffinity", terms.len()) {
        terms
    } else {
        &[]
    }
}

fn on_zone_key(term: &Value) -> bool {
    term.get("topologyKey")
        .and_then(Value::as_str)
        .is_some_and(|k| ZONE_KEYS.contains(&k))
}

pub fn zones(pod: &Value, identity: Option<(&str, &str)>) -> Zones {
    let mut z = Zones::default();
    for key in ZONE_KEYS {
        if let Some(v) = str_at(pod, &["spec", "nodeSelector", key]) {
            z.pinned = Some(v.to_string());
        }
    }
    if z.pinned.is_none() {
        match affinity_values(pod, &ZONE_KEYS) {
            Some(Allowed::Values(mut v)) => {
                v.dedup();
                if v.len() == 1 {
                    z.pinned = v.pop();
                } else if v.len() > 1 {
                    z.allows_many = Some(format!(
                        "required node affinity allows zones {}",
                        v.join(", ")
                    ));
                }
            }
            // No In list names the zones (a NotIn exclusion, Exists, a term that does
            // not constrain the zone): the pod is not pinned, and nothing asks for more
            // than one zone; the hold trainplace writes keeps the job in one.
            Some(Allowed::Unbounded(_)) | None => {}
        }
    }
    // A soft spread (`whenUnsatisfiable: ScheduleAnyway`) only scores nodes: a required
    // hold wins over it, so it puts no pod in another zone.
    let spread = items(pod, &["spec", "topologySpreadConstraints"]);
    z.spread = crate::budget::draw_len("spec.topologySpreadConstraints", spread.len())
        && spread
            .iter()
            .any(|c| on_zone_key(c) && str_at(c, &["whenUnsatisfiable"]) != Some("ScheduleAnyway"));
    // Only an affinity over the job's own pods holds the job in one zone: one with an
    // empty selector or towards another workload (CoreDNS runs in every zone) does not.
    z.held = required_pod_terms(pod, "podAffinity")
        .iter()
        .any(|t| on_zone_key(t) && selects_job(t, pod, identity));
    z.anti = required_pod_terms(pod, "podAntiAffinity")
        .iter()
        .any(|t| on_zone_key(t) && selects_job(t, pod, identity));
    z
}
