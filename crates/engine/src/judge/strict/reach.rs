//! The instance types a pod template's node selection can reach, read from the
//! instance-type labels only (`nodeSelector` and the required node-affinity terms);
//! every other selector can only narrow the set further, so leaving it out keeps the
//! set a superset. A type named that the catalog does not know is reported: strict mode
//! cannot tell how many accelerators it has. Only a type named (`nodeSelector`, `In`)
//! narrows the set: an exclusion (`NotIn`) leaves every type the catalog does not list
//! reachable, so it narrows nothing.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::read::annotations::{LABEL_INSTANCE_TYPE, LABEL_INSTANCE_TYPE_BETA, hyperpod_type};
use crate::read::json::items;
use trainplace_catalog::Catalog;

const KEYS: [&str; 2] = [LABEL_INSTANCE_TYPE, LABEL_INSTANCE_TYPE_BETA];

/// The reachable catalog types, and the named types the catalog does not know.
pub(crate) struct Reach {
    pub types: BTreeSet<String>,
    pub unknown: BTreeSet<String>,
}

/// The required node-selector terms of a pod spec.
pub(crate) fn terms(spec: &Value) -> &[Value] {
    items(
        spec,
        &[
            "affinity",
            "nodeAffinity",
            "requiredDuringSchedulingIgnoredDuringExecution",
            "nodeSelectorTerms",
        ],
    )
}

/// Whether a label value names catalog type `name`: as written, or as SageMaker HyperPod
/// labels its nodes (`ml.p5.48xlarge`).
fn names(value: &str, name: &str) -> bool {
    value == name || hyperpod_type(value) == Some(name)
}

/// Whether a label value names a catalog type.
fn known(catalog: &Catalog, value: &str) -> bool {
    catalog.get(value).is_some() || hyperpod_type(value).is_some_and(|v| catalog.get(v).is_some())
}

/// Whether catalog type `name` satisfies one term's instance-type expressions. Only
/// `In` narrows: `NotIn` (like `Exists`) also reaches every type the catalog does not
/// list, whose count is unknown, so it is read as reaching every type; `DoesNotExist`
/// reaches no node (every node has its type label).
fn term_allows(term: &Value, name: &str) -> bool {
    let exprs = items(term, &["matchExpressions"]);
    crate::budget::draw_len("nodeSelectorTerms.matchExpressions", exprs.len());
    exprs.iter().all(|e| {
        let key = e.get("key").and_then(Value::as_str).unwrap_or("");
        if !KEYS.contains(&key) {
            return true;
        }
        match e.get("operator").and_then(Value::as_str).unwrap_or("") {
            "In" => items(e, &["values"])
                .iter()
                .any(|v| v.as_str().is_some_and(|v| names(v, name))),
            "DoesNotExist" => false,
            _ => true,
        }
    })
}

/// The types `spec` can reach among the catalog's.
pub(crate) fn reach(spec: &Value, catalog: &Catalog) -> Reach {
    let selector = spec.get("nodeSelector");
    let terms = terms(spec);
    let mut unknown = BTreeSet::new();
    for key in KEYS {
        if let Some(v) = selector.and_then(|s| s.get(key)).and_then(Value::as_str)
            && !known(catalog, v)
        {
            unknown.insert(v.to_string());
        }
    }
    for t in terms {
        let exprs = items(t, &["matchExpressions"]);
        if !crate::budget::draw_len("nodeSelectorTerms.matchExpressions", exprs.len()) {
            break;
        }
        for e in exprs {
            let key = e.get("key").and_then(Value::as_str).unwrap_or("");
            if KEYS.contains(&key) && e.get("operator").and_then(Value::as_str) == Some("In") {
                let values = items(e, &["values"]);
                crate::budget::draw_len("matchExpressions.values", values.len());
                for v in values.iter().filter_map(Value::as_str) {
                    if !known(catalog, v) {
                        unknown.insert(v.to_string());
                    }
                }
            }
        }
    }
    let types = catalog
        .instances()
        .map(|i| i.name.as_str())
        .filter(|name| {
            KEYS.iter().all(|key| {
                selector
                    .and_then(|s| s.get(*key))
                    .and_then(Value::as_str)
                    .is_none_or(|v| names(v, name))
            }) && (terms.is_empty() || terms.iter().any(|t| term_allows(t, name)))
        })
        .map(String::from)
        .collect();
    Reach { types, unknown }
}
