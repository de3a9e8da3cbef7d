//! What a trusted controller makes from a template trainplace admitted: the pods of a
//! Job, PyTorchJob or JobSet, and the child Jobs a JobSet makes. Each carries the
//! template's `trainplace.io/admitted` mark; when the mark verifies against the object
//! itself (`mark.rs`) it was judged at submit time with the submitter's identity and
//! grants, and is left as admitted. Anything else, a forged or copied mark included, is
//! judged; so is a pod whose own launcher says its job has more pods than the mark
//! vouches for, and one whose job the inventory already shows in another zone.

use serde_json::Value;

use crate::answer::mark::{ADMITTED, Claim, MarkKeys};
use crate::facts::policy::Policy;
use crate::facts::requester::Requester;
use crate::read::annotations::JOB_IDENTITY_LABELS;
use crate::read::json::{items, str_at};
use crate::read::podspec::PodView;
use crate::read::recognize::JobSize;
use crate::read::workload::{Kind, Site};

/// Whether the object is made by its controller from templates trainplace admitted (the
/// caller checks that a trusted controller is asking).
pub(crate) fn made_from_admitted(
    object: &Value,
    kind: Kind,
    sites: &[Site],
    who: &Requester<'_>,
    policy: &Policy,
) -> bool {
    let Some(keys) = who.marks else {
        return false;
    };
    let namespace = str_at(object, &["metadata", "namespace"]).unwrap_or(who.namespace);
    if kind == Kind::Pod {
        let Some(owner_kind) = items(object, &["metadata", "ownerReferences"])
            .iter()
            .find(|o| o.get("controller").and_then(Value::as_bool) == Some(true))
            .and_then(|o| o.get("kind")?.as_str())
        else {
            return false;
        };
        return verified(object, owner_kind, namespace, keys, policy)
            .is_some_and(|(key, value)| !placed_apart(object, namespace, (key, value), who));
    }
    // A workload a controller makes (a JobSet's child Job): every template that asks for
    // devices carries a mark that verifies, for the kind that will own its pods.
    let Some(owner_kind) = kind.pod_owner_kind() else {
        return false;
    };
    let mut any = false;
    for site in sites {
        let Some(template) = object.pointer(&site.pointer) else {
            return false;
        };
        let Ok(view) = PodView::read(template, &site.field, &policy.catalog) else {
            return false;
        };
        if view.accelerators().is_none() && view.efa() == 0 && view.claims == 0 {
            continue;
        }
        if verified(template, owner_kind, namespace, keys, policy).is_none() {
            return false;
        }
        any = true;
    }
    any
}

/// The job label a pod or template's mark verifies with, when it verifies and the
/// object's own launcher does not say its job is larger than the mark states.
fn verified<'v>(
    object: &'v Value,
    owner_kind: &str,
    namespace: &str,
    keys: &MarkKeys,
    policy: &Policy,
) -> Option<(&'static str, &'v str)> {
    let mark = str_at(object, &["metadata", "annotations", ADMITTED])?;
    let view = PodView::read(object, "spec", &policy.catalog).ok()?;
    let digest = crate::answer::mark::digest(&view);
    let found = JOB_IDENTITY_LABELS.iter().find_map(|(key, _)| {
        let value = str_at(object, &["metadata", "labels", key])?;
        let claim = Claim {
            namespace,
            identity: (key, value),
            owner_kind,
            digest,
            pods: 0,
        };
        keys.verify(mark, &claim).map(|pods| (*key, value, pods))
    });
    let Some((key, value, pods)) = found else {
        keys.note_failure();
        return None;
    };
    let per_pod = view.accelerators().map_or(0, |(_, n)| n);
    let larger = match crate::read::recognize::job_size(&view, per_pod, policy.recognizers()) {
        _ if pods == 0 => false,
        Some(JobSize::Pods(n)) => n > pods,
        Some(JobSize::Several) => pods <= 1,
        None => false,
    };
    (!larger).then_some((key, value))
}

/// Whether the inventory shows the pod's job in more than one zone, or in a zone other
/// than the one this pod runs in (its node) or is pinned to.
fn placed_apart(
    object: &Value,
    namespace: &str,
    (key, value): (&str, &str),
    who: &Requester<'_>,
) -> bool {
    let Some(inv) = who.inventory else {
        return false;
    };
    let Some(zones) = inv.sibling_zones(namespace, key, value) else {
        return false;
    };
    let node =
        crate::read::json::str_at(object, &["spec", "nodeName"]).and_then(|n| inv.node_zone(n));
    let pinned = crate::judge::classify::zones(object, Some((key, value))).pinned;
    let at = node
        .map(String::from)
        .or_else(|| pinned.map(|z| inv.zone_name(&z).to_string()));
    zones.len() > 1 || at.is_some_and(|z| !zones.contains(&z))
}
