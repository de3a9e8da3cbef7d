//! The three deny rules as CEL over `variables.templates` (see `facts`): when each
//! fires, and the message the webhook would give (rule, field, what, fix, opt-in).

use crate::facts::policy::OptIn;
use crate::judge::rules::MEASURED;
use crate::read::annotations::{
    ALLOW_MULTI_AZ, ALLOW_PARTIAL_NODE, RES_EFA, RES_NVIDIA_GPU, RESHAPE,
};
use crate::vap::text::{fill, lit};

/// A rule the exporter writes as a ValidatingAdmissionPolicy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    PartialNode,
    MultiAz,
    ImpossibleRequest,
    /// An object past the bounds the policies judge within (`vap::bounds`).
    TooLarge,
}

impl Check {
    pub const ALL: [Check; 4] = [
        Check::PartialNode,
        Check::MultiAz,
        Check::ImpossibleRequest,
        Check::TooLarge,
    ];

    /// The rule name, as in the webhook's findings.
    pub fn rule(self) -> &'static str {
        match self {
            Check::PartialNode => "partial-node",
            Check::MultiAz => "multi-az",
            Check::ImpossibleRequest => "impossible-request",
            Check::TooLarge => "too-large",
        }
    }
}

/// More pods than a cluster runs (the engine's `MAX_JOB_PODS`).
const MAX_JOB_PODS: u64 = 150_000;

/// Several pods: a bare Pod's launcher says so; a workload's count is over 1 or
/// unknown (`total` -1).
const MULTI_POD: &str = "(object.kind == 'Pod' ? variables.podSize != 0 : (variables.total > 1 || variables.total < 0))";
const TRAINING: &str = "(y.dev && (y.train || (object.kind == 'Pod' && variables.podSize == 1)))";

/// Instance type `n` is too small or of another kind for the pod of `y`.
const IMPOSSIBLE_ON: &str = "((y.p.g > 0 && y.fam != variables.catalog[n].family) || (y.p.g > variables.catalog[n].gpus && !y.p.shared) || y.p.efa > variables.catalog[n].efa)";
/// Every core of the instance's devices (all 32 NeuronCores of a trn1) is the whole node,
/// as the engine's `classify` counts it.
const PARTIAL_ON: &str = "(y.p.cores && variables.catalog[n].cores > 0 && y.p.g == variables.catalog[n].cores ? false : (y.p.shared || y.p.g < variables.catalog[n].gpus))";

fn absurd() -> String {
    format!("(object.kind != 'Pod' && y.p.n > {MAX_JOB_PODS} && (y.p.g > 0 || y.p.efa > 0))")
}

/// The condition under which the rule fires for template `y`.
pub(crate) fn fires(check: Check) -> String {
    match check {
        Check::PartialNode => format!(
            "{TRAINING} && {MULTI_POD} && y.p.g > 0 && !(y.p.optP && variables.grantPartialNode) && y.types.exists(n, {PARTIAL_ON})"
        ),
        Check::MultiAz => format!(
            "{TRAINING} && {MULTI_POD} && !(y.p.optZ && variables.grantMultiAz) && (y.zmany || y.p.zspread || y.p.zanti)"
        ),
        Check::ImpossibleRequest => format!(
            "({TRAINING} && y.types.exists(n, {IMPOSSIBLE_ON})) || {}",
            absurd()
        ),
        Check::TooLarge => "false".into(),
    }
}

/// The validation: no template fires.
pub(crate) fn validation(check: Check) -> String {
    if check == Check::TooLarge {
        return "variables.tooLarge == ''".into();
    }
    format!("!variables.templates.exists(y, {})", fires(check))
}

/// `count` of `what`, pluralised like the engine's `count`.
fn count(n: &str, what: &str) -> String {
    format!("string({n}) + ' ' + {what} + ({n} == 1 ? '' : 's')")
}

/// A set opt-in the check still refuses: say so, and where it is granted, instead of
/// offering the annotation the user already wrote.
fn refused(opt: OptIn, set: &str) -> String {
    format!(
        "({set} ? {} : '')",
        lit(&format!(
            " {}: \"true\" is set, but the policy does not grant it to this namespace or your groups (ask the platform team: optIns.{}).",
            opt.annotation(),
            opt.policy_key()
        ))
    )
}

fn opt_in(annotation: &str, set: &str) -> String {
    format!(
        "({set} ? '' : {})",
        lit(&format!(" Opt in: {annotation}: \"true\"."))
    )
}

/// The engine's partial-node wording: for a workload the job's pods and the whole-node
/// layout they fill (`rules::partial_node`); for a bare pod, whose pod count the engine
/// reads from launcher settings, one pod per node.
fn partial_message() -> String {
    let what = format!(
        "(y.p.shared ? y.p.res + ' slice' : (y.p.res == {} ? 'GPU' : 'accelerator'))",
        lit(RES_NVIDIA_GPU)
    );
    let g = "variables.catalog[n].gpus";
    let total = "(variables.total * y.p.g)";
    let pod = lit("pod");
    let whole = format!(
        "{total} <= {g} ? '1 pod x ' + {all_total} + ' on one node, so every rank talks over NVLink'
 : {total} % {g} == 0 ? {pods_whole} + ' x ' + {all} + {reshape}
 : {pods_up} + ' x ' + {all} + ' (' + {all_total} + ' do not fill whole nodes; this rounds up)'",
        all_total = count(total, &what),
        pods_whole = count(&format!("({total} / {g})"), &pod),
        pods_up = count(&format!("(({total} + {g} - 1) / {g})"), &pod),
        all = count(g, &what),
        reshape = lit(&format!(" (annotation {RESHAPE}: \"true\" rewrites it)")),
    );
    let fix = format!(
        "(y.p.shared ? 'one pod per node with all ' + string({g}) + ' whole devices (' + variables.catalog[n].resource + ' instead of slices)' : object.kind == 'Pod' || variables.total < 0 ? 'one pod per node with all ' + {all} : ({whole}))",
        all = count(g, &what),
    );
    let pods_text = format!(
        "(object.kind == 'Pod' || variables.total < 0 ? 'pods of ' + {per} : {pods} + ' x ' + {per})",
        per = count("y.p.g", &what),
        pods = count("variables.total", &pod),
    );
    let msg = format!(
        "'[partial-node] ' + y.p.f + ': ' + {pods_text} + ' on ' + n + ' (' + string({g}) + ' per node): ranks on one node talk over EFA/TCP instead of NVLink (' + {measured} + ').' + {refused} + ' Fix: use ' + {fix} + '.' + {opt}",
        measured = lit(MEASURED),
        refused = refused(OptIn::AllowPartialNode, "y.p.optP"),
        opt = opt_in(ALLOW_PARTIAL_NODE, "y.p.optP"),
    );
    format!(
        "variables.templates.filter(y, {f}).map(y, y.types.filter(n, {PARTIAL_ON}).map(n, {msg})[0])[0]",
        f = fires(Check::PartialNode)
    )
}

fn multi_az_message() -> String {
    let msg = format!(
        "'[multi-az] ' + y.p.f + ': the job may span availability zones: ' + (y.zmany ? 'required node affinity allows several zones' : y.p.zspread ? 'a topologySpreadConstraint spreads pods over zones' : 'a required pod anti-affinity on a zone key puts the job\\'s pods in different zones') + '; EFA traffic cannot cross zones.' + {refused} + ' Fix: pin one zone (nodeSelector topology.kubernetes.io/zone) or remove the multi-zone constraint; trainplace then holds the job in one zone.' + {opt}",
        refused = refused(OptIn::AllowMultiAz, "y.p.optZ"),
        opt = opt_in(ALLOW_MULTI_AZ, "y.p.optZ"),
    );
    format!(
        "variables.templates.filter(y, {f}).map(y, {msg})[0]",
        f = fires(Check::MultiAz)
    )
}

fn impossible_message() -> String {
    let efa = lit(RES_EFA);
    let per_type = fill(
        "(y.p.g > 0 && y.fam != @I@.family) ? 'the pod asks for ' + y.p.res + ' but ' + n + ' offers ' + @I@.resource + '. Fix: request ' + @I@.resource + ' or pick an instance type with ' + y.p.res + '.'
: (y.p.g > @I@.gpus && !y.p.shared) ? 'the pod asks for ' + string(y.p.g) + ' ' + y.p.res + ' but ' + n + ' has ' + string(@I@.gpus) + '. Fix: ask for at most ' + string(@I@.gpus) + ' per pod and add pods (recommended: ' + string(@I@.gpus) + ' per pod, one pod per node).'
: @I@.efa == 0 ? 'the pod asks for ' + string(y.p.efa) + ' ' + @E@ + ' but ' + n + ' has no EFA. Fix: remove ' + @E@ + ' or pick an EFA instance type.'
: 'the pod asks for ' + string(y.p.efa) + ' ' + @E@ + ' but ' + n + ' has ' + string(@I@.efa) + '. Fix: ask for ' + string(@I@.efa) + ' (all of them) with all ' + string(@I@.gpus) + ' GPUs.'",
        &[("I", "variables.catalog[n]"), ("E", &efa)],
    );
    let absurd_msg = format!(
        "string(y.p.n) + ' pods from this template; a cluster runs at most {MAX_JOB_PODS} pods in all. Fix: set replicas and parallelism to the job\\'s real size.'"
    );
    format!(
        "variables.templates.filter(y, {f}).map(y, '[impossible-request] ' + y.p.f + ': ' + ({a} ? {absurd_msg} : y.types.filter(n, {IMPOSSIBLE_ON}).map(n, {per_type})[0]))[0]",
        f = fires(Check::ImpossibleRequest),
        a = absurd(),
    )
}

/// The messageExpression: the first firing template's message.
pub(crate) fn message(check: Check) -> String {
    match check {
        Check::PartialNode => partial_message(),
        Check::MultiAz => multi_az_message(),
        Check::ImpossibleRequest => impossible_message(),
        Check::TooLarge => crate::vap::bounds::message(),
    }
}
