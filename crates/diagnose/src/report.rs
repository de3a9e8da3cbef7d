//! The report every input kind ends in: the summaries of the analyses that ran and their
//! findings, errors first.

use serde::Serialize;

use crate::finding::{Finding, Severity};
use crate::kind::InputKind;
use crate::nccl_log::LogSummary;
use crate::nccl_tests::TestsSummary;
use crate::network_rules::NetworkSpan;
use crate::topo::TopoSummary;

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The analyses that ran, in the order the input was recognised.
    pub kinds: Vec<InputKind>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nccl_log: Option<LogSummary>,
    /// The first `nvidia-smi topo -m` matrix in the input.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topo: Option<TopoSummary>,
    /// Matrices after the first (one per node or pod, when several printed theirs).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub more_topo: Vec<TopoSummary>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nccl_tests: Option<TestsSummary>,
    /// Where the ranks' hosts sit in the EC2 network, when a topology was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkSpan>,
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
