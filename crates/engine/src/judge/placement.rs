//! Placement directives of the controllers themselves, which act outside a template's
//! own affinity: JobSet's exclusive topology gives each child Job a topology domain of
//! its own, and a LeaderWorkerSet's subgroup exclusive topology one per subgroup. On a
//! zone key that puts one training job in several zones.
//! <https://github.com/kubernetes-sigs/jobset/blob/main/api/jobset/v1alpha2/jobset_types.go> (ExclusiveKey)
//! <https://github.com/kubernetes-sigs/lws/blob/main/api/leaderworkerset/v1/leaderworkerset_types.go> (SubGroupExclusiveKeyAnnotationKey)

use serde_json::Value;

use crate::facts::policy::OptIn;
use crate::judge::finding::{Finding, Rule};
use crate::judge::judgement::Ctx;
use crate::judge::rules::OptInState;
use crate::judge::verdict::Verdict;
use crate::read::annotations::{
    ALLOW_MULTI_AZ, JOBSET_EXCLUSIVE, LWS_SUBGROUP_EXCLUSIVE, ZONE_KEYS,
};
use crate::read::json::{items, str_at};
use crate::read::workload::Kind;

/// Where the object asks its controller to spread one job over zones: (field, key).
fn zone_directive(object: &Value, kind: Kind) -> Option<(String, String)> {
    let on_zone = |v: Option<&str>| v.filter(|k| ZONE_KEYS.contains(k)).map(String::from);
    match kind {
        Kind::JobSet | Kind::TrainJob => {
            if let Some(k) = on_zone(str_at(
                object,
                &["metadata", "annotations", JOBSET_EXCLUSIVE],
            )) {
                return Some((format!("metadata.annotations[{JOBSET_EXCLUSIVE}]"), k));
            }
            items(object, &["spec", "replicatedJobs"])
                .iter()
                .enumerate()
                .find_map(|(i, rj)| {
                    let k = on_zone(str_at(
                        rj,
                        &["template", "metadata", "annotations", JOBSET_EXCLUSIVE],
                    ))?;
                    Some((
                        format!("spec.replicatedJobs[{i}].template.metadata.annotations[{JOBSET_EXCLUSIVE}]"),
                        k,
                    ))
                })
        }
        Kind::LeaderWorkerSet => on_zone(str_at(
            object,
            &["metadata", "annotations", LWS_SUBGROUP_EXCLUSIVE],
        ))
        .map(|k| (format!("metadata.annotations[{LWS_SUBGROUP_EXCLUSIVE}]"), k)),
        _ => None,
    }
}

/// A multi-pod training workload whose controller is told to give parts of it zones
/// of their own.
pub(crate) fn check(object: &Value, multi_pod: bool, ctx: &Ctx<'_, '_>, verdict: &mut Verdict) {
    if !multi_pod {
        return;
    }
    let Some((field, key)) = zone_directive(object, ctx.kind) else {
        return;
    };
    let set = str_at(object, &["metadata", "annotations", ALLOW_MULTI_AZ]) == Some("true");
    let opt_in = ctx.opt_in(set, OptIn::AllowMultiAz);
    if opt_in == OptInState::Granted {
        return;
    }
    verdict.findings.push(Finding {
        rule: Rule::MultiAz,
        mode: ctx.eff.mode_multi_az(),
        site: field.clone(),
        found: format!(
            "{field} = {key} tells the controller to give each part of the job a zone of its own: the job spans availability zones, and EFA traffic cannot cross zones."
        ),
        fix: format!("remove the annotation, or give it a key below the zone (kubernetes.io/hostname, a rack or network-node label); trainplace holds the whole job in one {key}."),
        opt_in: Some(ALLOW_MULTI_AZ),
        why: None,
    });
}
