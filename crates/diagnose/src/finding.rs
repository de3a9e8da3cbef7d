//! What every rule produces: a finding with severity, fix and the input lines that
//! support it. A leaf: parsers and rules build these; the report collects them.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Warning,
    Error,
}

impl Severity {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::Info => "info",
            Self::Warning => "warning",
            Self::Error => "error",
        }
    }
}

/// One input line that supports a finding; `line` is 1-based, as editors count.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Evidence {
    pub line: usize,
    pub text: String,
}

impl Evidence {
    /// Long log lines are cut so a report stays readable; the line number finds the rest.
    pub(crate) fn new(line: usize, text: &str) -> Self {
        const MAX: usize = 240;
        let text = text.trim_end();
        let text = match text.char_indices().nth(MAX) {
            Some((cut, _)) => format!("{}...", &text[..cut]),
            None => text.to_string(),
        };
        Self { line, text }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    pub severity: Severity,
    pub rule: &'static str,
    pub message: String,
    pub fix: String,
    pub evidence: Vec<Evidence>,
    /// Matching lines beyond the evidence kept, so the reader knows how widespread it is.
    pub more_evidence: usize,
}

impl Finding {
    pub(crate) const MAX_EVIDENCE: usize = 5;

    pub(crate) fn new(
        severity: Severity,
        rule: &'static str,
        message: String,
        fix: String,
    ) -> Self {
        Self {
            severity,
            rule,
            message,
            fix,
            evidence: Vec::new(),
            more_evidence: 0,
        }
    }

    pub(crate) fn with_evidence(mut self, evidence: impl IntoIterator<Item = Evidence>) -> Self {
        for item in evidence {
            if self.evidence.len() < Self::MAX_EVIDENCE {
                self.evidence.push(item);
            } else {
                self.more_evidence += 1;
            }
        }
        self
    }
}
