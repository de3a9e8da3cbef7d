//! Recognises what the user handed us, and refuses what is not text.

use std::fmt;

use serde::Serialize;

use crate::error::{DiagnoseError, EXPECTED_INPUTS};
use crate::{nccl_log, nccl_tests, topo};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum InputKind {
    /// NCCL_DEBUG=INFO output (`kubectl logs`), any number of ranks and hosts.
    NcclLog,
    /// `nvidia-smi topo -m`.
    Topo,
    /// nccl-tests (`all_reduce_perf` and friends).
    NcclTests,
}

impl InputKind {
    pub fn name(self) -> &'static str {
        match self {
            Self::NcclLog => "nccl-log",
            Self::Topo => "topo",
            Self::NcclTests => "nccl-tests",
        }
    }

    /// What the input must contain, for the error when `--kind` does not match it.
    pub fn signature(self) -> &'static str {
        match self {
            Self::NcclLog => "`host:pid:tid [dev] NCCL INFO ...` lines",
            Self::Topo => "`nvidia-smi topo -m` matrix (a `GPU0 GPU1 ...` header and GPU rows)",
            Self::NcclTests => "nccl-tests result table (`size count type ... algbw busbw` rows)",
        }
    }

    fn present_in(self, text: &str) -> bool {
        match self {
            Self::NcclLog => nccl_log::count_nccl_lines(text) > 0,
            Self::Topo => topo::looks_like(text),
            Self::NcclTests => nccl_tests::looks_like(text),
        }
    }
}

impl fmt::Display for InputKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The analyses to run: the one asked for, or every kind the text shows (nccl-tests run
/// with NCCL_DEBUG=INFO is both a result table and an NCCL log).
pub fn kinds(text: &str, asked: Option<InputKind>) -> Result<Vec<InputKind>, DiagnoseError> {
    check_text(text)?;
    if let Some(kind) = asked {
        return if kind.present_in(text) {
            Ok(vec![kind])
        } else {
            Err(DiagnoseError::KindNotFound {
                kind,
                signature: kind.signature(),
            })
        };
    }
    let found: Vec<InputKind> = [InputKind::NcclTests, InputKind::Topo, InputKind::NcclLog]
        .into_iter()
        .filter(|kind| kind.present_in(text))
        .collect();
    if found.is_empty() {
        return Err(DiagnoseError::Unrecognised {
            expected: EXPECTED_INPUTS,
        });
    }
    Ok(found)
}

/// Logs legitimately carry tabs, escapes and the odd mojibake line; a NUL byte or a high
/// share of control characters means the user passed a binary (a core file, a tarball).
fn check_text(text: &str) -> Result<(), DiagnoseError> {
    if text.trim().is_empty() {
        return Err(DiagnoseError::Empty {
            expected: EXPECTED_INPUTS,
        });
    }
    let sample: Vec<char> = text.chars().take(64 * 1024).collect();
    if sample.contains(&'\0') {
        return Err(DiagnoseError::Binary {
            reason: "it contains NUL bytes".to_string(),
            expected: EXPECTED_INPUTS,
        });
    }
    let odd = sample
        .iter()
        .filter(|c| {
            (c.is_control() && !matches!(c, '\n' | '\r' | '\t' | '\u{1b}')) || **c == '\u{fffd}'
        })
        .count();
    if odd * 10 > sample.len() {
        return Err(DiagnoseError::Binary {
            reason: format!(
                "{odd} of its first {} characters are control or invalid UTF-8 bytes",
                sample.len()
            ),
            expected: EXPECTED_INPUTS,
        });
    }
    Ok(())
}
