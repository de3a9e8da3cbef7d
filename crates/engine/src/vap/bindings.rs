//! Policy modes as bindings: one ValidatingAdmissionPolicyBinding per region of
//! namespaces where a rule has one mode (`enforce` -> Deny, `warn` -> Warn, `audit` ->
//! Audit, `off` -> no binding). A namespace override is a region selected by
//! `matchResources.namespaceSelector`, minus the later overrides that set the same rule
//! (a later override wins, as in the webhook).

use serde_json::{Value, json};

use crate::facts::policy::{LabelSelectorSpec, Mode, NamespaceMatch, Policy, RuleModes};
use crate::vap::checks::Check;
use crate::vap::error::ExportError;

/// The label every namespace carries with its own name.
const NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// One binding: its name suffix, mode and namespace selector (`None` = every namespace).
#[derive(Debug)]
pub(crate) struct Region {
    pub suffix: String,
    pub mode: Mode,
    pub selector: Option<Value>,
    /// An override that names namespaces: a namespaceSelector never skips a
    /// cluster-scoped object (a ClusterTrainingRuntime, judged without a namespace, so
    /// under the base mode), so its binding also names the namespaced resources.
    pub namespaced_only: bool,
}

impl Region {
    /// Whether `self` and `other` select the same objects with the same mode (their
    /// names aside): rules whose regions all agree can share one policy.
    pub fn same_as(&self, other: &Region) -> bool {
        (self.mode, &self.selector, self.namespaced_only)
            == (other.mode, &other.selector, other.namespaced_only)
    }
}

pub(crate) fn actions(mode: Mode) -> Vec<&'static str> {
    match mode {
        Mode::Enforce => vec!["Deny"],
        Mode::Warn => vec!["Warn"],
        Mode::Audit => vec!["Audit"],
        Mode::Off => Vec::new(),
    }
}

fn mode_in(modes: &RuleModes, check: Check) -> Option<Mode> {
    match check {
        Check::PartialNode => modes.partial_node,
        Check::MultiAz => modes.multi_az,
        Check::ImpossibleRequest | Check::TooLarge => None,
    }
}

fn requirement(key: &str, op: &str, values: &[String]) -> Value {
    if values.is_empty() {
        json!({"key": key, "operator": op})
    } else {
        json!({"key": key, "operator": op, "values": values})
    }
}

/// A selector's requirements, matchLabels as `In`.
fn requirements(sel: &LabelSelectorSpec) -> Vec<Value> {
    let mut out: Vec<Value> = sel
        .match_labels
        .iter()
        .map(|(k, v)| requirement(k, "In", std::slice::from_ref(v)))
        .collect();
    out.extend(
        sel.match_expressions
            .iter()
            .map(|r| requirement(&r.key, &r.operator, &r.values)),
    );
    out
}

/// Requirements (ANDed) that select the namespaces `m` matches; `[]` = every
/// namespace, `None` = no namespace.
fn selecting(m: &NamespaceMatch, origin: &str) -> Result<Option<Vec<Value>>, ExportError> {
    if m.names.iter().any(|n| n == "*") {
        return Ok(Some(Vec::new()));
    }
    match (&m.selector, m.names.is_empty()) {
        (None, false) => Ok(Some(vec![requirement(NAME_LABEL, "In", &m.names)])),
        (Some(sel), true) => Ok(Some(requirements(sel))),
        (None, true) => Ok(None),
        (Some(_), false) => Err(ExportError::Inexpressible {
            origin: origin.into(),
            message:
                "a match by names or by a selector is an OR, which one namespaceSelector cannot say"
                    .into(),
        }),
    }
}

/// Requirements that select the namespaces `m` does not match; `None` = no namespace.
fn excluding(m: &NamespaceMatch, origin: &str) -> Result<Option<Vec<Value>>, ExportError> {
    let negate = |op: &str| match op {
        "In" => Ok("NotIn"),
        "NotIn" => Ok("In"),
        "Exists" => Ok("DoesNotExist"),
        "DoesNotExist" => Ok("Exists"),
        other => Err(ExportError::Inexpressible {
            origin: origin.into(),
            message: format!("selector operator {other:?}"),
        }),
    };
    let Some(reqs) = selecting(m, origin)? else {
        return Ok(Some(Vec::new()));
    };
    match reqs.as_slice() {
        [] => Ok(None),
        [one] => {
            let op = negate(one["operator"].as_str().unwrap_or(""))?;
            let mut r = one.clone();
            r["operator"] = json!(op);
            Ok(Some(vec![r]))
        }
        _ => Err(ExportError::Inexpressible {
            origin: origin.into(),
            message: "the namespaces outside a selector of several requirements are an OR, which one namespaceSelector cannot say".into(),
        }),
    }
}

/// The bindings of one rule, base region first.
pub(crate) fn regions(policy: &Policy, check: Check) -> Result<Vec<Region>, ExportError> {
    let base = mode_in(&policy.file().rules, check).unwrap_or(Mode::Enforce);
    let overrides: Vec<(usize, Mode, &NamespaceMatch)> = policy
        .namespace_overrides()
        .iter()
        .enumerate()
        .filter_map(|(i, o)| Some((i, mode_in(&o.rules, check)?, &o.matches)))
        .collect();
    let mut out = Vec::new();
    let mut candidates = vec![(String::new(), base, Vec::new(), 0usize)];
    for (i, mode, m) in &overrides {
        if let Some(reqs) = selecting(m, &format!("namespaces[{i}]"))? {
            candidates.push((format!("-ns{i}"), *mode, reqs, i + 1));
        }
    }
    'region: for (suffix, mode, mut reqs, from) in candidates {
        let namespaced_only = from > 0 && !reqs.is_empty();
        // Minus every later override of this rule.
        for (j, _, m) in overrides.iter().filter(|(j, _, _)| *j + 1 > from) {
            match excluding(m, &format!("namespaces[{j}]"))? {
                Some(r) => reqs.extend(r),
                None => continue 'region,
            }
        }
        if mode == Mode::Off {
            continue;
        }
        let selector = (!reqs.is_empty()).then(|| json!({"matchExpressions": reqs}));
        out.push(Region {
            suffix,
            mode,
            selector,
            namespaced_only,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::regions;
    use crate::facts::policy::{Mode, Policy};
    use crate::vap::checks::Check;
    use trainplace_catalog::Catalog;

    fn policy(namespaces: &str) -> Policy {
        let text =
            format!("apiVersion: trainplace.io/v1alpha1\nkind: Policy\nnamespaces:\n{namespaces}");
        Policy::from_parts(&text, "test", Catalog::embedded()).unwrap()
    }

    #[test]
    fn off_has_no_binding_and_a_later_star_override_replaces_the_base() {
        let p = policy(
            "  - match: { names: [a] }\n    rules: { multiAz: off }\n  - match: { names: ['*'] }\n    rules: { partialNode: warn }\n",
        );
        let partial = regions(&p, Check::PartialNode).unwrap();
        assert_eq!(partial.len(), 1);
        assert_eq!(
            (partial[0].suffix.as_str(), partial[0].mode),
            ("-ns1", Mode::Warn)
        );
        assert!(partial[0].selector.is_none());
        assert!(
            !partial[0].namespaced_only,
            "`*` covers cluster-scoped objects too"
        );
        let zones = regions(&p, Check::MultiAz).unwrap();
        assert_eq!(zones.len(), 1, "the `off` namespace gets no binding");
        assert_eq!(zones[0].mode, Mode::Enforce);
        assert_eq!(
            zones[0].selector.as_ref().unwrap()["matchExpressions"][0]["operator"],
            "NotIn"
        );
    }

    #[test]
    fn an_override_by_namespace_leaves_cluster_scoped_objects_to_the_base_binding() {
        let p = policy("  - match: { names: [research] }\n    rules: { partialNode: warn }\n");
        let partial = regions(&p, Check::PartialNode).unwrap();
        let modes: Vec<(Mode, bool)> = partial
            .iter()
            .map(|r| (r.mode, r.namespaced_only))
            .collect();
        assert_eq!(modes, [(Mode::Enforce, false), (Mode::Warn, true)]);
    }

    #[test]
    fn a_later_selector_of_several_requirements_cannot_be_subtracted() {
        let p = policy(
            "  - match: { selector: { matchLabels: { a: x, b: y } } }\n    rules: { multiAz: warn }\n",
        );
        let err = regions(&p, Check::MultiAz).err().unwrap().to_string();
        assert!(err.contains("namespaces[0]"), "{err}");
        assert!(regions(&p, Check::PartialNode).is_ok());
    }
}
