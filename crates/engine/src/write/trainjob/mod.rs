//! Kubeflow Trainer `TrainJob` (trainer.kubeflow.org/v1alpha1) has no pod template:
//! devices live in `spec.trainer.resourcesPerNode`, env in `spec.trainer.env`, and
//! the pod layout goes into a `spec.runtimePatches[]` entry that trainplace owns
//! (manager `trainplace.io/webhook`). A synthetic pod built from those fields goes
//! through the same classify / plan / rules code as every other template; the edits
//! are mapped back. `hostIPC` cannot be patched through a TrainJob: it is reported.

mod merge;
mod patches;

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use patches::{layout_spec, our_patch_index, patch_delta, patched_layout};
pub(crate) use patches::{synthetic_pod, synthetic_spec};

use crate::error::ObjectError;
use crate::judge::judgement::{Ctx, judge};
use crate::judge::verdict::Verdict;
use crate::read::annotations::MUTATED;
use crate::read::json::Lookup as _;
use crate::read::json::{items, str_at};
use crate::read::podspec::PodView;
use crate::read::workload::SiteHints;
use crate::write::edit::{Cursor, Ops, owned_object};

pub const MANAGER: &str = "trainplace.io/webhook";
/// The replicated job and container names of Trainer's torch runtimes.
const NODE: &str = "node";
/// Pod spec fields the runtime patch carries for us.
const PATCH_SPEC: [&str; 4] = ["nodeSelector", "tolerations", "affinity", "volumes"];
const PATCH_CONTAINER: [&str; 2] = ["securityContext", "volumeMounts"];
pub(crate) const FIELD: &str = "spec.trainer";

/// The runtime a TrainJob names in `spec.runtimeRef` (kind ClusterTrainingRuntime
/// unless it says TrainingRuntime), from the inventory.
pub(crate) fn runtime<'a>(object: &Value, ctx: &Ctx<'a, '_>, namespace: &str) -> Option<&'a Value> {
    let name = str_at(object, &["spec", "runtimeRef", "name"])?;
    let kind = str_at(object, &["spec", "runtimeRef", "kind"]).unwrap_or("ClusterTrainingRuntime");
    ctx.who.inventory?.runtime(namespace, kind, name)
}

/// Say which runtime the verdict took the pod template from, or that it could not.
fn runtime_note(object: &Value, ctx: &Ctx<'_, '_>, found: bool, verdict: &mut Verdict) {
    let (Some(_), Some(name)) = (
        ctx.who.inventory,
        str_at(object, &["spec", "runtimeRef", "name"]),
    ) else {
        return;
    };
    let kind = str_at(object, &["spec", "runtimeRef", "kind"]).unwrap_or("ClusterTrainingRuntime");
    verdict.notes.push(if found {
        format!("judged with the node template of {kind} {name} from the cluster.")
    } else {
        format!("{kind} {name} is not in the cluster inventory: judged from the TrainJob and its runtime patches alone.")
    });
}

fn count_at(object: &Value, pointer: &str, field: &str) -> Result<Option<u32>, ObjectError> {
    match object.lookup(pointer) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .map(Some)
            .ok_or_else(|| ObjectError::bad(field, "must be a whole number")),
    }
}

/// Judge and lay out a TrainJob. Returns whether it is a training object.
pub(crate) fn evaluate(
    object: &mut Value,
    ctx: &Ctx<'_, '_>,
    verdict: &mut Verdict,
    ops: &mut Ops,
) -> Result<bool, ObjectError> {
    let runtime = runtime(object, ctx, &verdict.namespace);
    runtime_note(object, ctx, runtime.is_some(), verdict);
    let before = synthetic_pod(object, runtime);
    let view = PodView::read(&before, FIELD, &ctx.eff.policy.catalog)?;
    // The TrainJob's numNodes, else the runtime's default.
    let nodes = match count_at(object, "/spec/trainer/numNodes", "spec.trainer.numNodes")? {
        Some(n) => Some(n),
        None => match runtime {
            Some(r) => count_at(
                r,
                "/spec/mlPolicy/numNodes",
                "runtime spec.mlPolicy.numNodes",
            )?,
            None => None,
        },
    };
    let hints = SiteHints {
        pods: nodes,
        identity: None,
        instance_type: str_at(
            object,
            &[
                "metadata",
                "annotations",
                crate::read::annotations::INSTANCE_TYPE,
            ],
        )
        .map(String::from),
        group_label: None,
        // A TrainJob's pods are laid out through its runtime patch, where trainplace
        // writes pod affinity; Kueue's topology annotations are not written there.
        queued: false,
        // The Trainer's torch plugin upserts `PET_NNODES` (numNodes) into the node
        // container of a runtime with `mlPolicy.torch`.
        // https://github.com/kubeflow/trainer/blob/master/pkg/runtime/framework/plugins/torch/torch.go
        operator_nnodes: runtime.is_some_and(|r| r.lookup("/spec/mlPolicy/torch").is_some()),
    };
    let Some(judgement) = judge(&view, &hints, object, ctx, verdict)? else {
        return Ok(false);
    };
    // The layout is written on the node pod itself, not a copy (its lists may be most
    // of a 3 MiB request): what the trainer fields are compared with is read first,
    // and the annotations, already read into the view, are dropped.
    let was = NodeBefore::read(&before);
    let mut after = before;
    if let Some(meta) = after.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("annotations");
    }
    let mut scratch = Ops::default();
    let mut changes = judgement.write(ctx.eff, Cursor::root(&mut after, ""), &mut scratch);
    if ctx.eff.policy.strict() {
        changes.extend(crate::write::zone_pin::pin_pod(
            &mut after,
            FIELD,
            ctx,
            &mut scratch,
        )?);
    }
    if after.lookup("/spec/hostIPC").is_some() && !was.host_ipc {
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
    for c in &mut changes {
        c.site = "spec.trainer".into();
    }
    trainer_fields(object, &was, &after["spec"]["containers"][0], ops);
    let entry = runtime_patch(object, runtime, &after, &changes);
    drop(after);
    put_runtime_patch(object, entry, ops);
    verdict.changes.extend(changes);
    Ok(true)
}

/// What the layout's write is compared with, read from the node pod before it: the
/// node container's device keys and env length, and whether the pod set hostIPC.
struct NodeBefore {
    resources: [(&'static str, BTreeSet<String>); 2],
    env: usize,
    host_ipc: bool,
}

impl NodeBefore {
    fn read(pod: &Value) -> Self {
        let container = &pod["spec"]["containers"][0];
        let keys = |w: &str| {
            container
                .lookup(&format!("/resources/{w}"))
                .and_then(Value::as_object)
                .map(|m| m.keys().cloned().collect())
                .unwrap_or_default()
        };
        NodeBefore {
            resources: [("limits", keys("limits")), ("requests", keys("requests"))],
            env: items(container, &["env"]).len(),
            host_ipc: pod.lookup("/spec/hostIPC").is_some(),
        }
    }
}

/// What the layout added to the node container that the TrainJob's own trainer fields
/// carry: new device keys in resourcesPerNode, appended env entries.
fn trainer_fields(object: &mut Value, was: &NodeBefore, c_after: &Value, ops: &mut Ops) {
    // Devices: new keys in resourcesPerNode.
    for (w, had) in &was.resources {
        let Some(new) = c_after
            .lookup(&format!("/resources/{w}"))
            .and_then(Value::as_object)
        else {
            continue;
        };
        for (k, v) in new {
            if !had.contains(k)
                && let Some(mut m) = Cursor::root(object, "")
                    .objects(&["spec", "trainer", "resourcesPerNode", w], ops)
            {
                m.insert_missing(k, v.clone(), ops);
            }
        }
    }
    // Env: appended entries.
    for e in items(c_after, &["env"]).iter().skip(was.env) {
        if let Some(mut env) = Cursor::root(object, "")
            .object("spec", ops)
            .and_then(|c| c.object("trainer", ops))
            .and_then(|c| c.array("env", ops))
        {
            env.push(e.clone(), ops);
        }
    }
}

/// trainplace's runtime patch: what the layout adds to the pod on top of the other
/// patches (the user's, the advisor's), with the explanation.
fn runtime_patch(
    object: &Value,
    runtime: Option<&Value>,
    after: &Value,
    changes: &[crate::judge::plan::Change],
) -> Value {
    let base_pod = owned_object([(
        "spec",
        Value::Object(layout_spec(patched_layout(object, false, runtime), &[])),
    )]);
    let mut added = patch_delta(after, &base_pod).unwrap_or_else(|| json!({}));
    drop(base_pod);
    let mut take = |key: &str| match added.get_mut(key).map(Value::take) {
        Some(Value::Object(m)) => m,
        _ => Map::new(),
    };
    let mut spec = take("spec");
    let mut container = Map::new();
    container.insert("name".into(), json!(NODE));
    container.extend(take("container"));
    spec.insert(
        "containers".into(),
        Value::Array(vec![Value::Object(container)]),
    );
    let text = crate::write::layout::mutated_text(changes);
    let mut entry = json!({
        "manager": MANAGER,
        "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [{
            "name": NODE,
            "template": {"spec": {"template": {
                "metadata": {"annotations": {MUTATED: text}},
                "spec": {},
            }}},
        }]}}},
    });
    // Moved in, not through `json!`, which would copy it.
    if let Some(slot) = entry.pointer_mut(
        "/trainingRuntimeSpec/template/spec/replicatedJobs/0/template/spec/template/spec",
    ) {
        *slot = Value::Object(spec);
    }
    entry
}

/// Replace trainplace's runtime patch whole, so it stays one entry, or append it.
fn put_runtime_patch(object: &mut Value, entry: Value, ops: &mut Ops) {
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
