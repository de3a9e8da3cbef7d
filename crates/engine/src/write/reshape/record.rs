//! Writing a reshape's size fields, and explaining every rewritten field on the
//! workload itself.

use serde_json::Value;

use crate::judge::plan::Change;
use crate::judge::verdict::Verdict;
use crate::write::edit::{Cursor, Ops};

/// Explain a reshape on the workload itself: every rewritten field and why.
pub(super) fn record(
    object: &mut Value,
    lines: Vec<String>,
    why: &str,
    verdict: &mut Verdict,
    ops: &mut Ops,
) {
    let changes: Vec<Change> = lines
        .into_iter()
        .map(|what| Change::new(what, why))
        .collect();
    crate::write::layout::write_mutated(object, "", &changes, ops);
    verdict.changes.extend(changes);
}

/// Write `value` at `pointer`; the parent object must exist.
pub(super) fn set_at(object: &mut Value, pointer: &str, value: Value, ops: &mut Ops) {
    let Some((parent, key)) = pointer.rsplit_once('/') else {
        return;
    };
    if let Some(p) = object.pointer_mut(parent) {
        Cursor::root(p, parent).set(&key.replace("~1", "/").replace("~0", "~"), value, ops);
    }
}
