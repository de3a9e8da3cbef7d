//! Which controller made a pod, for a note on its verdict: a pod of a controller whose
//! templates trainplace judges at submit time (a RayCluster, a Volcano Job, ...) or of
//! one it does not know is still judged as a pod, and the verdict says by whom it was made.

use serde_json::Value;

use crate::facts::inventory::Snapshot;
use crate::read::json::{items, str_at};
use crate::read::podspec::PodView;

/// Controllers whose pods need no note: Kubernetes' own, and the training operators
/// whose pods trainplace has always judged through their templates' labels.
const PLAIN: [(&str, &str); 7] = [
    ("batch", "Job"),
    ("apps", "ReplicaSet"),
    ("apps", "StatefulSet"),
    ("apps", "DaemonSet"),
    ("", "Node"),
    ("kubeflow.org", "PyTorchJob"),
    ("kubeflow.org", "MPIJob"),
];

/// Controllers of the kinds trainplace judges from their templates: their pods get a
/// note naming the controller, not silence.
const JUDGED: [(&str, &str); 7] = [
    ("ray.io", "RayCluster"),
    ("batch.volcano.sh", "Job"),
    ("kubeflow.org", "PaddleJob"),
    ("kubeflow.org", "TFJob"),
    ("kubeflow.org", "XGBoostJob"),
    ("kubeflow.org", "JAXJob"),
    ("sagemaker.amazonaws.com", "HyperPodPyTorchJob"),
];

/// The note for a device-asking pod made by a controller other than the plain ones.
pub(crate) fn note(pod: &Value, view: &PodView<'_>) -> Option<String> {
    if view.accelerators().is_none() && view.efa() == 0 && view.claims == 0 {
        return None;
    }
    let owner = items(pod, &["metadata", "ownerReferences"])
        .iter()
        .find(|o| o.get("controller").and_then(Value::as_bool) == Some(true))?;
    let api = str_at(owner, &["apiVersion"]).unwrap_or("");
    let kind = str_at(owner, &["kind"]).unwrap_or("");
    let name = str_at(owner, &["name"]).unwrap_or("");
    let group = api.rsplit_once('/').map_or("", |(g, _)| g);
    if PLAIN.contains(&(group, kind)) {
        return None;
    }
    Some(if JUDGED.contains(&(group, kind)) {
        format!(
            "made by {api} {kind} {name}: trainplace judges the {kind}'s templates when it is created or updated; this pod is judged as a pod."
        )
    } else {
        format!(
            "made by {api} {kind} {name}, a controller trainplace does not handle: judged as a pod (its template was not laid out before this pod was made)."
        )
    })
}

/// A pod's controller reference (the owner whose `controller` is true).
pub(crate) fn controller(pod: &Value) -> Option<&Value> {
    items(pod, &["metadata", "ownerReferences"])
        .iter()
        .find(|o| o.get("controller").and_then(Value::as_bool) == Some(true))
}

/// How many pods the pod's controller runs, as the inventory holds it (a batch Job's
/// active pods, a StatefulSet's replicas, a training CRD's replicas): `Some(None)` when
/// the owner is held but cannot be counted, `None` when the inventory does not hold this
/// owner (not yet watched, another kind, or another object of the same name: the uid
/// differs).
pub(crate) fn owner_pods(pod: &Value, inventory: &Snapshot) -> Option<Option<u32>> {
    let owner = controller(pod)?;
    let at = |k: &str| str_at(owner, &[k]).unwrap_or("");
    let namespace = str_at(pod, &["metadata", "namespace"]).unwrap_or("");
    let size = inventory.owner(namespace, at("apiVersion"), at("kind"), at("name"))?;
    let same = size.uid.is_empty() || at("uid").is_empty() || size.uid == at("uid");
    same.then_some(size.pods)
}
