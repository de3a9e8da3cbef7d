//! Reshape a TrainJob: `spec.trainer.numNodes`, `numProcPerNode` and
//! `resourcesPerNode` (it has no pod template to rewrite).

use serde_json::{Value, json};

use super::record::record;
use crate::error::ObjectError;
use crate::facts::policy::Mode;
use crate::judge::classify::{Class, Target, classify};
use crate::judge::finding::{Finding, Rule};
use crate::judge::judgement::Ctx;
use crate::judge::rules::count;
use crate::judge::verdict::Verdict;
use crate::read::annotations::{RES_EFA, RES_NVIDIA_GPU, RESHAPE};
use crate::read::json::Lookup as _;
use crate::read::podspec::PodView;
use crate::read::workload::SiteHints;
use crate::write::edit::{Cursor, Ops};
use crate::write::trainjob::{FIELD, synthetic_pod};
use trainplace_catalog::InstanceProfile;

/// Reshape a TrainJob: numNodes, numProcPerNode and resourcesPerNode.
pub(super) fn reshape(
    object: &mut Value,
    ctx: &Ctx<'_, '_>,
    verdict: &mut Verdict,
    ops: &mut Ops,
) -> Result<bool, ObjectError> {
    let Some((g, inst)) = trainer_shape(object, ctx, verdict)? else {
        return Ok(false);
    };
    let big = inst.accelerators;
    let nodes = num_nodes(object)?;
    if g == 0 || g >= big {
        return Ok(false);
    }
    let gpus = u64::from(nodes) * u64::from(g);
    let big64 = u64::from(big);
    if !gpus.is_multiple_of(big64) {
        verdict.findings.push(not_whole_nodes(nodes, g, gpus, inst));
        return Ok(false);
    }
    let new_nodes = gpus / big64;
    if !write_trainer(object, new_nodes, inst, ops) {
        return Ok(false);
    }
    let why = format!(
        "reshaped {} x {g} GPUs into {} x {big} GPUs on {}",
        count(nodes, "node"),
        crate::judge::rules::count64(new_nodes, "node"),
        inst.name
    );
    verdict.notes.push(format!(
        "{}: {why}. World size is unchanged; ranks per node went from {g} to {big}.",
        RESHAPE
    ));
    let lines = vec![
        format!("spec.trainer.numNodes = {new_nodes}"),
        format!("spec.trainer.numProcPerNode = {big}"),
        format!("spec.trainer.resourcesPerNode nvidia.com/gpu = {big}"),
    ];
    record(object, lines, &why, verdict, ops);
    Ok(true)
}

/// The trainer's GPUs per node and its instance type, read from the pod its runtime
/// makes; `None` when it is not a training pod or its type is not known.
fn trainer_shape<'c>(
    object: &Value,
    ctx: &Ctx<'c, '_>,
    verdict: &Verdict,
) -> Result<Option<(u32, &'c InstanceProfile)>, ObjectError> {
    let pod = synthetic_pod(
        object,
        crate::write::trainjob::runtime(object, ctx, &verdict.namespace),
    );
    let view = PodView::read(&pod, FIELD, &ctx.eff.policy.catalog)?;
    let Class::Training(shape) = classify(
        &view,
        &SiteHints {
            pods: Some(2),
            identity: None,
            instance_type: crate::read::json::str_at(
                object,
                &[
                    "metadata",
                    "annotations",
                    crate::read::annotations::INSTANCE_TYPE,
                ],
            )
            .map(String::from),
            group_label: None,
            queued: false,
            operator_nnodes: false,
        },
        ctx.eff,
        ctx.who.inventory,
        &verdict.namespace,
    ) else {
        return Ok(None);
    };
    let Target::Known(inst, _) = shape.target else {
        return Ok(None);
    };
    Ok(Some((shape.per_pod, inst)))
}

/// `spec.trainer.numNodes`, 1 when unset. Read whole: `as u32` would turn numNodes
/// 2^32 + 1 into 1.
fn num_nodes(object: &Value) -> Result<u32, ObjectError> {
    match object.lookup("/spec/trainer/numNodes") {
        None | Some(Value::Null) => Ok(1),
        Some(v) => match v.as_u64().map(u32::try_from) {
            Some(Ok(n)) => Ok(n),
            _ => Err(ObjectError::bad(
                "spec.trainer.numNodes",
                "must be a whole number that fits 32 bits",
            )),
        },
    }
}

/// Why `nodes x g` GPUs cannot become whole nodes, and the node counts that can.
fn not_whole_nodes(nodes: u32, g: u32, gpus: u64, inst: &InstanceProfile) -> Finding {
    let big = inst.accelerators;
    let big64 = u64::from(big);
    let (down, up) = (gpus / big64, gpus.div_ceil(big64));
    Finding {
        rule: Rule::Reshape,
        mode: Mode::Enforce,
        site: FIELD.into(),
        found: format!(
            "{} x {} = {gpus} GPUs do not fill whole {} nodes.",
            count(nodes, "node"),
            count(g, "GPU"),
            inst.name
        ),
        fix: if down == 0 {
            format!(
                "use numNodes 1 with {big} GPUs (the whole node), or leave the job as it is without {RESHAPE}."
            )
        } else {
            format!("use numNodes {down} or {up} with {big} GPUs each.")
        },
        opt_in: None,
        why: None,
    }
}

/// Write the new node count, processes per node and devices per node into
/// `spec.trainer`; false when the object has no room for them.
fn write_trainer(
    object: &mut Value,
    new_nodes: u64,
    inst: &InstanceProfile,
    ops: &mut Ops,
) -> bool {
    let big = inst.accelerators;
    let Some(mut trainer) = Cursor::root(object, "").objects(&["spec", "trainer"], ops) else {
        return false;
    };
    trainer.set("numNodes", json!(new_nodes), ops);
    trainer.set("numProcPerNode", json!(big), ops);
    for w in ["limits", "requests"] {
        let Some(m) = object.pointer_mut(&format!("/spec/trainer/resourcesPerNode/{w}")) else {
            continue;
        };
        let mut cur = Cursor::root(m, &format!("/spec/trainer/resourcesPerNode/{w}"));
        if cur.value.get(RES_NVIDIA_GPU).is_some() {
            cur.set(RES_NVIDIA_GPU, json!(big), ops);
        }
        if cur.value.get(RES_EFA).is_some() {
            cur.set(RES_EFA, json!(inst.max_efa), ops);
        }
    }
    true
}
