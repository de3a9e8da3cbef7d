//! Strict mode as CEL (`guarantee: strict`; the engine's `judge::strict`): the same
//! reading of each pod template (its accelerators, the instance types and zone its
//! node selection reaches) and of each DRA claim, over the same bounds, so the policies
//! decide as the webhook does with no exception. Every walk is over a list whose
//! length the bounds cap before it is walked, or once over the object's own lists.
//!
//! An UPDATE is judged for what it changes (`vap::old`), as in the precise policies.

use crate::facts::policy::{OptIn, Policy};
use crate::facts::whole_node::{offers, uncounted};
use crate::judge::bounds::{MAX_EXPRESSIONS, MAX_TERMS, MAX_VALUES};
use crate::judge::strict::claims::{CLAIM_FIX, whole_node_count};
use crate::judge::strict::{MAX_POD_CLAIMS, PARTIAL_FIX};
use crate::read::annotations::{
    ALLOW_MULTI_AZ, ALLOW_PARTIAL_NODE, LABEL_INSTANCE_TYPE, LABEL_INSTANCE_TYPE_BETA, LABEL_ZONE,
};
use crate::read::devices::DRA_EXTENDED_PREFIX;
use crate::vap::checks::Check;
use crate::vap::error::ExportError;
use crate::vap::facts::{Variable, grant_of, per_namespace};
use crate::vap::text::{fill, list, lit};

/// A count no catalog type reaches (a class whose resource no type offers).
const NEVER: i64 = 1 << 40;

/// `offers`: accelerator resource -> instance type -> what a whole node holds; a type
/// that offers the resource in a count the catalog does not give holds [`NEVER`], so
/// every count is short of it (the engine's `uncounted`).
fn offers_map(policy: &Policy) -> String {
    let catalog = &policy.catalog;
    let entries: Vec<String> = offers(catalog)
        .iter()
        .map(|(r, types)| {
            let unknown = catalog
                .instances()
                .filter(|i| uncounted(catalog, i, r))
                .map(|i| format!("{}: {NEVER}", lit(&i.name)));
            let t: Vec<String> = types
                .iter()
                .map(|(n, c)| format!("{}: {c}", lit(n)))
                .chain(unknown)
                .collect();
            format!("{}: {{{}}}", lit(r), t.join(", "))
        })
        .collect();
    format!("{{{}}}", entries.join(",\n "))
}

/// `classes`: DRA device class -> whether it is an accelerator, a slice, and the count
/// that takes a whole node of every type.
fn classes(policy: &Policy) -> String {
    let c = &policy.catalog;
    let entries: Vec<String> = c
        .device_classes()
        .iter()
        .map(|d| {
            let accel = d.counts == trainplace_catalog::Counts::Accelerator;
            let need = d
                .resource
                .as_deref()
                .map(|r| whole_node_count(c, r))
                .filter(|n| *n != u32::MAX)
                .map_or(NEVER, i64::from);
            format!(
                "{}: {{'accel': {accel}, 'shared': {}, 'need': {need}}}",
                lit(&d.name),
                d.shared
            )
        })
        .collect();
    format!("{{{}}}", entries.join(", "))
}

/// `zone`: the policy's `defaults.zone` for the request's namespace (`''`: none).
fn zone(policy: &Policy) -> Result<String, ExportError> {
    per_namespace(policy, |d| d.zone.as_ref())
}

/// Whether resource name `k` is an accelerator (the engine's `held::is_accelerator`).
fn is_accelerator(policy: &Policy, k: &str) -> String {
    // The cheap tests first; the regex last.
    let mut out = format!("({k}.contains('/') && !{k}.startsWith('kubernetes.io/')");
    for n in policy.non_accelerators() {
        match n.strip_suffix('*') {
            Some(prefix) => out.push_str(&format!(" && !{k}.startsWith({})", lit(prefix))),
            None => out.push_str(&format!(" && {k} != {}", lit(n))),
        }
    }
    // A DRA class's devices asked for by name, unless the class counts no accelerator.
    let not_devices: Vec<String> = policy
        .catalog
        .device_classes()
        .iter()
        .filter(|d| d.counts != trainplace_catalog::Counts::Accelerator)
        .map(|d| format!("{DRA_EXTENDED_PREFIX}{}", d.name))
        .collect();
    let names: Vec<&str> = not_devices.iter().map(String::as_str).collect();
    out.push_str(&format!(
        " && (!{k}.matches('^[^/]*[.]kubernetes[.]io/') || ({k}.startsWith({}) && !({k} in {}))))",
        lit(DRA_EXTENDED_PREFIX),
        list(&names)
    ));
    out
}

/// An annotation of template `t` is "true".
fn opted(t: &str, key: &str) -> String {
    fill(
        "(has(@T@.metadata) && has(@T@.metadata.annotations) && @K@ in @T@.metadata.annotations && @T@.metadata.annotations[@K@] == 'true')",
        &[("T", t), ("K", &lit(key))],
    )
}

/// The pod templates of the object: the precise exporter's `sites`, and the core
/// controllers' templates.
fn templates() -> String {
    "object.kind == 'Pod' ? [{'t': object, 'f': 'spec'}] : variables.sites.map(s, {'t': s.t, 'f': s.f})
 + ((object.apiVersion.startsWith('apps/') && object.kind in ['Deployment', 'ReplicaSet', 'StatefulSet', 'DaemonSet']) || (object.apiVersion == 'v1' && object.kind == 'ReplicationController') ? (has(object.spec) && has(object.spec.template) ? [{'t': object.spec.template, 'f': 'spec.template.spec'}] : []) : [])
 + (object.apiVersion.startsWith('batch/') && object.kind == 'CronJob' && has(object.spec) && has(object.spec.jobTemplate) && has(object.spec.jobTemplate.spec) && has(object.spec.jobTemplate.spec.template) ? [{'t': object.spec.jobTemplate.spec.template, 'f': 'spec.jobTemplate.spec.template.spec'}] : [])".into()
}

/// Each template's lists, read once, and whether they are past the bounds (sizes only,
/// so a template too large to judge costs no walk of its lists).
fn parts() -> String {
    let terms = "(has(@S@.affinity) && has(@S@.affinity.nodeAffinity) && has(@S@.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution) && has(@S@.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms) ? @S@.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms : [])";
    fill(
        "variables.strictTemplates.map(x, {'t': x.t, 'f': x.f, 'spec': has(x.t.spec) ? x.t.spec : {},
 'app': has(x.t.spec) && has(x.t.spec.containers) ? x.t.spec.containers : [],
 'init': has(x.t.spec) && has(x.t.spec.initContainers) ? x.t.spec.initContainers : [],
 'terms': has(x.t.spec) ? @TERMS@ : []}).map(x, {'t': x.t, 'f': x.f, 'spec': x.spec, 'app': x.app, 'init': x.init, 'terms': x.terms, 'big': @BIG@})",
        &[
            ("TERMS", &fill(terms, &[("S", "x.t.spec")])),
            ("BIG", &big()),
        ],
    )
}

/// Template `x` is past the bounds strict mode judges within (the engine's `too_large`):
/// its node-selector terms, checked in an order that reads only sizes of lists already
/// bounded (its containers and resource names are `tooLarge`'s, read before any of
/// this).
fn big() -> String {
    format!(
        "size(x.terms) > {MAX_TERMS} || x.terms.exists(t, has(t.matchExpressions) && (size(t.matchExpressions) > {MAX_EXPRESSIONS} || t.matchExpressions.exists(e, has(e.values) && size(e.values) > {MAX_VALUES})))"
    )
}

/// Init container `c` is a native sidecar: it runs beside the app containers, so its
/// requests add to theirs (the scheduler's effective request).
const SIDECAR: &str = "(has(c.restartPolicy) && c.restartPolicy == 'Always')";

/// A container's count of resource `r` (0 when it asks for none).
fn quantity(c: &str, r: &str) -> String {
    fill(
        "(has(@C@.resources) && has(@C@.resources.limits) && @R@ in @C@.resources.limits ? int(string(@C@.resources.limits[@R@])) : 0)",
        &[("C", c), ("R", r)],
    )
}

/// What each template asks for: too large to judge, accelerators, claims, and what it
/// holds of each resource some catalog type offers whole.
fn facts(policy: &Policy) -> String {
    // Limits, and requests alone (a DRA class's name may be requested without a limit).
    let asked = |test: &str| {
        ["limits", "requests"]
            .map(|w| {
                format!(
                    "(has(c.resources) && has(c.resources.{w}) ? c.resources.{w} : {{}}).exists(k, {test} && int(string(c.resources.{w}[k])) > 0)"
                )
            })
            .join(" || ")
    };
    let accel = format!(
        "(x.app + x.init).exists(c, {})",
        asked(&is_accelerator(policy, "k"))
    );
    let foreign = format!(
        "!x.big && (x.app + x.init).exists(c, {})",
        asked(&format!(
            "{} && !(k in variables.offers)",
            is_accelerator(policy, "k")
        ))
    );
    let held: Vec<String> = offers(&policy.catalog)
        .keys()
        .map(|r| {
            let q = quantity("c", &lit(r));
            format!(
                "{}: x.big ? 0 : [x.app.map(c, {q}).sum() + x.init.filter(c, {SIDECAR}).map(c, {q}).sum(), (x.init.filter(c, !{SIDECAR}).map(c, {q}) + [0]).max()].max()",
                lit(r)
            )
        })
        .collect();
    format!(
        "variables.strictParts.map(x, {{'t': x.t, 'f': x.f, 'spec': x.spec, 'terms': x.terms,
 'big': x.big,
 'accel': {accel},
 'foreign': {foreign},
 'claims': has(x.spec.resourceClaims) && size(x.spec.resourceClaims) > 0,
 'named': has(x.spec.resourceClaims) && (size(x.spec.resourceClaims) > {MAX_POD_CLAIMS} || x.spec.resourceClaims.exists(c, has(c.resourceClaimName))),
 'held': {{{}}}}})",
        held.join(", ")
    )
}

/// Whether template `x` can reach catalog type `n` (the engine's `reach`).
fn reaches(x: &str, n: &str) -> String {
    let keys = list(&[LABEL_INSTANCE_TYPE, LABEL_INSTANCE_TYPE_BETA]);
    let mut selector = Vec::new();
    for k in [LABEL_INSTANCE_TYPE, LABEL_INSTANCE_TYPE_BETA] {
        selector.push(fill(
            "(!(@K@ in @X@.spec.nodeSelector) || @X@.spec.nodeSelector[@K@] == @N@ || @X@.spec.nodeSelector[@K@] == 'ml.' + @N@)",
            &[("K", &lit(k)), ("X", x), ("N", n)],
        ));
    }
    fill(
        "((!has(@X@.spec.nodeSelector) || (@SEL@)) && (size(@X@.terms) == 0 || @X@.terms.exists(t, !has(t.matchExpressions) || t.matchExpressions.all(e, !(e.key in @KEYS@) || (e.operator == 'In' ? (has(e.values) && (@N@ in e.values || ('ml.' + @N@) in e.values)) : e.operator != 'DoesNotExist')))))",
        &[
            ("X", x),
            ("N", n),
            ("KEYS", &keys),
            ("SEL", &selector.join(" && ")),
        ],
    )
}

/// Template `x` names an instance type the catalog does not list.
fn unknown_type(x: &str) -> String {
    let keys = list(&[LABEL_INSTANCE_TYPE, LABEL_INSTANCE_TYPE_BETA]);
    fill(
        "((has(@X@.spec.nodeSelector) && @KEYS@.exists(k, k in @X@.spec.nodeSelector && !(@X@.spec.nodeSelector[k] in variables.catalog) && !variables.catalog.exists(n, 'ml.' + n == @X@.spec.nodeSelector[k]))) || @X@.terms.exists(t, has(t.matchExpressions) && t.matchExpressions.exists(e, e.key in @KEYS@ && e.operator == 'In' && has(e.values) && e.values.exists(v, !(v in variables.catalog) && !variables.catalog.exists(n, 'ml.' + n == v)))))",
        &[("X", x), ("KEYS", &keys)],
    )
}

/// Template `x` holds part of a node of some type it reaches.
fn short(policy: &Policy, x: &str) -> String {
    let mut any = Vec::new();
    for r in offers(&policy.catalog).keys() {
        let r = lit(r);
        let h = format!("{x}.held[{r}]");
        let reach = reaches(x, "n");
        any.push(format!(
            "({h} > 0 && (!variables.offers[{r}].exists(n, {reach}) || variables.offers[{r}].exists(n, {reach} && variables.offers[{r}][n] > {h})))"
        ));
    }
    if any.is_empty() {
        return "false".into();
    }
    format!("({})", any.join("\n || "))
}

/// The fields of the templates partial-node fires on, in `facts` (a variable name).
fn partial_fires(policy: &Policy, facts: &str) -> String {
    format!(
        "variables.{facts}.filter(x, (x.accel || x.named) && !({} && variables.grantPartialNode) && (x.named || x.big || {} || x.foreign || {})).map(x, x.f)",
        opted("x.t", ALLOW_PARTIAL_NODE),
        unknown_type("x"),
        short(policy, "x")
    )
}

/// Template `x` is pinned to the namespace's zone (the engine's `zone::pinned`).
fn pinned(x: &str) -> String {
    fill(
        "(has(@X@.spec.nodeSelector) && @Z@ in @X@.spec.nodeSelector ? (variables.zone == '' || @X@.spec.nodeSelector[@Z@] == variables.zone) : (variables.zone != '' && size(@X@.terms) > 0 && @X@.terms.all(t, has(t.matchExpressions) && t.matchExpressions.exists(e, e.key == @Z@ && e.operator == 'In' && has(e.values) && size(e.values) > 0 && e.values.all(v, v == variables.zone)))))",
        &[("X", x), ("Z", &lit(LABEL_ZONE))],
    )
}

/// The fields of the templates multi-az fires on.
fn zone_fires(facts: &str) -> String {
    format!(
        "variables.{facts}.filter(x, (x.accel || x.claims) && !({} && variables.grantMultiAz) && (x.big || !{})).map(x, x.f)",
        opted("x.t", ALLOW_MULTI_AZ),
        pinned("x")
    )
}

/// The first device request of a claim object that may hold part of a node, as its
/// field (`[]` when none, or not a claim).
/// A ResourceClaim kube-scheduler writes for a pod's DRA-backed extended resources: the
/// pod was judged (the webhook's `scheduler_claim`).
fn scheduler_claim() -> String {
    use crate::read::annotations::{EXTENDED_RESOURCE_CLAIM, SCHEDULER_USER};
    fill(
        "(object.kind == 'ResourceClaim' && has(request.userInfo.username) && request.userInfo.username == @U@ && has(object.metadata.annotations) && @K@ in object.metadata.annotations && object.metadata.annotations[@K@] == 'true')",
        &[
            ("U", &lit(SCHEDULER_USER)),
            ("K", &lit(EXTENDED_RESOURCE_CLAIM)),
        ],
    )
}

fn claim_fires() -> String {
    let requests = "(object.kind == 'ResourceClaimTemplate' ? (has(object.spec) && has(object.spec.spec) && has(object.spec.spec.devices) && has(object.spec.spec.devices.requests) ? object.spec.spec.devices.requests : []) : (has(object.spec) && has(object.spec.devices) && has(object.spec.devices.requests) ? object.spec.devices.requests : []))";
    let alts = "(has(r.exactly) ? [r.exactly] : (has(r.firstAvailable) && size(r.firstAvailable) > 0 ? r.firstAvailable : [r]))";
    let bad = "(!(has(a.deviceClassName) && a.deviceClassName in variables.classes) || (variables.classes[a.deviceClassName].accel && (variables.classes[a.deviceClassName].shared || (has(a.allocationMode) && a.allocationMode == 'All' ? (has(a.selectors) && size(a.selectors) > 0) : (has(a.count) ? a.count : 1) < variables.classes[a.deviceClassName].need))))";
    fill(
        "(object.apiVersion.startsWith('resource.k8s.io/') && object.kind in ['ResourceClaim', 'ResourceClaimTemplate'] && !(@OPT@ && variables.grantPartialNode) && !@SCHED@ ? @REQ@.filter(r, @ALTS@.exists(a, @BAD@)).map(r, object.kind == 'ResourceClaimTemplate' ? 'spec.spec.devices.requests' : 'spec.devices.requests') : [])",
        &[
            (
                "OPT",
                &format!(
                    "(object.kind == 'ResourceClaimTemplate' ? (has(object.spec) && {}) : {})",
                    opted("object.spec", ALLOW_PARTIAL_NODE),
                    opted("object", ALLOW_PARTIAL_NODE)
                ),
            ),
            ("REQ", requests),
            ("SCHED", &scheduler_claim()),
            ("ALTS", alts),
            ("BAD", bad),
        ],
    )
}

/// Strict mode's variables after the precise exporter's (`sites` and its inputs are
/// read from there), then every variable that reads the object again for `oldObject`.
pub(crate) fn variables(
    policy: &Policy,
    base: Vec<Variable>,
) -> Result<Vec<(String, String)>, ExportError> {
    let v = |name: &str, expression: String| (name.to_string(), expression);
    let mut out: Vec<(String, String)> = base
        .into_iter()
        .map(|b| (b.name.to_string(), b.expression))
        .collect();
    out.extend([
        v("offers", offers_map(policy)),
        v("classes", classes(policy)),
        v("zone", zone(policy)?),
        v(
            "grantPartialNode",
            grant_of(policy, OptIn::AllowPartialNode),
        ),
        v("grantMultiAz", grant_of(policy, OptIn::AllowMultiAz)),
        v("strictTemplates", templates()),
        v(
            "tooLarge",
            crate::vap::bounds::too_large(&["strictTemplates"], None),
        ),
        // The precise bounds, for the precise check a strict export carries
        // (impossible-request), which reads the device templates' env and zone values:
        // past them it reads nothing and leaves the object to the webhook.
        v(
            PRECISE_TOO_LARGE,
            crate::vap::bounds::too_large(&["sites"], Some("devices")),
        ),
        v("strictParts", parts()),
        v("strictFacts", facts(policy)),
        v("strictPartial", partial_fires(policy, "strictFacts")),
        v("strictZone", zone_fires("strictFacts")),
        v("strictClaims", claim_fires()),
    ]);
    // A name may be defined once: the precise grants are the same expressions, and
    // strict mode's `tooLarge` (its own templates, then the precise ones) replaces the
    // precise one.
    if let Some(i) = out.iter().position(|(n, _)| n == "tooLarge") {
        out.remove(i);
    }
    let mut seen = std::collections::BTreeSet::new();
    out.retain(|(name, _)| seen.insert(name.clone()));
    Ok(out)
}

/// The variable holding the precise bounds' finding in a strict export.
pub(crate) const PRECISE_TOO_LARGE: &str = "preciseTooLarge";

/// The fields the rule fires on.
fn fired(check: Check) -> &'static str {
    match check {
        Check::PartialNode => "(variables.strictPartial + variables.strictClaims)",
        _ => "variables.strictZone",
    }
}

/// The validation: the rule fires on no template (`vap::old` adds the UPDATE's leave).
pub(crate) fn validation(check: Check) -> String {
    format!("size({}) == 0", fired(check))
}

/// The message: the rule, the first firing field, what strict mode holds, the fix and
/// the opt-in (the engine's wording).
pub(crate) fn message(check: Check) -> String {
    let (rule, found, fix, opt) = match check {
        Check::PartialNode => (
            "partial-node",
            "strict mode: a pod that requests accelerators, or a device claim, holds all of every instance type it can land on; this one may hold part of a node.",
            format!(
                "' + (size(variables.strictClaims) > 0 ? {} : {}) + '",
                lit(CLAIM_FIX),
                lit(PARTIAL_FIX)
            ),
            ALLOW_PARTIAL_NODE,
        ),
        _ => (
            "multi-az",
            "strict mode: a pod that requests accelerators or claims devices runs in its namespace\\'s one zone; this one is not pinned there; EFA traffic cannot cross zones.",
            format!(
                "' + (variables.zone == '' ? {} : {} + variables.zone + {}) + '",
                lit(&format!(
                    "set nodeSelector {LABEL_ZONE} to one zone; the policy names none for this namespace (defaults.zone)."
                )),
                lit(&format!("set nodeSelector {LABEL_ZONE}: ")),
                lit(" (the mutating webhook writes it when the pod names no zone).")
            ),
            ALLOW_MULTI_AZ,
        ),
    };
    format!(
        "'[{rule}] ' + {}[0] + ': {found} Fix: {fix} Opt in: {opt}: \"true\".'",
        fired(check)
    )
}
