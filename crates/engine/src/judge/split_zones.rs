//! One job, templates pinned to different zones: a PyTorchJob's Master in one zone and
//! its Workers in another, Ray worker groups or Volcano tasks each in their own. Every
//! template alone sits in one zone, so the per-template multi-zone rule sees nothing;
//! the job's collectives still cross zones.

use crate::facts::policy::OptIn;
use crate::judge::classify::zones;
use crate::judge::finding::{Finding, Rule};
use crate::judge::judgement::{Ctx, Judgement};
use crate::judge::rules::OptInState;
use crate::judge::verdict::Verdict;
use crate::read::annotations::{ALLOW_MULTI_AZ, LABEL_ZONE};
use crate::read::json::str_at;
use crate::read::workload::Site;

/// `pinned`: the training templates of one job (field, zone they are pinned to).
pub(crate) fn check(
    object: &serde_json::Value,
    pinned: &[(&str, String)],
    ctx: &Ctx<'_, '_>,
    verdict: &mut Verdict,
) {
    let mut distinct: Vec<&str> = pinned.iter().map(|(_, z)| z.as_str()).collect();
    distinct.sort_unstable();
    distinct.dedup();
    if distinct.len() < 2 {
        return;
    }
    let set = str_at(object, &["metadata", "annotations", ALLOW_MULTI_AZ]) == Some("true");
    let opt_in = ctx.opt_in(set, OptIn::AllowMultiAz);
    if opt_in == OptInState::Granted {
        return;
    }
    let each: Vec<String> = pinned
        .iter()
        .map(|(field, zone)| format!("{field} to {zone}"))
        .collect();
    let mut found = format!(
        "the job may span availability zones: its templates are pinned to different zones ({}); EFA traffic cannot cross zones.",
        each.join(", ")
    );
    let refused = opt_in == OptInState::Refused;
    if refused {
        found.push(' ');
        found.push_str(&OptIn::AllowMultiAz.refused(ctx.eff.policy));
    }
    let fields: Vec<&str> = pinned.iter().map(|(f, _)| *f).collect();
    verdict.findings.push(Finding {
        rule: Rule::MultiAz,
        mode: ctx.eff.mode_multi_az(),
        site: fields.join(" and "),
        found,
        fix: "pin every template of the job to the same zone (or pin none; trainplace then holds the job in one zone).".into(),
        opt_in: (!refused).then_some(ALLOW_MULTI_AZ),
        why: None,
    });
}

/// The zone a template is pinned to, if exactly one.
pub(crate) fn pinned_zone(template: &serde_json::Value) -> Option<String> {
    zones(template, None).pinned
}

/// Some training templates of a job pinned to one zone and others pinned nowhere: the
/// pod affinity hold lets the first pod of the job go anywhere, so an unpinned Master
/// scheduled first can leave the pinned Workers' zone. The zone and the unpinned
/// templates' fields and pointers.
pub(crate) fn unpinned_beside<'s>(
    pinned: &[(&str, String)],
    judged: &[(&'s Site, Judgement<'_>)],
) -> Option<(String, Vec<&'s Site>)> {
    let zone = &pinned.first()?.1;
    if pinned.iter().any(|(_, z)| z != zone) {
        return None;
    }
    let free: Vec<&Site> = judged
        .iter()
        .filter(|(site, j)| site.pods != Some(0) && j.has_layout() && j.unconstrained())
        .map(|(site, _)| *site)
        .collect();
    (!free.is_empty()).then(|| (zone.clone(), free))
}

/// The finding for [`unpinned_beside`] when the object is judged as stored.
pub(crate) fn unpinned_finding(zone: &str, free: &[&Site], ctx: &Ctx<'_, '_>) -> Finding {
    let fields: Vec<&str> = free.iter().map(|s| s.field.as_str()).collect();
    Finding {
        rule: Rule::MultiAz,
        mode: ctx.eff.mode_multi_az(),
        site: fields.join(" and "),
        found: format!(
            "the job may span availability zones: some of its templates are pinned to {zone}, {} not; the first pod of the job may go to any zone and the rest follow the pins.",
            fields.join(" and ")
        ),
        fix: format!(
            "pin every template of the job to {zone} (nodeSelector {LABEL_ZONE}: {zone}); trainplace's mutating webhook does so."
        ),
        opt_in: Some(ALLOW_MULTI_AZ),
        why: None,
    }
}
