//! Placement directives of the controllers themselves, which act outside a template's
//! own affinity: JobSet's exclusive topology gives each child Job a topology domain of
//! its own, and a LeaderWorkerSet's subgroup exclusive topology one per subgroup. On a
//! zone key that puts one training job in several zones.
//! <https://github.com/kubernetes-sigs/jobset/blob/main/api/jobset/v1alpha2/jobset_types.go> (ExclusiveKey)
//! <https://github.com/kubernetes-sigs/lws/blob/main/api/leaderworkerset/v1/leaderworkerset_types.go> (SubGroupExclusiveKeyAnnotationKey)

use serde_json::Value;

use crate::facts::policy::OptIn;
use crate::judge::finding::{Finding, Rule};
use crate::judge::judgement::Ctx;
use crate::judge::rules::OptInState;
use crate::judge::verdict::Verdict;
use crate::read::annotations::{ALLOW_MULTI_AZ, ZONE_KEYS};
use crate::read::json::{items, str_at};
use crate::read::workload::Kind;

const JOBSET_EXCLUSIVE: &str = "alpha.jobset.sigs.k8s.io/exclusive-topology";
const LWS_SUBGROUP_EXCLUSIVE: &str = "leaderworkerset.sigs.k8s.io/subgroup-exclusive-topology";

/// Where the object asks its controller to spread one job over zones: (field, key).
fn zone_directive(object: &Value, kind: Kind) -> Option<(String, String)> {
    let on_zone = |v: Option<&str>| v.filter(|k| ZONE_KEYS.contains(k)).map(String::from);
    match kind {
        Kind::JobSet | Kind::TrainJob => {
            if let Some(k) = on_zone(str_at(
                object,
                &["metadata", "annotations", JOBSET_EXCLUSIVE],
            )) {
                return Some((format!("metadata.annotations[{JOBSET_EXCLUSIVE}]"), k));
            }
            items(object, &["spec", "replicatedJobs"])
                .iter()
                .enumerate()
                .find_map(|(i, rj)| {
                    let k = on_zone(str_at(
                        rj,
                        &["template", "metadata", "annotations", JOBSET_EXCLUSIVE],
                    ))?;
                    Some((
                        format!("spec.replicatedJobs[{i}].template.metadata.annotations[{JOBSET_EXCLUSIVE}]"),
                        k,
                    ))
                })
        }
        Kind::LeaderWorkerSet => on_zone(str_at(
            object,
            &["metadata", "annotations", LWS_SUBGROUP_EXCLUSIVE],
        ))
        .map(|k| (format!("metadata.annotations[{LWS_SUBGROUP_EXCLUSIVE}]"), k)),
        _ => None,
    }
}

/// A multi-pod training workload whose controller is told to give parts of it zones
/// of their own.
pub(crate) fn check(object: &Value, multi_pod: bool, ctx: &Ctx<'_, '_>, verdict: &mut Verdict) {
    if !multi_pod {
        return;
    }
    let Some((field, key)) = zone_directive(object, ctx.kind) else {
        return;
    };
    let set = str_at(object, &["metadata", "annotations", ALLOW_MULTI_AZ]) == Some("true");
    let opt_in = ctx.opt_in(set, OptIn::AllowMultiAz);
    if opt_in == OptInState::Granted {
        return;
    }
    verdict.findings.push(Finding {
        rule: Rule::MultiAz,
        mode: ctx.eff.mode_multi_az(),
        site: field.clone(),
        found: format!(
            "{field} = {key} tells the controller to give each part of the job a zone of its own: the job spans availability zones, and EFA traffic cannot cross zones."
        ),
        fix: format!("remove the annotation, or give it a key below the zone (kubernetes.io/hostname, a rack or network-node label); trainplace holds the whole job in one {key}."),
        opt_in: Some(ALLOW_MULTI_AZ),
        why: None,
    });
}

/// A copy of what a pod's admission mark digests (`facts::mark::digest`): its
/// metadata, its spec but for the containers' command, args, env and mounts and the
/// volumes. Far smaller than the pod a trusted controller may send (up to the API
/// server's request limit), and the same digest.
fn digested_fields(pod: &Value) -> Option<Value> {
    let spec = pod.get("spec")?.as_object()?;
    let mut copy = serde_json::Map::new();
    for (k, v) in spec {
        let v = match k.as_str() {
            "volumes" => continue,
            "containers" | "initContainers" | "ephemeralContainers" => Value::Array(
                items(v, &[])
                    .iter()
                    .map(|c| {
                        let keep = ["name", "resources", "restartPolicy"];
                        let kept = keep
                            .iter()
                            .filter_map(|f| Some((f.to_string(), c.get(*f)?.clone())));
                        Value::Object(kept.collect())
                    })
                    .collect(),
            ),
            _ => v.clone(),
        };
        copy.insert(k.clone(), v);
    }
    Some(serde_json::json!({"metadata": pod.get("metadata"), "spec": copy}))
}

/// The label JobSet writes on every pod of a child Job: the Job's key.
const JOBSET_JOB_KEY: &str = "jobset.sigs.k8s.io/job-key";

/// A JobSet pod as its Job's template made it, before JobSet's own pod webhook placed it
/// in its Job's exclusive topology domain: the leader (completion index 0) gets a
/// required pod affinity and anti-affinity on the topology key, each follower a node
/// selector for the leader's domain. Those edits are the placement the submitter asked
/// for on the JobSet (`exclusive-topology`), so the template's admission mark still
/// vouches for the pod without them. `None` when the pod is no such pod.
/// <https://github.com/kubernetes-sigs/jobset/blob/main/pkg/webhooks/pod_webhook.go> (setExclusiveAffinities, setNodeSelector)
pub(crate) fn before_jobset_placement(pod: &Value) -> Option<Value> {
    let key = str_at(pod, &["metadata", "annotations", JOBSET_EXCLUSIVE])?;
    str_at(pod, &["metadata", "labels", JOBSET_JOB_KEY])?;
    let mut pod = digested_fields(pod)?;
    let spec = pod.get_mut("spec")?.as_object_mut()?;
    if let Some(selector) = spec.get_mut("nodeSelector").and_then(Value::as_object_mut) {
        selector.remove(key);
        if selector.is_empty() {
            spec.remove("nodeSelector");
        }
    }
    // A term JobSet wrote: on the exclusive key, selecting by the Job key.
    let jobsets = |t: &Value| {
        t.get("topologyKey").and_then(Value::as_str) == Some(key)
            && items(t, &["labelSelector", "matchExpressions"])
                .iter()
                .any(|e| e.get("key").and_then(Value::as_str) == Some(JOBSET_JOB_KEY))
    };
    if let Some(affinity) = spec.get_mut("affinity").and_then(Value::as_object_mut) {
        for kind in ["podAffinity", "podAntiAffinity"] {
            let Some(of) = affinity.get_mut(kind).and_then(Value::as_object_mut) else {
                continue;
            };
            let required = "requiredDuringSchedulingIgnoredDuringExecution";
            if let Some(terms) = of.get_mut(required).and_then(Value::as_array_mut) {
                if !crate::budget::draw_len("affinity terms", terms.len()) {
                    return None;
                }
                terms.retain(|t| !jobsets(t));
                if terms.is_empty() {
                    of.remove(required);
                }
            }
            if of.is_empty() {
                affinity.remove(kind);
            }
        }
        if affinity.is_empty() {
            spec.remove("affinity");
        }
    }
    Some(pod)
}
