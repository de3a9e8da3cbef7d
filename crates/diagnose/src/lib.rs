//! Diagnoses a distributed-training layout from what the job printed: NCCL INFO logs,
//! `nvidia-smi topo -m` and nccl-tests output. Pure: text in, [`Report`] out; the CLI in
//! [`cli`] does the reading, rendering and exit codes.
#![forbid(unsafe_code)]

pub mod catalog;
pub mod cli;
pub mod detect;
pub mod env;
mod env_rules;
pub mod error;
pub mod expectations;
mod line;
mod log_rules;
pub mod nccl_log;
pub mod nccl_tests;
mod render;
pub mod report;
pub mod topo;
pub mod transport;
pub mod version;

pub use detect::InputKind;
pub use error::DiagnoseError;
pub use expectations::{Basis, Expectation, Expectations};
pub use render::render_text;
pub use report::{Evidence, Finding, Report, Severity};
pub use version::Version;

use catalog::Instance;

/// What the caller knows that the input may not say.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// E.g. `p5.48xlarge`; otherwise taken from the log's `NET/OFI Running on` line or the
    /// GPU name nccl-tests prints.
    pub instance_type: Option<String>,
    /// Node count for nccl-tests; otherwise the distinct hosts in its `# Rank` lines.
    pub nodes: Option<u32>,
    /// Otherwise the log's `NET/OFI Initializing aws-ofi-nccl` line.
    pub aws_ofi_nccl_version: Option<Version>,
    pub expectations: Expectations,
}

impl Options {
    fn instance(&self) -> Option<&'static Instance> {
        self.instance_type.as_deref().and_then(catalog::find)
    }
}

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
        nccl_tests: None,
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
                let summary = topo::parse(text);
                report
                    .findings
                    .extend(topo::check(&summary, opts.instance()));
                report.topo = Some(summary);
            }
            InputKind::NcclTests => {
                let summary = nccl_tests::analyse(text, opts);
                report.findings.extend(nccl_tests::check(&summary));
                report.nccl_tests = Some(summary);
            }
        }
    }
    report.sort_findings();
    Ok(report)
}
