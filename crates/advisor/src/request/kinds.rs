//! The request's small closed sets: what is asked for, how capacity is bought, which
//! training operator runs the job, and what makes the job's nodes.

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

/// What makes the job's nodes: one route per plan. Both cannot share a plan: the eksctl
/// nodegroups take every reserved instance, and Karpenter's pods would then wait on paid
/// hours for nodes it cannot launch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Route {
    /// The eksctl managed (or, in a Local Zone, self-managed) nodegroups that
    /// `aws-cli.sh` creates with the cluster.
    #[default]
    Eksctl,
    /// Karpenter's NodePools (`karpenter.yaml`) on a cluster whose eksctl config holds
    /// only the system nodegroup.
    Karpenter,
}

impl Route {
    pub const NAMES: [&str; 2] = ["eksctl", "karpenter"];

    pub fn parse(text: &str) -> Option<Self> {
        match text.to_ascii_lowercase().as_str() {
            "eksctl" => Some(Self::Eksctl),
            "karpenter" => Some(Self::Karpenter),
            _ => None,
        }
    }

    pub fn slug(self) -> &'static str {
        match self {
            Self::Eksctl => "eksctl",
            Self::Karpenter => "karpenter",
        }
    }

    /// The route the plan did not take.
    pub fn other(self) -> Self {
        match self {
            Self::Eksctl => Self::Karpenter,
            Self::Karpenter => Self::Eksctl,
        }
    }
}
