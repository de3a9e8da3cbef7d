//! What every rule reads: the template's view and shape, the effective policy, the
//! opt-ins and the job's zones; and how a granted opt-in softens a finding.

use crate::facts::policy::{Effective, Mode, OptIn, Policy};
use crate::judge::classify::Shape;
use crate::judge::finding::Finding;
use crate::read::podspec::PodView;

/// Whether an opt-in annotation is set, and whether the requester may use it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OptInState {
    Absent,
    Granted,
    Refused,
}

pub struct RuleInput<'a> {
    pub view: &'a PodView<'a>,
    pub shape: &'a Shape<'a>,
    pub eff: &'a Effective<'a>,
    pub partial_opt_in: OptInState,
    pub multi_az_opt_in: OptInState,
    /// Namespace and zones where pods of the same job are already bound (inventory).
    pub siblings: Option<&'a std::collections::BTreeSet<String>>,
    /// Why the job is held in no zone although trainplace would hold it.
    pub unheld: Option<Unheld>,
}

/// A multi-pod job that nothing holds in one zone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unheld {
    /// No label ties its pods together, so no pod affinity can name them.
    NoIdentity,
    /// The object reached validation without the hold the mutating webhook writes.
    NotMutated,
}

/// A layout finding under a granted opt-in: admitted, but the user still hears what it
/// costs (a warning, or the audit log under `audit`); nothing when the rule is off.
/// Under a refused one, the finding says who may use the opt-in instead of offering
/// the annotation the user already set.
pub(crate) fn opted_in(
    mut finding: Finding,
    opt_in: OptInState,
    policy: &Policy,
) -> Option<Finding> {
    if opt_in == OptInState::Refused
        && let Some(opt) = finding.opt_in.take().and_then(OptIn::from_annotation)
    {
        finding.found.push(' ');
        finding.found.push_str(&opt.refused(policy));
    }
    if opt_in != OptInState::Granted {
        return Some(finding);
    }
    finding.mode = match finding.mode {
        Mode::Off => return None,
        Mode::Audit => Mode::Audit,
        Mode::Enforce | Mode::Warn => Mode::Warn,
    };
    if let Some(key) = finding.opt_in.take() {
        finding
            .found
            .push_str(&format!(" Admitted under the opt-in {key}."));
    }
    Some(finding)
}

/// Resolve an opt-in annotation against the policy's grants.
pub fn opt_in_state(
    set: bool,
    opt: OptIn,
    eff: &Effective<'_>,
    who: &crate::facts::requester::Requester<'_>,
) -> OptInState {
    match (set, eff.policy.may_opt_in(opt, who)) {
        (false, _) => OptInState::Absent,
        (true, true) => OptInState::Granted,
        (true, false) => OptInState::Refused,
    }
}
