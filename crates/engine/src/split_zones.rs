//! One job, templates pinned to different zones: a PyTorchJob's Master in one zone and
//! its Workers in another, Ray worker groups or Volcano tasks each in their own. Every
//! template alone sits in one zone, so the per-template multi-zone rule sees nothing;
//! the job's collectives still cross zones.

use crate::annotations::ALLOW_MULTI_AZ;
use crate::classify::zones;
use crate::finding::{Finding, Rule};
use crate::json::str_at;
use crate::judge::Ctx;
use crate::policy::OptIn;
use crate::rules::OptInState;
use crate::verdict::Verdict;

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
    if opt_in == OptInState::Refused {
        found.push_str(&format!(
            " The opt-in {ALLOW_MULTI_AZ} is not permitted for this namespace or your groups."
        ));
    }
    let fields: Vec<&str> = pinned.iter().map(|(f, _)| *f).collect();
    verdict.findings.push(Finding {
        rule: Rule::MultiAz,
        mode: ctx.eff.mode_multi_az(),
        site: fields.join(" and "),
        found,
        fix: "pin every template of the job to the same zone (or pin none; trainplace then holds the job in one zone).".into(),
        opt_in: Some(ALLOW_MULTI_AZ),
    });
}

/// The zone a template is pinned to, if exactly one.
pub(crate) fn pinned_zone(template: &serde_json::Value) -> Option<String> {
    zones(template, None).pinned
}
