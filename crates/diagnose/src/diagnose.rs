//! Text in, [`Report`] out: recognise the input, run each analysis it contains (parser,
//! then its rules), and order the findings.

use crate::catalog;
use crate::detect;
use crate::error::DiagnoseError;
use crate::finding::{Finding, Severity};
use crate::kind::InputKind;
use crate::network_rules::{self, HostRanks};
use crate::options::Options;
use crate::report::Report;
use crate::{log_rules, nccl_log, nccl_tests, topo, topo_rules};

pub fn diagnose(
    text: &str,
    kind: Option<InputKind>,
    opts: &Options,
) -> Result<Report, DiagnoseError> {
    let kinds = detect::kinds(text, kind)?;
    let mut report = Report {
        kinds: kinds.clone(),
        nccl_log: None,
        topo: None,
        more_topo: Vec::new(),
        nccl_tests: None,
        network: None,
        findings: Vec::new(),
    };
    if let Some(name) = opts
        .instance_type
        .as_deref()
        .filter(|_| opts.instance().is_none())
    {
        let (message, fix) = catalog::unknown_type(name);
        report.findings.push(Finding::new(
            Severity::Info,
            "instance-type-unknown",
            message,
            fix,
        ));
    }
    for kind in kinds {
        match kind {
            InputKind::NcclLog => {
                let summary = nccl_log::parse(text);
                report.findings.extend(log_rules::check(&summary, opts));
                report.nccl_log = Some(summary);
            }
            InputKind::Topo => {
                let summaries = topo::parse(text);
                report.findings.extend(topo_rules::check(&summaries, opts));
                let mut summaries = summaries.into_iter();
                report.topo = summaries.next();
                report.more_topo = summaries.collect();
            }
            InputKind::NcclTests => {
                let summary = nccl_tests::analyse(text, opts);
                report.findings.extend(nccl_tests::check(&summary));
                report.nccl_tests = Some(summary);
            }
        }
    }
    if let Some(map) = &opts.network {
        let (span, findings) = network_rules::check(&hosts_and_ranks(&report), map);
        report.network = span;
        report.findings.extend(findings);
    }
    report.sort_findings();
    Ok(report)
}

/// The hosts the input names with their ranks: the NCCL log's, else nccl-tests' `# Rank`
/// lines.
fn hosts_and_ranks(report: &Report) -> Vec<HostRanks> {
    if let Some(log) = report.nccl_log.as_ref().filter(|l| !l.hosts.is_empty()) {
        return log
            .hosts
            .iter()
            .map(|h| HostRanks {
                host: h.host.clone(),
                ranks: h.ranks.iter().map(|r| r.rank).collect(),
            })
            .collect();
    }
    let Some(tests) = &report.nccl_tests else {
        return Vec::new();
    };
    tests
        .hosts
        .iter()
        .map(|host| HostRanks {
            host: host.clone(),
            ranks: tests
                .rank_host
                .iter()
                .filter(|(_, h)| *h == host)
                .map(|(rank, _)| *rank)
                .collect(),
        })
        .collect()
}
