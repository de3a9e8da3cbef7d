//! CEL text helpers: literals, label selectors and opt-in grants written as CEL. Leaf
//! module: no other part of the exporter is imported here.

use crate::policy::{LabelSelectorSpec, OptInGrant};
use crate::vap::error::ExportError;

/// A CEL string literal (single quotes; backslash and quote escaped).
pub(crate) fn lit(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '\n' => out.push_str("\\n"),
            _ => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// A CEL list of string literals.
pub(crate) fn list<S: AsRef<str>>(items: &[S]) -> String {
    let parts: Vec<String> = items.iter().map(|s| lit(s.as_ref())).collect();
    format!("[{}]", parts.join(", "))
}

/// Fill `@NAME@` placeholders of a CEL template (CEL map literals use braces, so
/// `format!` would need every brace doubled).
pub(crate) fn fill(template: &str, pairs: &[(&str, &str)]) -> String {
    let mut out = template.to_string();
    for (k, v) in pairs {
        out = out.replace(&format!("@{k}@"), v);
    }
    out
}

/// A label selector over the label map `labels` (a CEL expression), as CEL.
pub(crate) fn selector(
    spec: &LabelSelectorSpec,
    labels: &str,
    origin: &str,
) -> Result<String, ExportError> {
    let mut terms = Vec::new();
    for (k, v) in &spec.match_labels {
        terms.push(format!(
            "({k} in {labels} && {labels}[{k}] == {v})",
            k = lit(k),
            v = lit(v)
        ));
    }
    for r in &spec.match_expressions {
        let k = lit(&r.key);
        let values = list(&r.values);
        terms.push(match r.operator.as_str() {
            "In" => format!("({k} in {labels} && {labels}[{k}] in {values})"),
            "NotIn" => format!("!({k} in {labels} && {labels}[{k}] in {values})"),
            "Exists" => format!("({k} in {labels})"),
            "DoesNotExist" => format!("!({k} in {labels})"),
            other => {
                return Err(ExportError::Inexpressible {
                    origin: origin.to_string(),
                    message: format!("label selector operator {other:?} on key {:?}", r.key),
                });
            }
        });
    }
    Ok(if terms.is_empty() {
        "true".into()
    } else {
        terms.join(" && ")
    })
}

/// Whether the requester may use an opt-in (the webhook's `may_opt_in`): the namespace
/// is listed (or `*`) and one of the user's groups is listed (or `*`). No grant = false.
pub(crate) fn grant(grant: Option<&OptInGrant>) -> String {
    let Some(g) = grant else {
        return "false".into();
    };
    let ns = if g.namespaces.iter().any(|n| n == "*") {
        "true".to_string()
    } else if g.namespaces.is_empty() {
        "false".to_string()
    } else {
        format!("request.namespace in {}", list(&g.namespaces))
    };
    let groups = if g.groups.iter().any(|n| n == "*") {
        "true".to_string()
    } else if g.groups.is_empty() {
        "false".to_string()
    } else {
        format!(
            "(has(request.userInfo.groups) && request.userInfo.groups.exists(g, g in {}))",
            list(&g.groups)
        )
    };
    format!("({ns}) && ({groups})")
}

#[cfg(test)]
mod tests {
    use super::{fill, lit};

    #[test]
    fn literals_escape_quotes_and_backslashes() {
        assert_eq!(lit("a'b\\c"), "'a\\'b\\\\c'");
        assert_eq!(fill("@A@ + @A@", &[("A", "x")]), "x + x");
    }
}
