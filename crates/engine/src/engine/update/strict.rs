//! An UPDATE in strict mode is refused only for what it changes: a rule that fires on
//! a template of the new object and fired on the same template of the old one too
//! (with the same requester) is no news, so a controller updating an object admitted
//! before (the garbage collector removing a finalizer, Kueue unsuspending a job) is
//! never refused. The exported policies read `oldObject` for the object as a whole (a
//! rule that failed anywhere on the old object excuses the new one: looser, while the
//! webhook is down). Strict mode reads no size, so a scale changes nothing it judges.

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
    // The old object fails the rule at this template for this requester: an opt-in the
    // requester's groups are not granted (Kueue's, the garbage collector's, on a job
    // opted in by its submitter) fails it too; one granted to them passes it. A skip the
    // requester may not write, kept from the old object, is no news either: the rules
    // it would have skipped are judged, and excused only where they failed before. Template
    // by template: one template already on part of a node excuses no other made so.
    let failed: Vec<(Rule, &str)> = before
        .findings
        .iter()
        .filter(|f| {
            f.mode == Mode::Enforce
                && matches!(
                    f.rule,
                    Rule::PartialNode | Rule::MultiAz | Rule::OptOutRefused
                )
        })
        .flat_map(|f| f.sites().map(move |s| (f.rule, s)))
        .collect();
    for f in &mut verdict.findings {
        // Every template it names (findings of several are folded into one).
        if !f.sites().all(|s| failed.contains(&(f.rule, s))) {
            continue;
        }
        if f.mode == Mode::Enforce {
            f.mode = Mode::Warn;
        }
        f.opt_in = None;
        f.found
            .push_str(" The object was admitted so; this update does not change it.");
    }
    verdict.allowed = !verdict.findings.iter().any(|f| f.mode == Mode::Enforce);
}
