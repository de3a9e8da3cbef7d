//! What a plain (unquoted) YAML scalar means to kubectl, and which strings a YAML 1.1
//! reader would read as something else.
//!
//! kubectl turns YAML into JSON with sigs.k8s.io/yaml over go-yaml v2, a YAML 1.1
//! parser: `0755` is the integer 493, `on`/`y`/`yes` are `true`, `1e3` is 1000.
//! Its resolution rules (go-yaml v2 `resolve.go`, checked against `kubectl label
//! --local -o json` in tests/yaml11.rs):
//! - exact words: `y Y yes Yes YES true True TRUE on On ON` → true, `n N no No NO false
//!   False FALSE off Off OFF` → false, `"" ~ null Null NULL` → null, `.inf`/`.nan`
//!   spellings → floats, `<<` → merge key;
//! - starting with a digit or a sign: underscores dropped, then Go's `ParseInt(s, 0,
//!   64)` (`0x1F`, `0o17`, `0b101`, `0755` octal, decimal), then unsigned, then a float
//!   matching `[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?`;
//! - starting with `.`: a float such as `.5`;
//! - anything else, timestamps included (go-yaml v2 keeps them as strings), is a string.
//!
//! Other YAML 1.1 readers (PyYAML, SnakeYAML) also read sexagesimal `1:30`, dates
//! and `=`, so [`needs_quotes`] quotes every string any of them would retype
//! (<https://yaml.org/type/> lists the YAML 1.1 types).

use std::sync::LazyLock;

use regex::Regex;

/// The type a plain scalar resolves to.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Plain {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Float(f64),
    /// The `<<` merge key.
    Merge,
    Str,
}

/// go-yaml v2's float syntax for scalars starting with a digit or a sign.
static GO_FLOAT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$").expect("valid regex")
});

/// How kubectl (go-yaml v2) reads the plain scalar `text`.
pub(crate) fn kubectl(text: &str) -> Plain {
    if let Some(word) = word(text) {
        return word;
    }
    match text.as_bytes().first() {
        Some(b'0'..=b'9' | b'+' | b'-') => number(&text.replace('_', "")),
        Some(b'.') => match text[1..].bytes().next() {
            Some(b'0'..=b'9') if GO_FLOAT.is_match(text) => finite(text),
            _ => Plain::Str,
        },
        _ => Plain::Str,
    }
}

fn word(text: &str) -> Option<Plain> {
    Some(match text {
        "y" | "Y" | "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            Plain::Bool(true)
        }
        "n" | "N" | "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            Plain::Bool(false)
        }
        "" | "~" | "null" | "Null" | "NULL" => Plain::Null,
        ".nan" | ".NaN" | ".NAN" => Plain::Float(f64::NAN),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => Plain::Float(f64::INFINITY),
        "-.inf" | "-.Inf" | "-.INF" => Plain::Float(f64::NEG_INFINITY),
        "<<" => Plain::Merge,
        _ => return None,
    })
}

/// Go's `ParseInt(s, 0, 64)`, then `ParseUint`, then the float syntax.
fn number(plain: &str) -> Plain {
    let (negative, signed, body) = match plain.as_bytes().first() {
        Some(b'-') => (true, true, &plain[1..]),
        Some(b'+') => (false, true, &plain[1..]),
        _ => (false, false, plain),
    };
    let prefixed = |p: &[&str]| p.iter().find_map(|p| body.strip_prefix(p));
    let (radix, digits) = if let Some(d) = prefixed(&["0x", "0X"]) {
        (16, d)
    } else if let Some(d) = prefixed(&["0b", "0B"]) {
        (2, d)
    } else if let Some(d) = prefixed(&["0o", "0O"]) {
        (8, d)
    } else if body.len() > 1 && body.starts_with('0') {
        (8, &body[1..])
    } else {
        (10, body)
    };
    let magnitude = (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_alphanumeric()))
        .then(|| u64::from_str_radix(digits, radix).ok())
        .flatten();
    if let Some(m) = magnitude {
        if negative && m <= i64::MAX as u64 + 1 {
            return Plain::Int((m as i128).wrapping_neg() as i64);
        }
        if !negative && m <= i64::MAX as u64 {
            return Plain::Int(m as i64);
        }
        if !signed {
            return Plain::Uint(m);
        }
    }
    if GO_FLOAT.is_match(plain) {
        return finite(plain);
    }
    Plain::Str
}

/// Go's `ParseFloat` fails on overflow, and go-yaml then keeps the text as a string.
fn finite(text: &str) -> Plain {
    match text.parse::<f64>() {
        Ok(f) if f.is_finite() => Plain::Float(f),
        _ => Plain::Str,
    }
}

/// YAML 1.1 implicit types as PyYAML resolves them (`yaml/resolver.py`), plus
/// SnakeYAML's looser float; any match would be read as something other than a string.
static YAML11: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    [
        r"^(?:yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF|y|Y|n|N)$",
        r"^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
        r"^[-+]?(?:\.[0-9]+|[0-9_]+(?:\.[0-9_]*)?)(?:[eE][-+]?[0-9]+)?$",
        r"^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$",
        r"^(?:~|null|Null|NULL|<<|=)?$",
        r"^(?:[0-9]{4}-[0-9]{2}-[0-9]{2}|[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(?:[Tt]|[ \t]+)[0-9]{1,2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]*)?(?:[ \t]*(?:Z|[-+][0-9]{1,2}(?::[0-9]{2})?))?)$",
    ]
    .iter()
    .map(|r| Regex::new(r).expect("valid regex"))
    .collect()
});

/// Whether `text` may be written as a plain scalar: every YAML 1.1 or 1.2 reader
/// (kubectl, PyYAML, libyaml, serde_yaml) reads it back as this same string.
pub(crate) fn plain_is_safe(text: &str) -> bool {
    let mut chars = text.chars();
    let (Some(first), second) = (chars.next(), chars.next()) else {
        return false;
    };
    let leading_ok = match first {
        '-' => second.is_some_and(|c| c != ' '),
        c => !"?:,[]{}#&*!|>'\"%@` ".contains(c),
    };
    leading_ok
        && !text.ends_with([' ', ':'])
        && !text.contains(": ")
        && !text.contains(" #")
        && !text.starts_with("---")
        && !text.starts_with("...")
        && text.chars().all(|c| c == ' ' || printable(c) && c != '\t')
        && kubectl(text) == Plain::Str
        && !YAML11.iter().any(|r| r.is_match(text))
}

/// Characters every YAML 1.1 reader takes as themselves inside a scalar (PyYAML
/// rejects the rest; U+0085, U+2028 and U+2029 are line breaks in YAML 1.1).
pub(crate) fn printable(c: char) -> bool {
    matches!(c, '\u{21}'..='\u{7e}' | '\u{a0}'..='\u{2027}' | '\u{202a}'..='\u{d7ff}' | '\u{e000}'..='\u{fefe}' | '\u{ff00}'..='\u{fffd}' | '\u{10000}'..)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubectl_scalars() {
        for (text, want) in [
            ("0755", Plain::Int(493)),
            ("012", Plain::Int(10)),
            ("0x10", Plain::Int(16)),
            ("0o17", Plain::Int(15)),
            ("0b101", Plain::Int(5)),
            ("-0b11", Plain::Int(-3)),
            ("1_000", Plain::Int(1000)),
            ("+12", Plain::Int(12)),
            ("-9223372036854775808", Plain::Int(i64::MIN)),
            ("18446744073709551615", Plain::Uint(u64::MAX)),
            ("99999999999999999999", Plain::Float(1e20)),
            ("08", Plain::Float(8.0)),
            ("1e3", Plain::Float(1000.0)),
            ("1.", Plain::Float(1.0)),
            (".5", Plain::Float(0.5)),
            ("1e400", Plain::Str),
            ("on", Plain::Bool(true)),
            ("y", Plain::Bool(true)),
            ("N", Plain::Bool(false)),
            ("~", Plain::Null),
            ("", Plain::Null),
            ("<<", Plain::Merge),
            ("1:30", Plain::Str),
            ("2025-01-01", Plain::Str),
            ("0x", Plain::Str),
            ("100Gi", Plain::Str),
            ("-", Plain::Str),
            ("+", Plain::Str),
            (".", Plain::Str),
            ("1.2.3", Plain::Str),
            ("yes please", Plain::Str),
        ] {
            assert_eq!(kubectl(text), want, "{text:?}");
        }
        assert!(matches!(kubectl(".inf"), Plain::Float(f) if f.is_infinite()));
    }

    #[test]
    fn strings_a_yaml_11_reader_retypes_are_not_plain() {
        for text in [
            "on",
            "off",
            "yes",
            "no",
            "y",
            "n",
            "Y",
            "~",
            "null",
            "",
            "1:30",
            "1e3",
            "0x10",
            "012",
            "0755",
            "2025-01-01",
            "2025-01-01 10:00:00",
            "=",
            "<<",
            "1_000",
            "08",
            "1.5",
            ".5",
            ".inf",
            "-.inf",
            "+1",
            "-1",
            "190:20:30.15",
            " x",
            "x ",
            "a: b",
            "a #b",
            "key:",
            "- x",
            "-",
            "*x",
            "&x",
            "!x",
            "|",
            ">",
            "'x",
            "\"x",
            "%x",
            "@x",
            "`x",
            "{x",
            "[x",
            "#x",
            "?x",
            ":x",
            ",x",
            "---",
            "...x",
            "a\tb",
            "a\u{85}b",
            "a\u{2028}b",
            "\u{feff}x",
            "a\nb",
        ] {
            assert!(!plain_is_safe(text), "{text:?} must be quoted");
        }
        for text in [
            "100Gi",
            "nvcr.io/nvidia/pytorch:24.07-py3",
            "--nproc_per_node=8",
            "-c",
            "http://example.com/x",
            "1.2.3",
            "p5.48xlarge",
            "FI_PROVIDER",
            "a,b",
            "yes please",
            "日本",
            "x=1",
        ] {
            assert!(plain_is_safe(text), "{text:?} can stay plain");
        }
    }
}
