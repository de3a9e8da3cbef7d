//! What controllers write on a pod or a template after trainplace signed the template
//! it came from, undone: the object as the signed template made it, for checking its
//! admission mark (`judge::upstream`). Each edit is the placement or plumbing the
//! submitter asked that controller for; any other edit still breaks the mark.

use serde_json::Value;

use crate::read::annotations::{
    JOBSET_EXCLUSIVE, LWS_EXCLUSIVE, LWS_GROUP_KEY, LWS_SUBGROUP_EXCLUSIVE, LWS_SUBGROUP_KEY,
};
use crate::read::json::{items, str_at};

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

/// The exclusive placement a controller gave this pod: the topology key, the labels
/// the terms it wrote select by, and whether it also pins followers with a node
/// selector on that key (JobSet).
fn exclusive_placement(pod: &Value) -> Option<(&str, &'static [&'static str], bool)> {
    let annotation = |k| str_at(pod, &["metadata", "annotations", k]);
    let label = |k| str_at(pod, &["metadata", "labels", k]);
    if let Some(key) = annotation(JOBSET_EXCLUSIVE)
        && label(JOBSET_JOB_KEY).is_some()
    {
        return Some((key, &[JOBSET_JOB_KEY], true));
    }
    let key = annotation(LWS_EXCLUSIVE).or_else(|| annotation(LWS_SUBGROUP_EXCLUSIVE))?;
    label(LWS_GROUP_KEY)?;
    Some((key, &[LWS_GROUP_KEY, LWS_SUBGROUP_KEY], false))
}

/// A pod as its template made it, before a controller's own pod webhook placed it in
/// an exclusive topology domain. JobSet's gives the leader (completion index 0) a
/// required pod affinity and anti-affinity on the topology key and each follower a
/// node selector for the leader's domain; LeaderWorkerSet's gives a group's (or
/// subgroup's) first pod the affinity and anti-affinity. Those edits are the placement
/// the submitter asked for on the JobSet or LeaderWorkerSet (`exclusive-topology`), so
/// the template's admission mark still vouches for the pod without them. `None` when
/// the pod is no such pod.
/// <https://github.com/kubernetes-sigs/jobset/blob/main/pkg/webhooks/pod_webhook.go> (setExclusiveAffinities, setNodeSelector)
/// <https://github.com/kubernetes-sigs/lws/blob/main/pkg/webhooks/pod_webhook.go> (SetExclusiveAffinities)
pub(crate) fn before_exclusive_placement(pod: &Value) -> Option<Value> {
    let (key, selects_by, node_selector) = exclusive_placement(pod)?;
    let mut pod = digested_fields(pod)?;
    let spec = pod.get_mut("spec")?.as_object_mut()?;
    if node_selector
        && let Some(selector) = spec.get_mut("nodeSelector").and_then(Value::as_object_mut)
    {
        selector.remove(key);
        if selector.is_empty() {
            spec.remove("nodeSelector");
        }
    }
    // A term the controller wrote: on the exclusive key, selecting by its label.
    let placed = |t: &Value| {
        t.get("topologyKey").and_then(Value::as_str) == Some(key)
            && items(t, &["labelSelector", "matchExpressions"])
                .iter()
                .any(|e| {
                    e.get("key")
                        .and_then(Value::as_str)
                        .is_some_and(|k| selects_by.contains(&k))
                })
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
                terms.retain(|t| !placed(t));
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

/// The container KubeRay adds to the head template of a SidecarMode RayJob's cluster.
/// <https://github.com/ray-project/kuberay/blob/master/ray-operator/controllers/ray/rayjob_controller.go> (SidecarMode)
const RAY_JOB_SUBMITTER: &str = "ray-job-submitter";

/// `template` without its container named `name`; `None` when it has none.
fn without_container(template: &Value, name: &str) -> Option<Value> {
    let containers = template.pointer("/spec/containers")?.as_array()?;
    let at = containers
        .iter()
        .position(|c| c.get("name").and_then(Value::as_str) == Some(name))?;
    let mut template = template.clone();
    if let Some(list) = template
        .pointer_mut("/spec/containers")
        .and_then(Value::as_array_mut)
    {
        list.remove(at);
    }
    Some(template)
}

/// A RayCluster's head template as its SidecarMode RayJob's template made it: without
/// the submitter container KubeRay adds. `None` when it has none.
pub(crate) fn before_ray_job_submitter(template: &Value) -> Option<Value> {
    without_container(template, RAY_JOB_SUBMITTER)
}
