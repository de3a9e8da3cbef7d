//! DRA claims in strict mode. A pod can only use the ResourceClaims of its own
//! namespace, so strict mode judges the claims where they are written: every
//! ResourceClaim and ResourceClaimTemplate of a governed namespace that asks for an
//! accelerator device class asks for every device of the node (`allocationMode: All`
//! without selectors) or for at least as many as the largest catalog type holds. A
//! class the catalog's `deviceClasses` does not know is refused: strict mode cannot
//! tell what it holds. EFA and IMEX-channel classes are no accelerators.

use serde_json::Value;

use crate::facts::whole_node::holds;
use crate::read::json::{items, str_at};
use trainplace_catalog::{Catalog, Counts};

/// The fix strict mode's claim finding gives (also in the exported policy).
pub const CLAIM_FIX: &str = "ask for the class's devices with allocationMode: All and no selectors, or for at least the count of the largest instance type in the catalog, or ask the platform team for the opt-in (on a ResourceClaimTemplate, in spec.metadata.annotations, which its claims carry).";

/// Whether `object` is a DRA claim or claim template (`resource.k8s.io`, any version).
pub(crate) fn is_claim(object: &Value) -> bool {
    let api = str_at(object, &["apiVersion"]).unwrap_or("");
    api.starts_with("resource.k8s.io/")
        && matches!(
            str_at(object, &["kind"]),
            Some("ResourceClaim" | "ResourceClaimTemplate")
        )
}

/// Where a claim's opt-in is read: a claim's own metadata, and a template's
/// `spec.metadata`, which the resourceclaim controller copies onto every claim it
/// makes from it (the template's own metadata stays on the template), so the opt-in
/// that admits a template admits its claims.
/// <https://github.com/kubernetes/kubernetes/blob/v1.34.0/pkg/controller/resourceclaim/controller.go>
pub(crate) fn opt_in_carrier(object: &Value) -> &Value {
    if str_at(object, &["kind"]) == Some("ResourceClaimTemplate") {
        object.get("spec").unwrap_or(object)
    } else {
        object
    }
}

/// The device requests of a claim or claim template, and the field they are at.
pub(crate) fn requests(object: &Value) -> (&[Value], &'static str) {
    if str_at(object, &["kind"]) == Some("ResourceClaimTemplate") {
        (
            items(object, &["spec", "spec", "devices", "requests"]),
            "spec.spec.devices.requests",
        )
    } else {
        (
            items(object, &["spec", "devices", "requests"]),
            "spec.devices.requests",
        )
    }
}

/// The most devices of `resource` any catalog type holds: a count that takes a whole
/// node of every type.
pub(crate) fn whole_node_count(catalog: &Catalog, resource: &str) -> u32 {
    catalog
        .instances()
        .filter_map(|i| holds(catalog, i, resource))
        .max()
        .unwrap_or(u32::MAX)
}

/// Why one request (or one of its alternatives) may hold part of a node.
fn partial(alt: &Value, catalog: &Catalog) -> Option<String> {
    let class = str_at(alt, &["deviceClassName"]).unwrap_or("");
    let Some(known) = catalog.device_class(class) else {
        return Some(format!(
            "device class {class:?} is not in the catalog's deviceClasses, so strict mode cannot tell what it holds"
        ));
    };
    if known.counts != Counts::Accelerator {
        return None;
    }
    if known.shared {
        return Some(format!(
            "device class {class} gives slices of devices, never whole ones"
        ));
    }
    let resource = known.resource.as_deref().unwrap_or("");
    let need = whole_node_count(catalog, resource);
    if str_at(alt, &["allocationMode"]) == Some("All") {
        return (!items(alt, &["selectors"]).is_empty()).then(|| {
            format!(
                "allocationMode All with selectors takes only the devices of {class} they match"
            )
        });
    }
    let count = alt.get("count").and_then(Value::as_u64).unwrap_or(1);
    (count < u64::from(need)).then(|| {
        format!("{count} device(s) of {class}, where the largest catalog type holds {need}")
    })
}

/// The alternatives of one request: `exactly`, else `firstAvailable`, else the request
/// itself (resource.k8s.io/v1beta1 puts the class on the request).
fn alternatives(request: &Value) -> Vec<&Value> {
    if let Some(e) = request.get("exactly") {
        return vec![e];
    }
    let first = items(request, &["firstAvailable"]);
    if first.is_empty() {
        vec![request]
    } else {
        first.iter().collect()
    }
}

/// Each request that may hold part of a node: its field and why.
pub(crate) fn partial_requests(object: &Value, catalog: &Catalog) -> Vec<(String, String)> {
    let (requests, field) = requests(object);
    let mut out = Vec::new();
    if !crate::budget::draw_len("spec.devices.requests", requests.len()) {
        return out;
    }
    for (i, r) in requests.iter().enumerate() {
        if let Some(why) = alternatives(r)
            .into_iter()
            .find_map(|a| partial(a, catalog))
        {
            out.push((format!("{field}[{i}]"), why));
        }
    }
    out
}
