//! The report every input kind ends in: findings with severity, fix and evidence.

use serde::Serialize;

use crate::detect::InputKind;
use crate::nccl_log::LogSummary;
use crate::nccl_tests::TestsSummary;
use crate::topo::TopoSummary;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Warning,
    Error,
}

impl Severity {
    pub fn label(self) -> &'static str {
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
    pub fn new(line: usize, text: &str) -> Self {
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
    pub const MAX_EVIDENCE: usize = 5;

    pub fn new(severity: Severity, rule: &'static str, message: String, fix: String) -> Self {
        Self {
            severity,
            rule,
            message,
            fix,
            evidence: Vec::new(),
            more_evidence: 0,
        }
    }

    pub fn with_evidence(mut self, evidence: impl IntoIterator<Item = Evidence>) -> Self {
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

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The analyses that ran, in the order the input was recognised.
    pub kinds: Vec<InputKind>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nccl_log: Option<LogSummary>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topo: Option<TopoSummary>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nccl_tests: Option<TestsSummary>,
    pub findings: Vec<Finding>,
}

impl Report {
    pub fn worst(&self) -> Option<Severity> {
        self.findings.iter().map(|finding| finding.severity).max()
    }

    /// The one place the CI contract lives: 1 when a finding is an error-level layout fault.
    pub fn exit_code(&self) -> i32 {
        i32::from(self.worst() == Some(Severity::Error))
    }

    pub fn has_rule(&self, rule: &str) -> bool {
        self.findings.iter().any(|finding| finding.rule == rule)
    }

    /// Errors first, so the thing that fails the pipeline is what the reader sees first.
    pub(crate) fn sort_findings(&mut self) {
        self.findings
            .sort_by(|a, b| b.severity.cmp(&a.severity).then(a.rule.cmp(b.rule)));
    }
}
