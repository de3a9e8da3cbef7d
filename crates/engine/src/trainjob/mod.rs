//! Kubeflow Trainer `TrainJob` (trainer.kubeflow.org/v1alpha1) has no pod template:
//! devices live in `spec.trainer.resourcesPerNode`, env in `spec.trainer.env`, and
//! the pod layout goes into a `spec.runtimePatches[]` entry that trainplace owns
//! (manager `trainplace.io/webhook`). A synthetic pod built from those fields goes
//! through the same classify / plan / rules code as every other template; the edits
//! are mapped back. `hostIPC` cannot be patched through a TrainJob: it is reported.

mod patches;

use serde_json::{Map, Value, json};

pub(crate) use patches::synthetic_pod;
use patches::{delta, layout_spec, our_patch_index, patch_view, patched_layout};

use crate::annotations::MUTATED;
use crate::classify::SiteHints;
use crate::edit::{Cursor, Ops};
use crate::error::ObjectError;
use crate::json::{items, str_at};
use crate::judge::{Ctx, judge};
use crate::podspec::PodView;
use crate::verdict::Verdict;

pub const MANAGER: &str = "trainplace.io/webhook";
/// The replicated job and container names of Trainer's torch runtimes.
const NODE: &str = "node";
/// Pod spec fields the runtime patch carries for us.
const PATCH_SPEC: [&str; 4] = ["nodeSelector", "tolerations", "affinity", "volumes"];
const PATCH_CONTAINER: [&str; 2] = ["securityContext", "volumeMounts"];
pub(crate) const FIELD: &str = "spec.trainer";

/// Judge and lay out a TrainJob. Returns whether it is a training object.
pub(crate) fn evaluate(
    object: &mut Value,
    ctx: &Ctx<'_, '_>,
    verdict: &mut Verdict,
    ops: &mut Ops,
) -> Result<bool, ObjectError> {
    let before = synthetic_pod(object);
    let view = PodView::read(&before, FIELD, &ctx.eff.policy.catalog)?;
    let nodes = match object.pointer("/spec/trainer/numNodes") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| {
                    ObjectError::bad("spec.trainer.numNodes", "must be a whole number")
                })?,
        ),
    };
    let hints = SiteHints {
        pods: nodes,
        identity: None,
        instance_type: str_at(
            object,
            &["metadata", "annotations", crate::annotations::INSTANCE_TYPE],
        )
        .map(String::from),
        group_label: None,
    };
    let Some(judgement) = judge(&view, &hints, object, ctx, verdict)? else {
        return Ok(false);
    };
    let mut after = before.clone();
    let mut scratch = Ops::default();
    let mut changes = judgement.write(ctx.eff, Cursor::root(&mut after, ""), &mut scratch);
    if after.pointer("/spec/hostIPC").is_some() {
        changes.retain(|c| c.what != "hostIPC=true");
        let runtime =
            str_at(object, &["spec", "runtimeRef", "name"]).unwrap_or("the training runtime");
        verdict.notes.push(format!(
            "hostIPC cannot be set through a TrainJob: set hostIPC: true in {runtime}'s pod template so NCCL can share memory between local ranks."
        ));
    }
    if changes.is_empty() {
        return Ok(true);
    }
    write_back(object, &before, &after, &changes, ops);
    verdict.changes.extend(changes);
    Ok(true)
}

fn write_back(
    object: &mut Value,
    before: &Value,
    after: &Value,
    changes: &[crate::layout::Change],
    ops: &mut Ops,
) {
    let c_before = &before["spec"]["containers"][0];
    let c_after = &after["spec"]["containers"][0];
    // Devices: new keys in resourcesPerNode.
    for w in ["limits", "requests"] {
        let Some(new) = c_after
            .pointer(&format!("/resources/{w}"))
            .and_then(Value::as_object)
        else {
            continue;
        };
        for (k, v) in new {
            if c_before
                .pointer(&format!("/resources/{w}"))
                .and_then(|m| m.get(k))
                .is_none()
                && let Some(mut m) = Cursor::root(object, "")
                    .objects(&["spec", "trainer", "resourcesPerNode", w], ops)
            {
                m.insert_missing(k, v.clone(), ops);
            }
        }
    }
    // Env: appended entries.
    let old_env = items(c_before, &["env"]).len();
    for e in items(c_after, &["env"]).iter().skip(old_env) {
        if let Some(mut env) = Cursor::root(object, "")
            .object("spec", ops)
            .and_then(|c| c.object("trainer", ops))
            .and_then(|c| c.array("env", ops))
        {
            env.push(e.clone(), ops);
        }
    }
    // Pod layout: trainplace's runtime patch holds what the layout adds on top of the
    // other patches (the user's, the advisor's), replaced whole so it stays one entry.
    let base_pod = json!({"spec": layout_spec(&patched_layout(object, false), &[])});
    let added = delta(&patch_view(after), &patch_view(&base_pod)).unwrap_or_else(|| json!({}));
    let mut spec: Map<String, Value> = added
        .get("spec")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut container = Map::new();
    container.insert("name".into(), json!(NODE));
    if let Some(c) = added.get("container").and_then(Value::as_object) {
        container.extend(c.clone());
    }
    spec.insert("containers".into(), json!([container]));
    let text = changes
        .iter()
        .map(|c| format!("{}: {}", c.what, c.why))
        .collect::<Vec<_>>()
        .join("\n");
    let entry = json!({
        "manager": MANAGER,
        "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [{
            "name": NODE,
            "template": {"spec": {"template": {
                "metadata": {"annotations": {MUTATED: text}},
                "spec": spec,
            }}},
        }]}}},
    });
    match our_patch_index(object) {
        Some(i) => {
            if let Some(p) = object.pointer_mut("/spec/runtimePatches") {
                Cursor::root(p, "/spec/runtimePatches").set(&i.to_string(), entry, ops);
            }
        }
        None => {
            if let Some(mut patches) = Cursor::root(object, "")
                .object("spec", ops)
                .and_then(|c| c.array("runtimePatches", ops))
            {
                patches.push(entry, ops);
            }
        }
    }
}
