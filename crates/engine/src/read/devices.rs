//! What a pod asks for through DRA, as counted from its claims: accelerators (by the
//! extended resource their class stands for), EFA interfaces, and a ComputeDomain's IMEX
//! channel. `facts::dra` resolves the claims into these; the pod's view carries them.

/// The extended resource name a pod may ask a DRA device class's devices by, with no
/// claim of its own: `deviceclass.resource.kubernetes.io/<class>: N`; the scheduler
/// writes the claim (KEP-5004, `DRAExtendedResource`).
/// https://github.com/kubernetes/enhancements/tree/master/keps/sig-scheduling/5004-dra-extended-resource
pub const DRA_EXTENDED_PREFIX: &str = "deviceclass.resource.kubernetes.io/";

/// How many devices of a class a request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Count {
    Exact(u32),
    /// `allocationMode: All`: every device of the class on the node.
    All,
}

impl Count {
    pub(crate) fn plus(self, other: Count) -> Count {
        match (self, other) {
            (Count::Exact(a), Count::Exact(b)) => Count::Exact(a.saturating_add(b)),
            _ => Count::All,
        }
    }

    /// The count on a node that has `all` devices of the class.
    pub fn on(self, all: u32) -> u32 {
        match self {
            Count::Exact(n) => n,
            Count::All => all,
        }
    }
}

/// A ComputeDomain, found through the channel ResourceClaimTemplate it generates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Domain {
    pub name: String,
    /// `spec.numNodes` (0: not set; deprecated upstream, then only a status hint).
    pub num_nodes: u32,
}

/// Accelerators claimed through DRA.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accelerators {
    /// The extended resource the class stands for (`nvidia.com/gpu`).
    pub resource: String,
    pub count: Count,
    pub shared: bool,
}

/// A ComputeDomain IMEX channel claimed by the pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Channel {
    /// The pod's claim entry name.
    pub claim: String,
    /// The ComputeDomain, when the input or inventory holds it.
    pub domain: Option<Domain>,
    /// Some container lists the claim in `resources.claims` (only those get the channel).
    pub used: bool,
}

/// What a pod's DRA claims ask for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodDevices {
    pub accelerators: Option<Accelerators>,
    pub efa: Option<Count>,
    pub channel: Option<Channel>,
    /// Claims that could not be counted, each with why.
    pub unresolved: Vec<String>,
    /// Names of the pod's claims that give accelerators or EFA.
    pub device_claims: Vec<String>,
}
