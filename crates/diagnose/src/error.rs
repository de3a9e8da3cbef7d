//! Typed errors at the library edge; the CLI turns them into exit code 2.

use crate::kind::InputKind;

#[derive(Debug, thiserror::Error)]
pub enum DiagnoseError {
    #[error("the input is empty; expected {expected}")]
    Empty { expected: &'static str },

    #[error("the input looks binary ({reason}); expected text: {expected}")]
    Binary {
        reason: String,
        expected: &'static str,
    },

    #[error("unrecognised input: none of {expected} was found")]
    Unrecognised { expected: &'static str },

    #[error("--kind {kind} was given, but the input has no {signature}")]
    KindNotFound {
        kind: InputKind,
        signature: &'static str,
    },
}

/// What each input kind looks like, for error messages that tell the user what we wanted.
pub(crate) const EXPECTED_INPUTS: &str = "an NCCL INFO log (`NCCL INFO Channel ... via ...`), \
`nvidia-smi topo -m` output (a `GPU0 GPU1 ...` matrix) or nccl-tests output \
(`all_reduce_perf` table with `algbw`/`busbw` columns)";
