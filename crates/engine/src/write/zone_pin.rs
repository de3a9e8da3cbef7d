//! Strict mode's zone pin: `nodeSelector topology.kubernetes.io/zone` set to the
//! namespace's zone on a template that requests accelerators and names no zone, with
//! the reason in the template's change annotation beside the layout's.

use serde_json::Value;

use crate::error::ObjectError;
use crate::facts::policy::OptIn;
use crate::judge::judgement::Ctx;
use crate::judge::plan::Change;
use crate::judge::strict::Asks;
use crate::judge::verdict::Verdict;
use crate::read::annotations::LABEL_ZONE;
use crate::read::json::annotation;
use crate::write::edit::{Cursor, Ops};
use crate::write::layout::write_mutated;

fn pin_change(zone: &str) -> Change {
    Change::new(
        format!("nodeSelector {LABEL_ZONE}={zone}"),
        "strict mode: every accelerator pod of this namespace runs in its zone",
    )
}

/// Pin an assembled pod (a TrainJob's node pod, mapped back into its runtime patch) to
/// the namespace's zone when it requests accelerators and names no zone.
pub(crate) fn pin_pod(
    pod: &mut Value,
    field: &str,
    ctx: &Ctx<'_, '_>,
    ops: &mut Ops,
) -> Result<Option<Change>, ObjectError> {
    let Some(zone) = ctx.eff.defaults.zone.as_deref() else {
        return Ok(None);
    };
    let opted = annotation(pod, OptIn::AllowMultiAz.annotation()) == Some("true")
        && ctx.eff.policy.may_opt_in(OptIn::AllowMultiAz, ctx.who);
    if opted || !Asks::read(pod, field, ctx)?.any() {
        return Ok(None);
    }
    let Some(mut selector) = Cursor::root(pod, "").objects(&["spec", "nodeSelector"], ops) else {
        return Ok(None);
    };
    Ok(selector
        .insert_missing(LABEL_ZONE, Value::String(zone.to_string()), ops)
        .then(|| pin_change(zone)))
}

/// Pin the template at `pointer` (field `field`) to `zone`.
pub(crate) fn pin(
    object: &mut Value,
    pointer: &str,
    field: &str,
    zone: &str,
    verdict: &mut Verdict,
    ops: &mut Ops,
) {
    let Some(template) = object.pointer_mut(pointer) else {
        return;
    };
    let Some(mut selector) =
        Cursor::root(template, pointer).objects(&["spec", "nodeSelector"], ops)
    else {
        return;
    };
    if !selector.insert_missing(LABEL_ZONE, Value::String(zone.to_string()), ops) {
        return;
    }
    let mut change = pin_change(zone);
    change.site = field.to_string();
    verdict.changes.push(change);
    let site: Vec<Change> = verdict
        .changes
        .iter()
        .filter(|c| c.site == field)
        .cloned()
        .collect();
    if let Some(template) = object.pointer_mut(pointer) {
        write_mutated(template, pointer, &site, ops);
    }
}
