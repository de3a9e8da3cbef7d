//! Reading and writing TrainJob runtime patches: merging every patch's `node` template
//! into one view, and computing what trainplace adds on top of the others.

use serde_json::{Map, Value, json};

use super::{MANAGER, NODE, PATCH_CONTAINER, PATCH_SPEC};
use crate::read::json::{items, str_at};
use crate::write::edit::owned_object;

pub(super) fn our_patch_index(object: &Value) -> Option<usize> {
    items(object, &["spec", "runtimePatches"])
        .iter()
        .position(|p| p.get("manager").and_then(Value::as_str) == Some(MANAGER))
}

/// The `node` pod template a runtime patch carries, if any.
pub(super) fn node_template(patch: &Value) -> Option<&Value> {
    patch
        .lookup("/trainingRuntimeSpec/template/spec/replicatedJobs")?
        .as_array()?
        .iter()
        .find(|j| j.get("name").and_then(Value::as_str) == Some(NODE))?
        .lookup("/template/spec/template")
}

pub(super) use super::merge::delta;
use super::merge::{merge_all, merge_field};
use crate::read::json::Lookup as _;

/// The runtime's `node` pod template as this TrainJob will get it: the TrainJob's
/// command and args replace the runtime's; its `resourcesPerNode` is merged over the
/// runtime's resources key by key (Trainer's `MergeResourceRequirements`,
/// https://github.com/kubeflow/trainer/blob/8c0f5059bd51ec3ba6d6a6a7b2e1471de7bc13b3/pkg/runtime/core/trainingruntime.go).
fn runtime_base(object: &Value, runtime: Option<&Value>) -> Value {
    let Some(template) = runtime.and_then(runtime_node_template) else {
        return json!({});
    };
    // A cluster object, copied into every review of a TrainJob that names it: its size is
    // not the request's, so the copy draws from the review's budget first.
    if !weigh(template) {
        return json!({});
    }
    let mut base = template.clone();
    let trainer = object.lookup("/spec/trainer");
    let overridden: Vec<&str> = ["command", "args"]
        .into_iter()
        .filter(|key| trainer.and_then(|t| t.get(*key)).is_some())
        .collect();
    if let Some(containers) = base
        .pointer_mut("/spec/containers")
        .and_then(Value::as_array_mut)
    {
        for c in containers
            .iter_mut()
            .filter(|c| c.get("name").and_then(Value::as_str) == Some(NODE))
            .filter_map(Value::as_object_mut)
        {
            for key in &overridden {
                c.remove(*key);
            }
        }
    }
    base
}

/// What [`weigh`] draws for.
const RUNTIME_TEMPLATE: &str = "the node template of the runtime in spec.runtimeRef";

/// Draw one unit of the review's budget for each value of `v`, as copying it visits
/// each; false at the first draw that finds the budget spent.
fn weigh(v: &Value) -> bool {
    if !crate::budget::draw(RUNTIME_TEMPLATE, 1) {
        return false;
    }
    match v {
        Value::Array(a) => a.iter().all(weigh),
        Value::Object(m) => m.values().all(weigh),
        _ => true,
    }
}

/// The `node` pod template of a TrainingRuntime or ClusterTrainingRuntime.
fn runtime_node_template(runtime: &Value) -> Option<&Value> {
    runtime
        .lookup("/spec/template/spec/replicatedJobs")?
        .as_array()?
        .iter()
        .find(|j| j.get("name").and_then(Value::as_str) == Some(NODE))?
        .lookup("/template/spec/template")
}

/// The pod layout the runtime and all runtime patches give the `node` job: the
/// runtime's template, others' patches in order, then trainplace's own when `with_ours`.
pub(super) fn patched_layout(object: &Value, with_ours: bool, runtime: Option<&Value>) -> Value {
    let patches = items(object, &["spec", "runtimePatches"]);
    let ours = |p: &&Value| p.get("manager").and_then(Value::as_str) == Some(MANAGER);
    let mut acc = runtime_base(object, runtime);
    let templates: Vec<&Value> = patches
        .iter()
        .filter(|p| !ours(p))
        .chain(patches.iter().filter(|p| with_ours && ours(p)))
        .filter_map(node_template)
        .collect();
    merge_all(&mut acc, &templates);
    acc
}

/// The pod spec the runtime patches give the `node` job: their pod fields, and the
/// `node` container with `extra` fields merged over it. The layout is taken apart, not
/// copied: a patch's long lists are moved into the spec.
pub(super) fn layout_spec(mut layout: Value, extra: &[(&str, &Value)]) -> Map<String, Value> {
    let mut spec = match layout.get_mut("spec").map(Value::take) {
        Some(Value::Object(spec)) => spec,
        _ => Map::new(),
    };
    let node = spec
        .get_mut("containers")
        .and_then(Value::as_array_mut)
        .and_then(|cs| {
            let at = cs
                .iter()
                .position(|c| c.get("name").and_then(Value::as_str) == Some(NODE))?;
            Some(cs.swap_remove(at))
        });
    let mut container = match node {
        Some(Value::Object(c)) => c,
        _ => Map::new(),
    };
    container.insert("name".into(), json!(NODE));
    for (key, v) in extra {
        merge_field(&mut container, key, v);
    }
    let mut out = Map::new();
    for k in PATCH_SPEC {
        if let Some(v) = spec.remove(k) {
            out.insert(k.into(), v);
        }
    }
    out.insert(
        "containers".into(),
        Value::Array(vec![Value::Object(container)]),
    );
    out
}

/// The trainer nodes' pod spec, and the labels the runtime and patches give them.
fn node_spec(object: &Value, runtime: Option<&Value>) -> (Map<String, Value>, Map<String, Value>) {
    let trainer = object.lookup("/spec/trainer");
    let mut layout = patched_layout(object, true, runtime);
    let mapped = [
        ("resourcesPerNode", "resources"),
        ("env", "env"),
        ("command", "command"),
        ("args", "args"),
    ];
    let extra: Vec<(&str, &Value)> = mapped
        .iter()
        .filter_map(|(from, to)| Some((*to, trainer?.get(*from)?)))
        .collect();
    // Only a runtime's template can set hostIPC (a TrainJob cannot patch it).
    let host_ipc = layout.pointer_mut("/spec/hostIPC").map(Value::take);
    let labels = match layout.pointer_mut("/metadata/labels").map(Value::take) {
        Some(Value::Object(labels)) => labels,
        _ => Map::new(),
    };
    let mut spec = layout_spec(layout, &extra);
    if let Some(v) = host_ipc {
        spec.insert("hostIPC".into(), v);
    }
    (spec, labels)
}

/// The pod the trainer nodes will be, as far as the runtime (when known), the TrainJob
/// and its patches say.
pub(crate) fn synthetic_pod(object: &Value, runtime: Option<&Value>) -> Value {
    let (spec, mut labels) = node_spec(object, runtime);
    if let Some(name) = str_at(object, &["metadata", "name"]) {
        labels.insert("jobset.sigs.k8s.io/jobset-name".into(), json!(name));
    }
    let annotations = object
        .lookup("/metadata/annotations")
        .cloned()
        .unwrap_or_else(|| json!({}));
    owned_object([
        (
            "metadata",
            owned_object([
                ("labels", Value::Object(labels)),
                ("annotations", annotations),
            ]),
        ),
        ("spec", Value::Object(spec)),
    ])
}

/// The same pod's spec alone, for reading its shape: the TrainJob's metadata is not
/// copied into it.
pub(crate) fn synthetic_spec(object: &Value) -> Value {
    owned_object([("spec", Value::Object(node_spec(object, None).0))])
}

/// What `after` adds to `base` in the part of a synthetic pod that lives in runtime
/// patches (the pod fields of `PATCH_SPEC`, the `node` container's `PATCH_CONTAINER`):
/// `{"spec": ..., "container": ...}` with only what changed, read in place, without
/// copying either pod's part first.
pub(super) fn patch_delta(after: &Value, base: &Value) -> Option<Value> {
    fn part(after: &Value, base: &Value, keys: &[&str]) -> Option<Value> {
        let changed: Map<String, Value> = keys
            .iter()
            .filter_map(|k| {
                let v = after.get(*k)?;
                let d = match base.get(*k) {
                    Some(b) => delta(v, b)?,
                    None => v.clone(),
                };
                Some(((*k).to_string(), d))
            })
            .collect();
        (!changed.is_empty()).then_some(Value::Object(changed))
    }
    fn container(pod: &Value) -> &Value {
        &pod["spec"]["containers"][0]
    }
    let mut added = Map::new();
    if let Some(spec) = part(&after["spec"], &base["spec"], &PATCH_SPEC) {
        added.insert("spec".into(), spec);
    }
    if let Some(c) = part(container(after), container(base), &PATCH_CONTAINER) {
        added.insert("container".into(), c);
    }
    (!added.is_empty()).then_some(Value::Object(added))
}
