//! Recognises what the user handed us, and refuses what is not text.

use crate::error::{DiagnoseError, EXPECTED_INPUTS};
use crate::kind::InputKind;
use crate::{nccl_log, nccl_tests, topo};

fn present_in(kind: InputKind, text: &str) -> bool {
    match kind {
        InputKind::NcclLog => nccl_log::count_nccl_lines(text) > 0,
        InputKind::Topo => topo::looks_like(text),
        InputKind::NcclTests => nccl_tests::looks_like(text),
    }
}

/// The analyses to run: the one asked for, or every kind the text shows (nccl-tests run
/// with NCCL_DEBUG=INFO is both a result table and an NCCL log).
pub(crate) fn kinds(text: &str, asked: Option<InputKind>) -> Result<Vec<InputKind>, DiagnoseError> {
    check_text(text)?;
    if let Some(kind) = asked {
        return if present_in(kind, text) {
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
        .filter(|kind| present_in(*kind, text))
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
