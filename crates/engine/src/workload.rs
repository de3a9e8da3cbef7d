//! Where pod templates live in the objects trainplace understands. A bare Pod is one
//! site at the object root; workloads (issue: training workloads) add more sites.

use serde_json::Value;

use crate::classify::SiteHints;
use crate::error::ObjectError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    Pod,
    /// Something trainplace does not handle; passed through untouched.
    Other(String),
}

impl Kind {
    /// Bounded label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Kind::Pod => "Pod",
            Kind::Other(_) => "other",
        }
    }
}

/// One pod template inside an object.
#[derive(Debug, Clone)]
pub struct Site {
    /// JSON Pointer to the `{metadata, spec}` object ("" for a Pod).
    pub pointer: String,
    /// Dotted path of the pod spec, for messages (`spec`, `spec.template.spec`).
    pub field: String,
    pub hints: SiteHints,
}

pub fn locate(obj: &Value) -> Result<(Kind, Vec<Site>), ObjectError> {
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
    let api = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    if kind.is_empty() {
        return Err(ObjectError::bad(
            "kind",
            "missing; every object needs apiVersion and kind",
        ));
    }
    match (api, kind) {
        ("v1", "Pod") => Ok((
            Kind::Pod,
            vec![Site {
                pointer: String::new(),
                field: "spec".into(),
                hints: SiteHints::default(),
            }],
        )),
        _ => Ok((Kind::Other(format!("{api}/{kind}")), Vec::new())),
    }
}
