//! Human output of the dry-run: a compact report per object, YAML of the mutated
//! objects, unified diffs.

use std::fmt::Write;

use serde_json::Value;
use trainplace_engine::{Mode, Verdict};

pub struct ObjectReport<'a> {
    pub original: &'a Value,
    pub verdict: &'a Verdict,
}

fn title(v: &Verdict) -> String {
    let name = if v.name.is_empty() {
        "(unnamed)"
    } else {
        &v.name
    };
    format!("{} {}/{}", v.kind, v.namespace, name)
}

/// The per-object report. `with_changes` lists each change (check); mutate prints
/// the objects on stdout and this summary on stderr.
pub fn text(reports: &[ObjectReport<'_>], with_changes: bool) -> String {
    let mut s = String::new();
    for r in reports {
        let v = r.verdict;
        let status = if !v.allowed {
            "DENIED"
        } else if v.findings.iter().any(|f| f.mode == Mode::Warn) {
            "allowed with warnings"
        } else {
            "allowed"
        };
        let changes = match v.changes.len() {
            0 => "no changes".to_string(),
            1 => "1 change".to_string(),
            n => format!("{n} changes"),
        };
        let _ = writeln!(s, "{}: {status} ({changes})", title(v));
        for f in &v.findings {
            let _ = writeln!(
                s,
                "  {} [{}] {}: {}",
                f.mode.as_str(),
                f.rule.as_str(),
                f.site,
                f.found
            );
            let _ = writeln!(s, "      fix: {}", f.fix);
            if let Some(a) = f.opt_in {
                let _ = writeln!(s, "      opt in: {a}: \"true\"");
            }
        }
        for n in &v.notes {
            let _ = writeln!(s, "  note: {n}");
        }
        if with_changes {
            for c in &v.changes {
                let _ = writeln!(s, "  + {} ({})", c.what, c.why);
            }
        }
    }
    s
}

/// The mutated objects as one multi-document YAML stream.
pub fn objects_yaml(verdicts: &[Verdict]) -> Result<String, serde_yaml_ng::Error> {
    let mut s = String::new();
    for v in verdicts {
        s.push_str("---\n");
        s.push_str(&serde_yaml_ng::to_string(&v.object)?);
    }
    Ok(s)
}

/// A unified diff of each object's YAML before and after.
pub fn diffs(reports: &[ObjectReport<'_>]) -> Result<String, serde_yaml_ng::Error> {
    let mut s = String::new();
    for r in reports {
        if r.verdict.patch.0.is_empty() {
            continue;
        }
        let before = serde_yaml_ng::to_string(r.original)?;
        let after = serde_yaml_ng::to_string(&r.verdict.object)?;
        let name = title(r.verdict);
        let diff = similar::TextDiff::from_lines(&before, &after);
        let _ = write!(
            s,
            "{}",
            diff.unified_diff()
                .context_radius(3)
                .header(&format!("a/{name}"), &format!("b/{name}"))
        );
    }
    Ok(s)
}
