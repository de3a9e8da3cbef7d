//! A Scale review (`kubectl scale`, an autoscaler): judged as the workload it scales.

use kube_core::DynamicObject;
use kube_core::admission::AdmissionRequest;
use serde_json::Value;

use crate::facts::inventory::{Snapshot, scale_replicas_path};
use crate::read::json::Lookup as _;

/// What a Scale review is judged as.
pub(super) enum Scaled {
    /// The workload it scales, with the new replica count written in, and the workload
    /// as stored (what the scale changes, as an UPDATE's old object).
    Judge { scaled: Value, stored: Value },
    /// Not judged (a scale-down, or a workload the inventory does not hold), with why.
    Pass(String),
}

/// A Scale (`pytorchjobs/scale`, `paddlejobs/scale`) carries only
/// a replica count: judge the workload it scales, from the inventory, with its
/// CRD's `specReplicasPath` set to the new count, so `kubectl scale` or an autoscaler cannot grow a job past what its
/// layout allows.
pub(super) fn scaled_object(
    req: &AdmissionRequest<DynamicObject>,
    scale: &Value,
    namespace: &str,
    inventory: Option<&Snapshot>,
) -> Scaled {
    let replicas = |v: &Value| v.lookup("/spec/replicas").and_then(Value::as_u64);
    let Some(new) = replicas(scale) else {
        return Scaled::Pass("trainplace: a Scale without spec.replicas was not judged.".into());
    };
    let resource = req.resource.resource.as_str();
    let Some(parent) = inventory.and_then(|i| i.scalable(namespace, resource, &req.name)) else {
        return Scaled::Pass(format!(
            "trainplace could not judge this scale of {resource}/{}: the cluster inventory does not hold it (run the webhook with --inventory auto); the new size was not checked against the layout rules.",
            req.name
        ));
    };
    let Some(path) = scale_replicas_path(resource) else {
        return Scaled::Pass(format!(
            "trainplace does not know where a scale of {resource} writes its replicas; the new size was not checked."
        ));
    };
    let mut scaled = parent.clone();
    let (holder, key) = path.rsplit_once('/').unwrap_or(("", path));
    if let Some(m) = scaled.pointer_mut(holder).and_then(Value::as_object_mut) {
        m.insert(key.to_string(), Value::from(new));
    }
    Scaled::Judge {
        scaled,
        stored: parent.clone(),
    }
}
