//! CEL text helpers: literals, label selectors and opt-in grants written as CEL. Leaf
//! module: no other part of the exporter is imported here.

use crate::facts::policy::{LabelSelectorSpec, OptInGrant};
use crate::vap::error::ExportError;

/// The request's namespace: a cluster-scoped object's request has none (the API server
/// leaves the field out), which CEL reads as `''` here rather than an error.
pub(crate) const NAMESPACE: &str = "(has(request.namespace) ? request.namespace : '')";

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

/// `expr` read from another root: the identifier `object` becomes `root`, and
/// `variables.NAME` becomes `variables.NEW` for each `(NAME, NEW)` of `renames`.
/// String literals are copied untouched.
pub(crate) fn rebase(expr: &str, root: &str, renames: &[(String, String)]) -> String {
    let chars: Vec<char> = expr.chars().collect();
    let mut out = String::with_capacity(expr.len() + 64);
    let mut i = 0;
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    while i < chars.len() {
        let c = chars[i];
        if c == '\'' || c == '"' {
            // Copy the literal through its closing quote, escapes included.
            out.push(c);
            i += 1;
            while i < chars.len() && chars[i] != c {
                if chars[i] == '\\' && i + 1 < chars.len() {
                    out.push(chars[i]);
                    i += 1;
                }
                out.push(chars[i]);
                i += 1;
            }
            if i < chars.len() {
                out.push(chars[i]);
                i += 1;
            }
            continue;
        }
        if word(c) && (i == 0 || !word(chars[i - 1])) {
            let start = i;
            while i < chars.len() && word(chars[i]) {
                i += 1;
            }
            let token: String = chars[start..i].iter().collect();
            let after_dot = start > 0 && chars[start - 1] == '.';
            let after_variables = out.ends_with("variables.");
            if token == "object" && !after_dot {
                out.push_str(root);
            } else if let Some((_, new)) = renames
                .iter()
                .find(|(old, _)| after_variables && *old == token)
            {
                out.push_str(new);
            } else {
                out.push_str(&token);
            }
            continue;
        }
        out.push(c);
        i += 1;
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
        format!("{NAMESPACE} in {}", list(&g.namespaces))
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

/// `expr` with every map literal's values, and the elements of every list literal that
/// mixes kinds, wrapped in `dyn(...)`. The API server compiles CEL with
/// `HomogeneousAggregateLiterals` (k8s.io/apiserver pkg/cel/environment/base.go:
/// https://github.com/kubernetes/kubernetes/blob/v1.34.4/staging/src/k8s.io/apiserver/pkg/cel/environment/base.go),
/// which refuses a literal whose entries are not all of one type, such as `{'gpus': 8,
/// 'resource': 'nvidia.com/gpu'}` or `['key', object.metadata.name]` (string and dyn).
/// `dyn` changes no value at run time. String literals are copied untouched (regexes
/// hold braces and brackets).
pub(crate) fn dyn_map_values(expr: &str) -> String {
    let chars: Vec<char> = expr.chars().collect();
    let mut out = String::with_capacity(expr.len() + expr.len() / 4);
    let mut i = 0;
    while i < chars.len() {
        copy(&chars, &mut i, &mut out, &[]);
        if i < chars.len() {
            // An unbalanced closing bracket: copied as written (CEL will say where).
            out.push(chars[i]);
            i += 1;
        }
    }
    out
}

/// Copies from `i` up to a character of `stops` at this nesting depth (not consumed),
/// rewriting nested maps; `None` at the end of the text.
fn copy(chars: &[char], i: &mut usize, out: &mut String, stops: &[char]) -> Option<char> {
    while *i < chars.len() {
        let c = chars[*i];
        if stops.contains(&c) {
            return Some(c);
        }
        match c {
            '\'' | '"' => string(chars, i, out),
            '[' if !follows_operand(out) => list_literal(chars, i, out),
            '(' | '[' => {
                out.push(c);
                *i += 1;
                let close = if c == '(' { ')' } else { ']' };
                if copy(chars, i, out, &[close]).is_some() {
                    out.push(close);
                    *i += 1;
                }
            }
            '{' => map(chars, i, out),
            ')' | ']' | '}' => return Some(c),
            _ => {
                out.push(c);
                *i += 1;
            }
        }
    }
    None
}

/// Whether a `[` here indexes what precedes it (`a[0]`, `f(x)[0]`) rather than opening
/// a list literal.
fn follows_operand(out: &str) -> bool {
    out.trim_end()
        .chars()
        .next_back()
        .is_some_and(|c| c.is_alphanumeric() || matches!(c, '_' | ')' | ']' | '}'))
}

/// A list literal from its `[`: elements as written when they are all string literals or
/// all integer literals (one type), else each as `dyn(element)`.
fn list_literal(chars: &[char], i: &mut usize, out: &mut String) {
    *i += 1;
    let mut elements = Vec::new();
    let closed = loop {
        let mut element = String::new();
        let stop = copy(chars, i, &mut element, &[',', ']']);
        elements.push(element);
        match stop {
            Some(',') => *i += 1,
            Some(']') => {
                *i += 1;
                break true;
            }
            _ => break false,
        }
    };
    let string = |e: &str| {
        let e = e.trim();
        e.len() >= 2
            && (e.starts_with('\'') || e.starts_with('"'))
            && !e[1..e.len() - 1].contains(['\'', '"'])
    };
    let integer = |e: &str| {
        let e = e.trim();
        !e.is_empty()
            && e.trim_start_matches('-')
                .chars()
                .all(|c| c.is_ascii_digit())
    };
    let one_type = elements.len() < 2
        || elements.iter().all(|e| string(e))
        || elements.iter().all(|e| integer(e));
    out.push('[');
    for (n, element) in elements.iter().enumerate() {
        if n > 0 {
            out.push(',');
        }
        if one_type || element.trim().is_empty() {
            out.push_str(element);
        } else {
            wrap(element, out);
        }
    }
    if closed {
        out.push(']');
    }
}

/// `text` as `dyn(text)`, its surrounding whitespace kept outside.
fn wrap(text: &str, out: &mut String) {
    let body = text.trim_start();
    out.push_str(&text[..text.len() - body.len()]);
    out.push_str("dyn(");
    out.push_str(body.trim_end());
    out.push(')');
    out.push_str(&body[body.trim_end().len()..]);
}

/// A quoted string literal, escapes included, copied as is.
fn string(chars: &[char], i: &mut usize, out: &mut String) {
    let quote = chars[*i];
    out.push(quote);
    *i += 1;
    while *i < chars.len() {
        let c = chars[*i];
        out.push(c);
        *i += 1;
        if c == '\\' && *i < chars.len() {
            out.push(chars[*i]);
            *i += 1;
        } else if c == quote {
            return;
        }
    }
}

/// A map literal from its `{`: keys as written, each value as `dyn(value)`.
fn map(chars: &[char], i: &mut usize, out: &mut String) {
    out.push('{');
    *i += 1;
    loop {
        match copy(chars, i, out, &[':', '}']) {
            Some(':') => {
                out.push(':');
                *i += 1;
            }
            Some('}') => {
                out.push('}');
                *i += 1;
                return;
            }
            _ => return,
        }
        let mut value = String::new();
        let stop = copy(chars, i, &mut value, &[',', '}']);
        wrap(&value, out);
        match stop {
            Some(c @ (',' | '}')) => {
                out.push(c);
                *i += 1;
                if c == '}' {
                    return;
                }
            }
            _ => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{dyn_map_values, fill, lit, rebase};

    #[test]
    fn map_values_become_dyn_and_strings_braces_and_ternaries_stay() {
        assert_eq!(
            dyn_map_values("{'gpus': 8, 'r': x ? 'a' : 'b', 'm': {'k': [1, f(a, b)]}}"),
            "{'gpus': dyn(8), 'r': dyn(x ? 'a' : 'b'), 'm': dyn({'k': dyn([dyn(1), dyn(f(a, b))])})}"
        );
        assert_eq!(
            dyn_map_values("x in ['a', 'b'] && [1, -2][0] == a[0] && ['k', o.name] == f(x)[1]"),
            "x in ['a', 'b'] && [1, -2][0] == a[0] && [dyn('k'), dyn(o.name)] == f(x)[1]"
        );
        assert_eq!(
            dyn_map_values("x.matches('^[0-9]{1,9}$') && y == {}"),
            "x.matches('^[0-9]{1,9}$') && y == {}"
        );
        assert_eq!(
            dyn_map_values("[{'a': 'it\\'s', 'b': true}]"),
            "[{'a': dyn('it\\'s'), 'b': dyn(true)}]"
        );
        assert_eq!(
            dyn_map_values("{'a': 1,\n 'b': 2\n}"),
            "{'a': dyn(1),\n 'b': dyn(2)\n}"
        );
    }

    #[test]
    fn rebase_renames_the_root_and_the_variables_outside_literals() {
        let renames = [("sites".to_string(), "oldSites".to_string())];
        assert_eq!(
            rebase(
                "object.kind == 'object' && variables.sites.exists(s, s.object == namespaceObject) && variables.sitesX",
                "oldObject",
                &renames
            ),
            "oldObject.kind == 'object' && variables.oldSites.exists(s, s.object == namespaceObject) && variables.sitesX"
        );
    }

    #[test]
    fn literals_escape_quotes_and_backslashes() {
        assert_eq!(lit("a'b\\c"), "'a\\'b\\\\c'");
        assert_eq!(fill("@A@ + @A@", &[("A", "x")]), "x + x");
    }
}
