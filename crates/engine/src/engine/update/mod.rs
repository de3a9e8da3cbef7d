//! An UPDATE is judged for what it changes. The object was admitted as it was, with its
//! submitter's grants; a controller's update (the garbage collector removing a
//! finalizer, Kueue suspending or unsuspending a job, an operator writing status) is
//! refused only for a finding the update itself brings. A finding the old object
//! already had, at the same template, for a job and template no larger (`sizes.rs`),
//! stays a warning. A pod's job label cannot change at all: a pod moved to
//! another job's label would leave the zone hold of the job it runs in.

use std::collections::HashSet;

use serde_json::Value;

use crate::engine::judge_owned;
use crate::facts::policy::{Mode, Policy};
use crate::facts::requester::Requester;
use crate::judge::finding::{Finding, Rule};
use crate::judge::sizes::Sizes;
use crate::judge::verdict::Verdict;
use crate::read::annotations::{JOB_IDENTITY_LABELS, SKIP};
use crate::read::json::{annotation, str_at};

mod strict;

/// Judge an UPDATE: `verdict` is the new object's; `old` the object before the update.
pub fn judge_change(old: &Value, verdict: &mut Verdict, policy: &Policy, who: &Requester<'_>) {
    if policy.strict() {
        return strict::judge_change(old, verdict, policy, who);
    }
    let relabelled = relabelled(old, &verdict.object, policy);
    let (was, is) = (
        Sizes::of_stored(old, policy, who),
        Sizes::of(&verdict.object, &policy.catalog),
    );
    // A finding is the same if its rule and template are, and the job and template did
    // not grow (`sizes.rs`): a job shrunk from 4 to 2 partial pods keeps its finding, one
    // grown from 4 to 16 has a new one. Where the sizes are unknown (a Pod, a TrainJob),
    // the finding must also say the same.
    let before: Vec<Finding> = match judge_owned(old.clone(), policy, who) {
        Ok(v) => v
            .findings
            .into_iter()
            .filter(|f| f.mode == Mode::Enforce)
            .collect(),
        // An old object trainplace cannot read cannot excuse anything.
        Err(_) => Vec::new(),
    };
    // Each template the finding names failed the same rule on the old object (findings
    // of several templates are folded into one, on either side).
    let failed: HashSet<(Rule, &str)> = before
        .iter()
        .flat_map(|f| f.sites().map(move |s| (f.rule, s)))
        .collect();
    let same = |f: &Finding| match was.kept(&is, &f.site) {
        Some(kept) => kept && f.sites().all(|s| failed.contains(&(f.rule, s))),
        None => before
            .iter()
            .any(|b| b.rule == f.rule && b.site == f.site && b.found == f.found),
    };
    for f in &mut verdict.findings {
        if f.mode == Mode::Enforce && same(f) {
            f.mode = Mode::Warn;
            f.found
                .push_str(" The object was admitted so; this update does not change it.");
        }
    }
    if let Some((key, from, to)) = relabelled {
        verdict.findings.push(Finding {
            rule: Rule::MultiAz,
            mode: Mode::Enforce,
            site: format!("metadata.labels[{key}]"),
            found: format!(
                "this update moves a training pod from job {key}={from} to {to}: the pod would leave the zone hold of the job it runs in."
            ),
            fix: "leave a pod's job labels as they were created; start a new pod for another job.".into(),
            opt_in: None,
            why: None,
        });
    }
    verdict.allowed = !verdict.findings.iter().any(|f| f.mode == Mode::Enforce);
}

/// Whether the mutating webhook leaves a workload's UPDATE as sent. The layout was
/// written when the object was created, or the object was left alone then; so an update
/// that changes nothing in `spec` (labels, annotations, finalizers, status: the garbage
/// collector, an operator, `kubectl label`) gets no patch, and neither does an update
/// of an object created with `trainplace.io/skip` that keeps it (the opt-out was
/// judged, with its submitter's grants, when the object was created). A patch there
/// would rewrite templates the API server holds immutable (a running Job's, a
/// JobSet's), so the update itself would be refused, or roll out a Deployment the
/// platform team left alone. The validating webhook still judges what the update
/// changes.
///
/// But for a workload stored with a skip its marks vouch for: its templates are signed
/// again as they are now (Kueue's unsuspend writes its flavor's node selector into
/// them), so its pods keep the skip.
pub fn leave_as_sent(old: &Value, new: &Value, who: &Requester<'_>, policy: &Policy) -> bool {
    let skip = |o: &Value| annotation(o, SKIP) == Some("true");
    old.get("spec") == new.get("spec")
        || (skip(old) && skip(new) && !crate::engine::skip_admitted(old, who, policy))
}

/// A kind whose pod templates cannot change after creation but for a suspended one's
/// metadata and scheduling directives (what Kueue writes when it admits it): batch Job,
/// JobSet. On its UPDATE the mutating webhook writes the templates' metadata only (the
/// admission mark it signs again for Kueue's new node selector), and nothing when the
/// layout itself would change: a layout patch there, from a newer policy or on an
/// object stored without the layout, would make Kueue's unsuspend fail as `field is
/// immutable`, and the job would never start.
/// <https://github.com/kubernetes/kubernetes/blob/v1.34.0/pkg/apis/batch/validation/validation.go>
pub fn immutable_templates(object: &Value) -> bool {
    let api = str_at(object, &["apiVersion"]).unwrap_or("");
    let kind = str_at(object, &["kind"]).unwrap_or("");
    matches!(
        (api.rsplit_once('/').map_or("", |(g, _)| g), kind),
        ("batch", "Job") | ("jobset.x-k8s.io", "JobSet")
    )
}

/// A training pod whose job label changed: (label, old value, new value); "" = absent.
fn relabelled(old: &Value, new: &Value, policy: &Policy) -> Option<(&'static str, String, String)> {
    if new.get("kind").and_then(Value::as_str) != Some("Pod") {
        return None;
    }
    let view = crate::read::podspec::PodView::read(new, "spec", &policy.catalog).ok()?;
    if view.accelerators().is_none() && view.efa() == 0 {
        return None;
    }
    JOB_IDENTITY_LABELS.iter().find_map(|(key, _)| {
        let label = |pod| str_at(pod, &["metadata", "labels", key]).unwrap_or("");
        let (from, to) = (label(old), label(new));
        (from != to).then(|| (*key, from.to_string(), to.to_string()))
    })
}
