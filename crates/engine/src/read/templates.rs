//! Every pod template an object carries, as strict mode judges them: the sites
//! `workload::locate` finds in the kinds trainplace lays out, and the templates of the core controllers trainplace
//! does not lay out (Deployment, ReplicaSet, StatefulSet, DaemonSet,
//! ReplicationController, CronJob). Nothing here decides anything.

use std::borrow::Cow;

use serde_json::Value;

use crate::read::json::Lookup as _;
use crate::read::json::str_at;
use crate::read::workload::{Kind, Site};

/// One pod template: the `{metadata, spec}` object and the dotted path of its spec.
pub(crate) struct Template<'o> {
    pub value: Cow<'o, Value>,
    pub field: String,
    /// JSON Pointer of the template in the object, when it is one there (a TrainJob's
    /// node pod is assembled, not found).
    pub pointer: Option<String>,
}

/// The core kinds whose pod template trainplace judges but does not lay out, with the
/// pointer of their template.
const CORE_TEMPLATES: [(&str, &str, &str); 6] = [
    ("apps", "Deployment", "/spec/template"),
    ("apps", "ReplicaSet", "/spec/template"),
    ("apps", "StatefulSet", "/spec/template"),
    ("apps", "DaemonSet", "/spec/template"),
    ("", "ReplicationController", "/spec/template"),
    ("batch", "CronJob", "/spec/jobTemplate/spec/template"),
];

/// The pointer of a core controller's pod template, when the object is one of them.
pub(crate) fn core_template_pointer(object: &Value) -> Option<&'static str> {
    let kind = str_at(object, &["kind"])?;
    let api = str_at(object, &["apiVersion"]).unwrap_or("");
    let group = api.rsplit_once('/').map_or("", |(g, _)| g);
    CORE_TEMPLATES
        .iter()
        .find(|(g, k, _)| *g == group && *k == kind)
        .map(|(_, _, p)| *p)
}

/// The pod templates of `object` (of `kind`, with the `sites` `locate` found). A
/// TrainJob has none here: its node pod is assembled from its patches (`judge::strict`).
pub(crate) fn templates<'o>(object: &'o Value, kind: Kind, sites: &[Site]) -> Vec<Template<'o>> {
    if kind == Kind::Other {
        let Some(pointer) = core_template_pointer(object) else {
            return Vec::new();
        };
        return object
            .lookup(pointer)
            .filter(|t| t.is_object())
            .map(|t| Template {
                value: Cow::Borrowed(t),
                field: format!("{}.spec", pointer.trim_start_matches('/').replace('/', ".")),
                pointer: Some(pointer.to_string()),
            })
            .into_iter()
            .collect();
    }
    sites
        .iter()
        .filter_map(|s| {
            let t = object.lookup(&s.pointer)?;
            Some(Template {
                value: Cow::Borrowed(t),
                field: s.field.clone(),
                pointer: Some(s.pointer.clone()),
            })
        })
        .collect()
}

/// Every pod template judged in `object`: those [`templates`] finds, and a TrainJob's
/// node pod as its patches give it (`node_pod`, assembled by the caller).
pub(crate) fn every_template<'o>(
    object: &'o Value,
    kind: Kind,
    sites: &[Site],
    node_pod: Option<Value>,
) -> Vec<Template<'o>> {
    if let (Kind::TrainJob, Some(pod)) = (kind, node_pod) {
        return vec![Template {
            value: Cow::Owned(pod),
            field: "spec.trainer".into(),
            pointer: None,
        }];
    }
    templates(object, kind, sites)
}
