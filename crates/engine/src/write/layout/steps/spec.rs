//! Walking a pod spec while editing it: a container by index, its name, and a required
//! (anti-)affinity term appended.

use serde_json::Value;

use crate::read::json::items;
use crate::write::edit::{Cursor, Ops};

/// Container `i` of `spec`, through a short-lived cursor, so `spec` can be walked
/// again later.
pub(super) fn container<'a>(spec: &'a mut Cursor<'_>, i: usize) -> Option<Cursor<'a>> {
    spec.reborrow().get("containers")?.at(i)
}

pub(super) fn container_name(spec: &Value, i: usize) -> String {
    items(spec, &["containers"])
        .get(i)
        .and_then(|c| c.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("?")
        .to_string()
}

pub(in crate::write::layout) fn push_required(
    spec: &mut Cursor<'_>,
    kind: &str,
    term: Value,
    ops: &mut Ops,
) -> bool {
    match spec
        .reborrow()
        .objects(&["affinity", kind], ops)
        .and_then(|c| c.array("requiredDuringSchedulingIgnoredDuringExecution", ops))
    {
        Some(mut terms) => {
            terms.push(term, ops);
            true
        }
        None => false,
    }
}
