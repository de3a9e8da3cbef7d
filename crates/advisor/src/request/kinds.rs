//! The request's small closed sets: what is asked for, how capacity is bought, and
//! which training operator runs the job.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Demand {
    Gpus(u32),
    Nodes(u32),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CapacityPref {
    /// Capacity Block when the instance type is sold that way, else on-demand.
    Auto,
    OnDemand,
    Odcr,
    CapacityBlock,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Framework {
    PyTorchJob,
    TrainJob,
    JobSet,
    MPIJob,
}

impl Framework {
    pub const NAMES: [&str; 4] = ["pytorchjob", "trainjob", "jobset", "mpijob"];

    pub fn parse(text: &str) -> Option<Self> {
        match text.to_ascii_lowercase().as_str() {
            "pytorchjob" => Some(Self::PyTorchJob),
            "trainjob" => Some(Self::TrainJob),
            "jobset" => Some(Self::JobSet),
            "mpijob" => Some(Self::MPIJob),
            _ => None,
        }
    }

    pub fn slug(self) -> &'static str {
        match self {
            Self::PyTorchJob => "pytorchjob",
            Self::TrainJob => "trainjob",
            Self::JobSet => "jobset",
            Self::MPIJob => "mpijob",
        }
    }
}
