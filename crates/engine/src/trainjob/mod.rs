//! Kubeflow Trainer `TrainJob` (trainer.kubeflow.org/v1alpha1) has no pod template:
//! devices live in `spec.trainer.resourcesPerNode`, env in `spec.trainer.env`, and
//! the pod layout goes into a `spec.runtimePatches[]` entry that trainplace owns
//! (manager `trainplace.io/webhook`). A synthetic pod built from those fields goes
//! through the same classify / plan / rules code as every other template; the edits
//! are mapped back. `hostIPC` cannot be patched through a TrainJob: it is reported.

mod patches;

use serde_json::{Map, Value, json};

use patches::{delta, layout_spec, our_patch_index, patch_view, patched_layout, synthetic_pod};

use crate::annotations::{ALLOW_MULTI_AZ, ALLOW_PARTIAL_NODE, MUTATED};
use crate::classify::{Class, SiteHints, Target, classify};
use crate::edit::{Cursor, Ops};
use crate::engine::{Ctx, Verdict};
use crate::error::ObjectError;
use crate::json::{items, str_at};
use crate::layout::{Plan, shm_size};
use crate::podspec::PodView;
use crate::policy::OptIn;
use crate::rules::{RuleInput, check, count, opt_in_state};

pub const MANAGER: &str = "trainplace.io/webhook";
/// The replicated job and container names of Trainer's torch runtimes.
const NODE: &str = "node";
/// Pod spec fields the runtime patch carries for us.
const PATCH_SPEC: [&str; 4] = ["nodeSelector", "tolerations", "affinity", "volumes"];
const PATCH_CONTAINER: [&str; 2] = ["securityContext", "volumeMounts"];
const FIELD: &str = "spec.trainer";

/// Judge and lay out a TrainJob. Returns whether it is a training object.
pub(crate) fn evaluate(
    object: &mut Value,
    ctx: &Ctx<'_, '_>,
    verdict: &mut Verdict,
    ops: &mut Ops,
) -> Result<bool, ObjectError> {
    let eff = ctx.eff;
    let before = synthetic_pod(object);
    let view = PodView::read(&before, FIELD)?;
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
    };
    let Class::Training(shape) = classify(&view, &hints, eff, ctx.who.inventory) else {
        return Ok(false);
    };
    let set = |k: &str| view.annotation(k) == Some("true");
    let partial = opt_in_state(
        set(ALLOW_PARTIAL_NODE),
        OptIn::AllowPartialNode,
        eff,
        ctx.who,
    );
    let multi = opt_in_state(set(ALLOW_MULTI_AZ), OptIn::AllowMultiAz, eff, ctx.who);
    let Target::Known(instance, source) = shape.target.clone() else {
        verdict.findings.extend(check(&RuleInput {
            view: &view,
            shape: &shape,
            eff,
            partial_opt_in: partial,
            multi_az_opt_in: multi,
            siblings: ctx.siblings(&verdict.namespace, &shape),
        }));
        return Ok(true);
    };
    let shm = shm_size(&view, eff, instance)
        .map_err(|e| ObjectError::bad("metadata.annotations[trainplace.io/shm-size]", e))?;
    let plan = Plan::new(&view, &shape, instance, source, eff, shm);
    let mut after_shape = (*shape).clone();
    if plan.adds_efa() {
        after_shape.efa = instance.max_efa;
    }
    verdict.findings.extend(check(&RuleInput {
        view: &view,
        shape: &after_shape,
        eff,
        partial_opt_in: partial,
        multi_az_opt_in: multi,
        siblings: ctx.siblings(&verdict.namespace, &shape),
    }));
    let mut after = before.clone();
    let mut scratch = Ops::default();
    let mut changes = plan.apply(Cursor::root(&mut after, ""), &mut scratch);
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

/// Reshape a TrainJob: numNodes, numProcPerNode and resourcesPerNode.
pub(crate) fn reshape(
    object: &mut Value,
    ctx: &Ctx<'_, '_>,
    verdict: &mut Verdict,
    ops: &mut Ops,
) -> Result<bool, ObjectError> {
    let pod = synthetic_pod(object);
    let view = PodView::read(&pod, FIELD)?;
    let Class::Training(shape) = classify(
        &view,
        &SiteHints {
            pods: Some(2),
            identity: None,
        },
        ctx.eff,
        ctx.who.inventory,
    ) else {
        return Ok(false);
    };
    let Target::Known(inst, _) = shape.target else {
        return Ok(false);
    };
    let (g, big) = (shape.per_pod, inst.accelerators);
    let nodes = object
        .pointer("/spec/trainer/numNodes")
        .and_then(Value::as_u64)
        .unwrap_or(1) as u32;
    if g == 0 || g >= big {
        return Ok(false);
    }
    let gpus = nodes * g;
    if !gpus.is_multiple_of(big) {
        verdict.findings.push(crate::finding::Finding {
            rule: crate::finding::Rule::Reshape,
            mode: crate::policy::Mode::Enforce,
            site: FIELD.into(),
            found: format!(
                "{} x {} = {gpus} GPUs do not fill whole {} nodes.",
                count(nodes, "node"),
                count(g, "GPU"),
                inst.name
            ),
            fix: format!(
                "use numNodes {} or {} with {big} GPUs each.",
                gpus / big,
                gpus.div_ceil(big)
            ),
            opt_in: None,
        });
        return Ok(false);
    }
    let new_nodes = gpus / big;
    let Some(mut trainer) = Cursor::root(object, "").objects(&["spec", "trainer"], ops) else {
        return Ok(false);
    };
    trainer.set("numNodes", json!(new_nodes), ops);
    trainer.set("numProcPerNode", json!(big), ops);
    for w in ["limits", "requests"] {
        let Some(m) = object.pointer_mut(&format!("/spec/trainer/resourcesPerNode/{w}")) else {
            continue;
        };
        let mut cur = Cursor::root(m, &format!("/spec/trainer/resourcesPerNode/{w}"));
        if cur.value.get("nvidia.com/gpu").is_some() {
            cur.set("nvidia.com/gpu", json!(big), ops);
        }
        if cur.value.get(crate::annotations::RES_EFA).is_some() {
            cur.set(crate::annotations::RES_EFA, json!(inst.max_efa), ops);
        }
    }
    let why = format!(
        "reshaped {} x {g} GPUs into {} x {big} GPUs on {}",
        count(nodes, "node"),
        count(new_nodes, "node"),
        inst.name
    );
    verdict.notes.push(format!(
        "{}: {why}. World size is unchanged; ranks per node went from {g} to {big}.",
        crate::annotations::RESHAPE
    ));
    let lines = vec![
        format!("spec.trainer.numNodes = {new_nodes}"),
        format!("spec.trainer.numProcPerNode = {big}"),
        format!("spec.trainer.resourcesPerNode nvidia.com/gpu = {big}"),
    ];
    crate::reshape::record(object, lines, &why, verdict, ops);
    Ok(true)
}
