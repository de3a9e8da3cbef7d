//! What the caller knows that the input may not say. A leaf the rules read.

use trainplace_catalog::bandwidth::Expectations;

use crate::catalog::{self, Instance};
use crate::network_map::NetworkMap;
use crate::version::Version;

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
    /// Where each node sits in the EC2 network (`--topology`, `--pods`): the report then
    /// says how far apart the ranks ran.
    pub network: Option<NetworkMap>,
}

impl Options {
    pub(crate) fn instance(&self) -> Option<&'static Instance> {
        self.instance_type.as_deref().and_then(catalog::find)
    }
}
