//! An UPDATE in strict mode is refused only for what it changes: a rule that fires on
//! the new object and fired on the old one too (with the same requester) is no news,
//! so a controller updating an object admitted before (the garbage collector removing
//! a finalizer, Kueue unsuspending a job) is never refused. The exported policies read
//! `oldObject` the same way. Strict mode reads no size, so a scale changes nothing it
//! judges.

use serde_json::Value;

use crate::engine::judge_owned;
use crate::facts::policy::{Mode, Policy};
use crate::facts::requester::Requester;
use crate::judge::finding::Rule;
use crate::judge::verdict::Verdict;

/// Soften the strict findings of `verdict` (the new object's) that `old` had too.
pub(super) fn judge_change(
    old: &Value,
    verdict: &mut Verdict,
    policy: &Policy,
    who: &Requester<'_>,
) {
    let Ok(before) = judge_owned(old.clone(), policy, who) else {
        // An old object trainplace cannot read cannot excuse anything.
        return;
    };
    for rule in [Rule::PartialNode, Rule::MultiAz] {
        // The old object fails the rule for this requester, as the exported policies
        // read it (`old fails`): an opt-in the requester's groups are not granted
        // (Kueue's, the garbage collector's, on a job opted in by its submitter) fails
        // it too; one granted to them passes it.
        let fired = before
            .findings
            .iter()
            .any(|f| f.rule == rule && f.mode == Mode::Enforce);
        if !fired {
            continue;
        }
        for f in verdict.findings.iter_mut().filter(|f| f.rule == rule) {
            if f.mode == Mode::Enforce {
                f.mode = Mode::Warn;
            }
            f.opt_in = None;
            f.found
                .push_str(" The object was admitted so; this update does not change it.");
        }
    }
    verdict.allowed = !verdict.findings.iter().any(|f| f.mode == Mode::Enforce);
}
