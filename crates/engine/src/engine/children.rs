//! Objects that carry a pod template trainplace does not lay out itself: a Deployment,
//! ReplicaSet, StatefulSet or DaemonSet (its pods), a CronJob (its Jobs). Each is judged
//! at its own admission as what its controller will create from the template, as that
//! controller will submit it: with the controller's groups, which hold none of the
//! submitter's opt-in grants, and no admission mark (trainplace signs no template of
//! these kinds). A user who applies a 1-GPU training Deployment hears the refusal from
//! `kubectl apply`, not from a ReplicaSet's events. Nothing is written into the object:
//! the pods and Jobs are laid out when their controller creates them.

use serde_json::{Value, json};

use crate::error::ObjectError;
use crate::facts::policy::Policy;
use crate::facts::requester::Requester;
use crate::judge::verdict::Verdict;
use crate::read::json::Lookup as _;
use crate::read::workload::Kind;

/// The groups of the controllers that create these kinds' children (service accounts in
/// kube-system).
const CONTROLLER_GROUPS: [&str; 2] = [
    "system:serviceaccounts",
    "system:serviceaccounts:kube-system",
];

/// What the object's controller creates from its template, as the webhook will see
/// it, with the template's field; `None` for any other kind.
pub(crate) fn made_by_controller(object: &Value) -> Option<(Value, &'static str)> {
    let api = object.get("apiVersion")?.as_str()?;
    let kind = object.get("kind")?.as_str()?;
    let namespace = object.lookup("/metadata/namespace").cloned();
    let name = object
        .lookup("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("unnamed");
    let meta = |t: &Value| {
        json!({"name": format!("{name}-0"), "namespace": namespace,
            "labels": t.lookup("/metadata/labels"), "annotations": t.lookup("/metadata/annotations")})
    };
    match (api, kind) {
        ("apps/v1", "Deployment" | "StatefulSet" | "ReplicaSet" | "DaemonSet") => {
            let t = object.lookup("/spec/template")?;
            let spec = t.get("spec")?;
            Some((
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta(t), "spec": spec}),
                "spec.template",
            ))
        }
        ("batch/v1", "CronJob") => {
            let t = object.lookup("/spec/jobTemplate")?;
            let spec = t.get("spec")?;
            Some((
                json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": meta(t), "spec": spec}),
                "spec.jobTemplate",
            ))
        }
        _ => None,
    }
}

/// The verdict on a template carrier: what its controller's child is judged to be,
/// reported on the object. `None` when the object carries no such template.
pub(super) fn judge(
    object: &Value,
    policy: &Policy,
    who: &Requester<'_>,
) -> Result<Option<Verdict>, ObjectError> {
    let Some((made, field)) = made_by_controller(object) else {
        return Ok(None);
    };
    // The leader StatefulSet a LeaderWorkerSet's controller makes carries the template
    // trainplace judged and signed on the LeaderWorkerSet, group by group: its pods are
    // left as admitted, or judged, when they are created. Judged here as one job of
    // every pod it makes, single-pod groups were refused and the LeaderWorkerSet never ran.
    if crate::judge::upstream::carried_from_admitted(object, who, policy) {
        let mut verdict = Verdict::empty(object, Kind::Other, who);
        verdict.notes.push(format!(
            "made by its controller from a LeaderWorkerSet trainplace admitted ({} verified on {field}); its pods are judged when they are created.",
            crate::facts::mark::ADMITTED
        ));
        verdict.allowed = true;
        verdict.object = object.clone();
        return Ok(Some(verdict));
    }
    let groups: Vec<String> = CONTROLLER_GROUPS.iter().map(|g| g.to_string()).collect();
    let controller = Requester {
        groups: &groups,
        marks: None,
        ..who.clone()
    };
    // As the mutating webhook will see the child (its layout, the zone hold, is written
    // then): what stays refused after that.
    let judged = super::evaluate_owned(made, policy, &controller)?;
    let mut verdict = Verdict::empty(object, Kind::Other, who);
    let what = judged.kind.clone();
    if !judged.findings.is_empty() {
        verdict.notes.push(format!(
            "judged as each {what} this {} makes from {field}, as its controller creates it{}",
            verdict.kind,
            if judged.allowed { "" } else { ": refused" }
        ));
    }
    for mut f in judged.findings {
        f.site = format!("{field} ({what}s it makes): {}", f.site);
        verdict.findings.push(f);
    }
    verdict.allowed = judged.allowed;
    verdict.object = object.clone();
    Ok(Some(verdict))
}
