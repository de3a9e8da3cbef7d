//! JSON values as block YAML that every YAML 1.1 reader (kubectl's go-yaml v2, PyYAML)
//! and YAML 1.2 reader reads back as the same value: a string stays plain only when
//! nobody would retype it ([`resolve::plain_is_safe`]), multi-line text becomes a
//! literal block, and everything else is quoted. The layout follows `kubectl get -o
//! yaml` (two-space indent, list items at their key's indent).

use serde_json::{Map, Number, Value};

use super::resolve;

/// One document, without the leading `---`.
pub(crate) fn document(value: &Value) -> String {
    let mut out = String::new();
    match value {
        Value::Object(m) if !m.is_empty() => mapping(&mut out, m, 0, false),
        Value::Array(a) if !a.is_empty() => sequence(&mut out, a, 0, false),
        other => {
            scalar(&mut out, other, 0);
            out.push('\n');
        }
    }
    out
}

fn pad(out: &mut String, indent: usize) {
    out.extend(std::iter::repeat_n(' ', indent));
}

/// `inline_first`: the caller already wrote `- ` for the first line.
fn mapping(out: &mut String, map: &Map<String, Value>, indent: usize, inline_first: bool) {
    for (i, (key, value)) in map.iter().enumerate() {
        if i > 0 || !inline_first {
            pad(out, indent);
        }
        quoted_or_plain(out, key);
        out.push(':');
        match value {
            Value::Object(m) if !m.is_empty() => {
                out.push('\n');
                mapping(out, m, indent + 2, false);
            }
            Value::Array(a) if !a.is_empty() => {
                out.push('\n');
                sequence(out, a, indent, false);
            }
            other => {
                out.push(' ');
                scalar(out, other, indent + 2);
                out.push('\n');
            }
        }
    }
}

fn sequence(out: &mut String, items: &[Value], indent: usize, inline_first: bool) {
    for (i, item) in items.iter().enumerate() {
        if i > 0 || !inline_first {
            pad(out, indent);
        }
        out.push_str("- ");
        match item {
            Value::Object(m) if !m.is_empty() => mapping(out, m, indent + 2, true),
            Value::Array(a) if !a.is_empty() => sequence(out, a, indent + 2, true),
            other => {
                scalar(out, other, indent + 2);
                out.push('\n');
            }
        }
    }
}

/// A scalar or an empty collection; `block_indent` is where a literal block's lines go.
fn scalar(out: &mut String, value: &Value, block_indent: usize) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&number(n)),
        Value::String(s) if literal_fits(s) => literal(out, s, block_indent),
        Value::String(s) => quoted_or_plain(out, s),
        Value::Array(_) => out.push_str("[]"),
        Value::Object(_) => out.push_str("{}"),
    }
}

/// A float always with a fraction and a signed exponent: PyYAML (YAML 1.1) reads `1e20`
/// as a string and only `1.0e+20` as a float.
fn number(n: &Number) -> String {
    let text = n.to_string();
    if !n.is_f64() {
        return text;
    }
    let (mantissa, exponent) = match text.split_once(['e', 'E']) {
        Some((m, e)) => (m.to_string(), Some(e)),
        None => (text.clone(), None),
    };
    let mantissa = if mantissa.contains('.') {
        mantissa
    } else {
        format!("{mantissa}.0")
    };
    match exponent {
        Some(e) if e.starts_with(['-', '+']) => format!("{mantissa}e{e}"),
        Some(e) => format!("{mantissa}e+{e}"),
        None => mantissa,
    }
}

fn quoted_or_plain(out: &mut String, text: &str) {
    if resolve::plain_is_safe(text) {
        out.push_str(text);
    } else if text.chars().all(|c| c == ' ' || resolve::printable(c)) {
        out.push('\'');
        out.push_str(&text.replace('\'', "''"));
        out.push('\'');
    } else {
        double_quoted(out, text);
    }
}

fn double_quoted(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            ' ' => out.push(' '),
            c if resolve::printable(c) => out.push(c),
            c if (c as u32) <= 0xff => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if (c as u32) <= 0xffff => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    out.push('"');
}

/// Multi-line text reads best as a literal block; it is used only where no reader
/// can disagree about it: no leading space or newline (which would need an
/// indentation indicator), no line starting with a tab (go-yaml takes it for
/// indentation and fails) or ending in blanks, only printable characters and tabs.
fn literal_fits(text: &str) -> bool {
    text.contains('\n')
        && !text.starts_with([' ', '\n'])
        && text.trim_end_matches('\n').contains(|c: char| c != ' ')
        && text
            .lines()
            .all(|l| !l.starts_with('\t') && !l.ends_with([' ', '\t']))
        && text
            .chars()
            .all(|c| c == '\n' || c == ' ' || c == '\t' || resolve::printable(c))
}

fn literal(out: &mut String, text: &str, indent: usize) {
    let body = text.trim_end_matches('\n');
    let trailing = text.len() - body.len();
    out.push_str(match trailing {
        0 => "|-",
        1 => "|",
        _ => "|+",
    });
    for line in body.split('\n') {
        out.push('\n');
        if !line.is_empty() {
            pad(out, indent);
            out.push_str(line);
        }
    }
    for _ in 1..trailing {
        out.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::cli::yaml::load;

    fn round_trip(value: &Value) -> Value {
        let text = document(value);
        let back = load::documents(&text).unwrap_or_else(|e| panic!("{e:?}\n{text}"));
        back.into_iter().next().unwrap().1
    }

    #[test]
    fn layout_matches_kubectl() {
        // Keys come out sorted, as `kubectl get -o yaml` prints them.
        let v = json!({"spec": {"containers": [{"name": "a", "args": ["-c", "x"]}], "hostIPC": true, "empty": {}, "none": []}});
        assert_eq!(
            document(&v),
            "spec:\n  containers:\n  - args:\n    - -c\n    - x\n    name: a\n  empty: {}\n  hostIPC: true\n  none: []\n"
        );
        assert_eq!(
            document(&json!({"a": [[1, 2], [3]]})),
            "a:\n- - 1\n  - 2\n- - 3\n"
        );
    }

    #[test]
    fn retypable_strings_are_quoted() {
        let v = json!({"on": "off", "mode": "0755", "t": "1:30", "d": "2025-01-01", "e": "1e3",
                       "x": "0x10", "o": "012", "n": "n", "tilde": "~", "q": "it's", "img": "nvcr.io/a:1"});
        let text = document(&v);
        assert_eq!(
            text,
            "d: '2025-01-01'\ne: '1e3'\nimg: nvcr.io/a:1\nmode: '0755'\n'n': 'n'\no: '012'\n'on': 'off'\nq: it's\nt: '1:30'\ntilde: '~'\nx: '0x10'\n"
        );
        assert_eq!(round_trip(&v), v);
    }

    #[test]
    fn multi_line_and_odd_strings_survive() {
        for s in [
            "line 1\nline 2\n",
            "no newline at end\nx",
            "two at end\n\n",
            "blank\n\nin the middle\n",
            "\nleading newline",
            "  indented\nfirst",
            "trailing space \nx",
            "tab\there",
            "\tleading tab\nsecond",
            "x\n\ty",
            "bell\u{7}",
            "nel\u{85}x",
            "ls\u{2028}x",
            "emoji 🚀",
            "quote \" and \\ back",
            "",
            " ",
        ] {
            let v = json!({"k": s, "list": [s]});
            assert_eq!(round_trip(&v), v, "{s:?}:\n{}", document(&v));
        }
        assert_eq!(document(&json!({"s": "a\nb\n"})), "s: |\n  a\n  b\n");
    }

    #[test]
    fn floats_keep_a_fraction_and_signed_exponent() {
        assert_eq!(
            document(&json!({"a": 1e20, "b": 0.5, "c": 1.5e-7})),
            "a: 1.0e+20\nb: 0.5\nc: 1.5e-7\n"
        );
    }
}
