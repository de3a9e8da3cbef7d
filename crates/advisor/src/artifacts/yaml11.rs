//! YAML every reader reads back as written. serde_yaml_ng writes YAML 1.2, where
//! `2026-12-08T10:50:00Z` is a plain string; a YAML 1.1 reader (PyYAML, and so the
//! Kubernetes Python client; SnakeYAML) reads the same plain scalar as a timestamp
//! (<https://yaml.org/type/timestamp.html>). Such strings are quoted here.

use std::sync::LazyLock;

use regex::Regex;

/// The YAML 1.1 timestamp type's regular expression
/// (<https://yaml.org/type/timestamp.html>).
static TIMESTAMP: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^(?:[0-9]{4}-[0-9]{2}-[0-9]{2}|[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(?:[Tt]|[ \t]+)[0-9]{1,2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]*)?(?:[ \t]*Z|[-+][0-9]{1,2}(?::[0-9]{2})?)?)$",
    )
    .expect("valid regex")
});

/// Whether a YAML 1.1 reader reads the plain scalar `text` as a timestamp.
pub fn is_timestamp(text: &str) -> bool {
    TIMESTAMP.is_match(text)
}

/// `yaml` (serde_yaml_ng's block output) with every plain scalar a YAML 1.1 reader would
/// read as a timestamp single-quoted. Block scalars (`|`, `>`) are left as they are.
pub fn quote_timestamps(yaml: &str) -> String {
    let mut out = String::with_capacity(yaml.len());
    // The indent of the line that opened a block scalar: deeper lines are its text.
    let mut block: Option<usize> = None;
    for line in yaml.split_inclusive('\n') {
        let body = line.trim_end_matches('\n');
        let indent = body.len() - body.trim_start_matches(' ').len();
        if let Some(b) = block {
            if body.trim().is_empty() || indent > b {
                out.push_str(line);
                continue;
            }
            block = None;
        }
        let (head, value) = split_value(body);
        if value.starts_with('|') || value.starts_with('>') {
            block = Some(indent);
        }
        if is_timestamp(value) {
            out.push_str(head);
            out.push('\'');
            out.push_str(value);
            out.push('\'');
            out.push_str(&line[body.len()..]);
        } else {
            out.push_str(line);
        }
    }
    out
}

/// A line split into what comes before its scalar value (indent, `- `, `key: `) and the
/// value; the value is empty when the line has none.
fn split_value(line: &str) -> (&str, &str) {
    let mut at = line.len() - line.trim_start_matches(' ').len();
    while line[at..].starts_with("- ") {
        at += 2;
    }
    let rest = &line[at..];
    if rest.starts_with('\'') || rest.starts_with('"') {
        // A quoted key or a quoted value: nothing plain to look at.
        return (line, "");
    }
    match rest.find(": ") {
        Some(i) => line.split_at(at + i + 2),
        None if rest.ends_with(':') => (line, ""),
        None => line.split_at(at),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_quoted_and_nothing_else() {
        let yaml = "a:\n- name: CHECKPOINT_BY\n  value: 2026-12-08T10:50:00Z\n- 2026-12-08\nb: 2026-12-08 is a day\nscript: |\n  at: 2026-12-08T10:50:00Z\nc: 1:30\n";
        assert_eq!(
            quote_timestamps(yaml),
            "a:\n- name: CHECKPOINT_BY\n  value: '2026-12-08T10:50:00Z'\n- '2026-12-08'\nb: 2026-12-08 is a day\nscript: |\n  at: 2026-12-08T10:50:00Z\nc: 1:30\n"
        );
    }
}
