//! Where a pod template is pinned in zones, as strict mode reads it: `nodeSelector`
//! `topology.kubernetes.io/zone` (the kubelet refuses a pod whose node does not match
//! it, so `spec.nodeName` cannot take the pod elsewhere), or required node-affinity
//! terms that each allow only the zone.

use serde_json::Value;

use super::reach::terms;
use crate::read::annotations::LABEL_ZONE;
use crate::read::json::items;

/// How a template is pinned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Pinned {
    /// `nodeSelector` names this zone.
    Selector(String),
    /// Every required term allows only `zone` (the policy's zone was asked for).
    Terms,
    /// Not pinned to the zone asked for.
    No,
}

/// Whether `spec` is pinned to `zone` (any one zone, through `nodeSelector`, when the
/// policy names none).
pub(crate) fn pinned(spec: &Value, zone: Option<&str>) -> Pinned {
    if let Some(z) = spec
        .get("nodeSelector")
        .and_then(|s| s.get(LABEL_ZONE))
        .and_then(Value::as_str)
    {
        return match zone {
            Some(want) if want != z => Pinned::No,
            _ => Pinned::Selector(z.to_string()),
        };
    }
    let Some(want) = zone else {
        return Pinned::No;
    };
    let terms = terms(spec);
    let only = |t: &Value| {
        items(t, &["matchExpressions"]).iter().any(|e| {
            let values = items(e, &["values"]);
            e.get("key").and_then(Value::as_str) == Some(LABEL_ZONE)
                && e.get("operator").and_then(Value::as_str) == Some("In")
                && !values.is_empty()
                && values.iter().all(|v| v.as_str() == Some(want))
        })
    };
    if !terms.is_empty() && terms.iter().all(only) {
        Pinned::Terms
    } else {
        Pinned::No
    }
}
