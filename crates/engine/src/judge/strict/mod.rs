//! Strict mode (`guarantee: strict`): deny rules that rest on nothing a tenant can
//! word differently. Every pod, every pod template of every kind and every DRA claim
//! is judged on its own content, whoever creates it; no launcher, env, label, job
//! size or admission mark is read.
//!
//! - partial-node: a template that requests accelerators (any extended resource the
//!   policy does not list as no accelerator) holds, of each, at least what every
//!   catalog instance type its node selection reaches has (`held`, `reach`).
//! - multi-az: a template that requests accelerators or claims devices is pinned to
//!   the namespace's zone (`zone`); the mutating webhook writes the pin.
//! - DRA claims and claim templates ask for whole nodes of accelerator classes
//!   (`claims`).
//!
//! The exported policies (`vap::strict`) express the same rules over the same bounds.

pub(crate) mod claims;
pub(crate) mod held;
pub(crate) mod reach;
pub(crate) mod zone;

use std::collections::BTreeMap;

use serde_json::Value;

use crate::error::ObjectError;
use crate::facts::policy::{Mode, OptIn};
use crate::facts::whole_node::{holds, uncounted};
use crate::judge::bounds;
use crate::judge::finding::{Finding, Rule};
use crate::judge::judgement::Ctx;
use crate::judge::rules::{OptInState, opted_in, path_cost};
use crate::read::annotations::{ALLOW_MULTI_AZ, ALLOW_PARTIAL_NODE, LABEL_ZONE, RES_EFA};
use crate::read::json::Lookup as _;
use crate::read::json::{annotation, items};
use crate::read::templates::{Template, every_template, templates};
use crate::read::workload::{Kind, Site};
use zone::Pinned;

/// The fix strict mode's partial-node finding gives (also in the exported policy).
pub const PARTIAL_FIX: &str = "request every accelerator of the node in one pod, one pod per node (nodeSelector node.kubernetes.io/instance-type names the type; `trainplace policy instances` lists each type's count), or ask the platform team for the opt-in.";

/// The fix strict mode's multi-az finding gives, for the zone `zone` (`None`: the
/// policy names no zone for the namespace).
pub fn zone_fix(zone: Option<&str>) -> String {
    match zone {
        Some(z) => format!(
            "set nodeSelector {LABEL_ZONE}: {z} (the mutating webhook writes it when the pod names no zone)."
        ),
        None => format!(
            "set nodeSelector {LABEL_ZONE} to one zone; the policy names none for this namespace (defaults.zone)."
        ),
    }
}

/// Whether a template's lists are past the bounds strict mode judges within. Its
/// containers and resource names are held to theirs before any rule runs
/// (`judge::bounds`, the too-large rule); what strict mode reads beyond them is the
/// node-selector terms.
fn too_large(spec: &Value) -> Option<String> {
    bounds::node_terms_past(spec)
}

/// What one template asks for: its accelerators and whether it claims devices.
pub(crate) struct Asks {
    pub held: BTreeMap<String, u64>,
    pub claims: bool,
}

impl Asks {
    pub fn read(template: &Value, field: &str, ctx: &Ctx<'_, '_>) -> Result<Asks, ObjectError> {
        let spec = template.get("spec").unwrap_or(&Value::Null);
        Ok(Asks {
            held: held::held(spec, field, ctx.eff.policy)?,
            claims: !items(spec, &["resourceClaims"]).is_empty(),
        })
    }

    pub fn any(&self) -> bool {
        !self.held.is_empty() || self.claims
    }
}

fn opt_in(template: &Value, which: OptIn, ctx: &Ctx<'_, '_>) -> OptInState {
    let set = annotation(template, which.annotation()) == Some("true");
    if !set {
        return OptInState::Absent;
    }
    if ctx.eff.policy.may_opt_in(which, ctx.who) {
        OptInState::Granted
    } else {
        OptInState::Refused
    }
}

/// Why the template may hold part of a node, one reason per line.
fn partial_reasons(spec: &Value, asks: &Asks, ctx: &Ctx<'_, '_>) -> Vec<String> {
    let catalog = &ctx.eff.policy.catalog;
    let mut reach = reach::reach(spec, catalog);
    // A pod bound to a node (`spec.nodeName`) runs on that node's type only, when the
    // inventory knows it: the binding is made at creation and dies with the node (the
    // pod garbage collector removes pods bound to a deleted node). A pod pinned by a
    // hostname or a node-name affinity is not bound: pending, it may land on a later
    // node of the same name and another type, so it keeps every type.
    if let Some(t) = spec
        .get("nodeName")
        .and_then(Value::as_str)
        .and_then(|n| ctx.who.inventory?.node_type(n))
        .filter(|t| reach.types.contains(*t))
    {
        reach.types = std::collections::BTreeSet::from([t.to_string()]);
    }
    let mut out = Vec::new();
    if !reach.unknown.is_empty() {
        let names: Vec<&str> = reach.unknown.iter().map(String::as_str).collect();
        out.push(format!(
            "it selects instance type(s) {} that the catalog does not list, so the accelerators of their nodes are unknown",
            names.join(", ")
        ));
    }
    let efa = items(spec, &["containers"])
        .iter()
        .filter_map(|c| c.lookup(&format!("/resources/limits/{}", RES_EFA.replace('/', "~1"))))
        .filter_map(|q| crate::read::quantity::parse_count(q).ok())
        .sum::<u32>();
    for (resource, &h) in &asks.held {
        let uncounted: Vec<&str> = reach
            .types
            .iter()
            .filter_map(|t| catalog.get(t))
            .filter(|inst| uncounted(catalog, inst, resource))
            .map(|inst| inst.name.as_str())
            .collect();
        if !uncounted.is_empty() {
            out.push(format!(
                "it holds {h} {resource}, and its node selection reaches {}, where the catalog gives no count of {resource}, so a whole node cannot be shown",
                uncounted.join(", ")
            ));
            continue;
        }
        let offering: Vec<(&str, u32)> = reach
            .types
            .iter()
            .filter_map(|t| {
                let inst = catalog.get(t)?;
                Some((inst.name.as_str(), holds(catalog, inst, resource)?))
            })
            .collect();
        let shared: Vec<&str> = offering
            .iter()
            .filter(|(t, c)| {
                ctx.who
                    .inventory
                    .is_some_and(|inv| inv.oversubscribed(t, resource, *c, false))
            })
            .map(|(t, _)| *t)
            .collect();
        if !shared.is_empty() {
            out.push(format!(
                "its node selection reaches {}, whose nodes advertise more {resource} than they have devices (time-sliced or shared replicas), so no pod holds a whole node there",
                shared.join(", ")
            ));
            continue;
        }
        if offering.is_empty() {
            out.push(format!(
                "it holds {h} {resource}, which no instance type its node selection reaches offers as whole devices (a slice, or a name the catalog does not know)"
            ));
            continue;
        }
        let short: Vec<(&str, u32)> = offering
            .into_iter()
            .filter(|(_, c)| u64::from(*c) > h)
            .collect();
        if let Some((first, c)) = short.first() {
            let more = match short.len() {
                1 => String::new(),
                n => format!(" and {} other type(s) it may land on", n - 1),
            };
            let cost = catalog
                .get(first)
                .map(|inst| format!("; {}", path_cost(inst, efa)))
                .unwrap_or_default();
            out.push(format!(
                "it holds {h} {resource} but its node selection reaches {first}, which has {c}{more}{cost}"
            ));
        }
    }
    out
}

/// Claims past this many in one pod are not read one by one: such a pod is refused as
/// if it named a claim (the exported policies walk no longer list).
pub const MAX_POD_CLAIMS: usize = 32;

/// Why a template's claims do not show a whole node of its own: it names a
/// ResourceClaim directly (`resourceClaimName`). Such a claim is shared by every pod
/// that names it (up to 256, all on the node that holds its devices), so a claim
/// judged whole when it was created proves nothing about what each pod holds; a claim
/// made from a template (`resourceClaimTemplateName`) is the pod's own.
/// <https://kubernetes.io/docs/concepts/scheduling-eviction/dynamic-resource-allocation/>
fn named_claims(spec: &Value) -> Option<String> {
    let claims = items(spec, &["resourceClaims"]);
    if claims.len() > MAX_POD_CLAIMS {
        return Some(format!(
            "it lists {} resource claims, more than the {MAX_POD_CLAIMS} strict mode reads",
            claims.len()
        ));
    }
    let name = claims
        .iter()
        .find_map(|c| c.get("resourceClaimName").and_then(Value::as_str))?;
    Some(format!(
        "it names ResourceClaim {name} directly, which every pod that names it shares (up to 256 pods on one node), so no pod can be shown to hold a whole node: give each pod its own claim with resourceClaimTemplateName"
    ))
}

/// The findings on one template.
fn judge_template(
    t: &Template<'_>,
    ctx: &Ctx<'_, '_>,
    out: &mut Vec<Finding>,
) -> Result<(), ObjectError> {
    let template = t.value.as_ref();
    let asks = Asks::read(template, &t.field, ctx)?;
    if !asks.any() {
        return Ok(());
    }
    let spec = template.get("spec").unwrap_or(&Value::Null);
    let large = too_large(spec);
    let named = named_claims(spec);
    if !asks.held.is_empty() || named.is_some() {
        let state = opt_in(template, OptIn::AllowPartialNode, ctx);
        let reasons = match &large {
            Some(why) => vec![format!("it is too large to judge: {why}")],
            None if asks.held.is_empty() => named.into_iter().collect(),
            None => partial_reasons(spec, &asks, ctx)
                .into_iter()
                .chain(named)
                .collect(),
        };
        if !reasons.is_empty() {
            out.extend(finding(
                Rule::PartialNode,
                t.field.clone(),
                format!(
                    "strict mode: a pod that requests accelerators holds all of every instance type it can land on; {}.",
                    reasons.join("; ")
                ),
                PARTIAL_FIX.into(),
                (ALLOW_PARTIAL_NODE, state),
                ctx,
            ));
        }
    }
    let zone = ctx.eff.defaults.zone.as_deref();
    let state = opt_in(template, OptIn::AllowMultiAz, ctx);
    let why = match (&large, zone::pinned(spec, zone)) {
        (Some(why), _) => Some(format!("it is too large to judge: {why}")),
        (None, Pinned::No) => Some(match zone {
            Some(z) => format!(
                "it is not pinned to {z}, the zone of namespace {}",
                ctx.who.namespace
            ),
            None => "it is not pinned to one zone".to_string(),
        }),
        (None, _) => node_elsewhere(spec, zone, ctx),
    };
    if let Some(why) = why {
        out.extend(finding(
            Rule::MultiAz,
            t.field.clone(),
            format!(
                "strict mode: a pod that requests accelerators or claims devices runs in its namespace's one zone; {why}; EFA traffic cannot cross zones."
            ),
            zone_fix(zone),
            (ALLOW_MULTI_AZ, state),
            ctx,
        ));
    }
    Ok(())
}

/// A pod bound by `spec.nodeName` to a node the inventory places in another zone (the
/// kubelet would refuse it; the webhook says why first).
fn node_elsewhere(spec: &Value, zone: Option<&str>, ctx: &Ctx<'_, '_>) -> Option<String> {
    let node = spec.get("nodeName").and_then(Value::as_str)?;
    let at = ctx.who.inventory?.node_zone(node)?;
    let want = zone?;
    (at != want).then(|| format!("spec.nodeName {node} is a node in {at}, not {want}"))
}

/// A strict finding of `rule` at `site`, with what a granted or refused opt-in makes of
/// it (`opt` is the opt-in annotation).
fn finding(
    rule: Rule,
    site: String,
    found: String,
    fix: String,
    opt: (&'static str, OptInState),
    ctx: &Ctx<'_, '_>,
) -> Option<Finding> {
    let (key, state) = opt;
    let mode = match rule {
        Rule::MultiAz => ctx.eff.mode_multi_az(),
        _ => ctx.eff.mode_partial_node(),
    };
    opted_in(
        Finding {
            rule,
            mode,
            site,
            found,
            fix,
            opt_in: Some(key),
            why: None,
        },
        state,
        ctx.eff.policy,
    )
}

/// Strict mode's findings on every template of `object`.
pub(crate) fn judge(
    object: &Value,
    kind: Kind,
    sites: &[Site],
    node_pod: Option<Value>,
    ctx: &Ctx<'_, '_>,
) -> Result<Vec<Finding>, ObjectError> {
    let mut out = Vec::new();
    if claims::is_claim(object) {
        let requests = claims::partial_requests(object, &ctx.eff.policy.catalog);
        if let Some((field, why)) = requests.first() {
            let state = opt_in(claims::opt_in_carrier(object), OptIn::AllowPartialNode, ctx);
            out.extend(finding(
                Rule::PartialNode,
                field.clone(),
                format!(
                    "strict mode: a device claim of an accelerator class takes every device of the node; {why}."
                ),
                claims::CLAIM_FIX.into(),
                (ALLOW_PARTIAL_NODE, state),
                ctx,
            ));
        }
        return Ok(out);
    }
    for t in every_template(object, kind, sites, node_pod) {
        judge_template(&t, ctx, &mut out)?;
    }
    Ok(out)
}

/// The templates of `object` the mutating webhook pins to the namespace's zone: they
/// request accelerators or claim devices, name no zone in `nodeSelector`, and carry
/// no granted `allow-multi-az`. Returns their pointers and fields.
pub(crate) fn to_pin(
    object: &Value,
    kind: Kind,
    sites: &[Site],
    ctx: &Ctx<'_, '_>,
) -> Result<Vec<(String, String)>, ObjectError> {
    // No zone, or the namespace's multi-az rule is off: nothing to pin.
    if ctx.eff.defaults.zone.is_none() || ctx.eff.mode_multi_az() == Mode::Off {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for t in templates(object, kind, sites) {
        let Some(pointer) = &t.pointer else { continue };
        let template = t.value.as_ref();
        let named = template
            .lookup(&format!(
                "/spec/nodeSelector/{}",
                LABEL_ZONE.replace('/', "~1")
            ))
            .is_some();
        // Zones the template chose through node affinity are its own: a pin beside
        // another zone's term would leave it pending forever, where strict mode
        // refuses it, saying why.
        let chosen = template.get("spec").is_some_and(|spec| {
            reach::terms(spec).iter().any(|t| {
                items(t, &["matchExpressions"])
                    .iter()
                    .any(|e| e.get("key").and_then(Value::as_str) == Some(LABEL_ZONE))
            })
        });
        if named
            || chosen
            || !Asks::read(template, &t.field, ctx)?.any()
            || opt_in(template, OptIn::AllowMultiAz, ctx) == OptInState::Granted
        {
            continue;
        }
        out.push((pointer.clone(), t.field.clone()));
    }
    Ok(out)
}
