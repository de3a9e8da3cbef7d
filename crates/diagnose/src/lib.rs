//! Diagnoses a distributed-training layout from what the job printed: NCCL INFO logs,
//! `nvidia-smi topo -m` and nccl-tests output, and, given where each node sits in the
//! EC2 network ([`NetworkMap`]), how far apart the ranks ran. Pure: text in, [`Report`] out, and
//! [`render_text`] for people; reading files, flags and exit codes live in the binary
//! (`trainplace diagnose`, src/cli/diagnose.rs).
//!
//! Modules, leaves first: `line`, `version`, `kind`, `finding`, `catalog` (leaf types and
//! facts); `transport`, `env`, `gpu_names`, `nccl_log`, `topo`, `nccl_tests`,
//! `network_map` (parsers); `options`, `context`, `env_rules`, `log_rules`, `topo_rules`,
//! `network_rules` (rules); `error`, `detect`,
//! `report`, `diagnose`, `render` (the report and its text).
#![forbid(unsafe_code)]

mod catalog;
mod context;
mod detect;
mod diagnose;
mod env;
mod env_rules;
mod error;
mod finding;
mod gpu_names;
mod kind;
mod line;
mod log_rules;
mod nccl_log;
mod nccl_tests;
mod network_map;
mod network_rules;
mod options;
mod render;
mod report;
mod topo;
mod topo_rules;
mod transport;
mod version;

pub use diagnose::diagnose;
pub use env::{EnvSetting, EnvSource};
pub use error::DiagnoseError;
pub use finding::{Evidence, Finding, Severity};
pub use kind::InputKind;
pub use nccl_log::{CommShape, HostSummary, LogSummary, PairTransport, RankLocal, TransportUse};
pub use nccl_tests::{Row, TestsSummary, Verdict};
pub use network_map::{NETWORK_LABEL_PREFIX, NetworkMap, NetworkMapError};
pub use network_rules::{LayerCount, NetworkGroup, NetworkSpan};
pub use options::Options;
pub use render::render_text;
pub use report::Report;
pub use topo::{GpuAffinity, PairLink, TopoSummary};
pub use trainplace_catalog::bandwidth::{Basis, Expectation, Expectations, ExpectationsError};
pub use transport::TransportClass;
pub use version::Version;
