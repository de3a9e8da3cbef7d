//! The facts the log rules judge against: the instance type from the user's flag, else from
//! the log's `NET/OFI Running on` line. Shared by the transport and the environment rules.

use crate::catalog::{self, Instance};
use crate::nccl_log::LogSummary;
use crate::options::Options;

/// Facts the rules judge against; the user's flags win over what the log says.
pub(crate) struct LogContext {
    pub instance: Option<&'static Instance>,
    pub instance_name: Option<String>,
}

impl LogContext {
    pub(crate) fn new(summary: &LogSummary, opts: &Options) -> Self {
        let instance_name = opts
            .instance_type
            .clone()
            .or_else(|| summary.platform.clone());
        Self {
            instance: instance_name.as_deref().and_then(catalog::find),
            instance_name,
        }
    }

    pub(crate) fn name(&self) -> &str {
        self.instance_name
            .as_deref()
            .unwrap_or("this instance type")
    }
}
