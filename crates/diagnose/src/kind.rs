//! The input kinds the diagnosis recognises. A leaf: errors and the report name them.

use std::fmt;

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
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
    pub(crate) fn signature(self) -> &'static str {
        match self {
            Self::NcclLog => "`host:pid:tid [dev] NCCL INFO ...` lines",
            Self::Topo => "`nvidia-smi topo -m` matrix (a `GPU0 GPU1 ...` header and GPU rows)",
            Self::NcclTests => "nccl-tests result table (`size count type ... algbw busbw` rows)",
        }
    }
}

impl fmt::Display for InputKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
