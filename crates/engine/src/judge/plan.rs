//! The layout plan: everything the writer needs, decided before any edit (the shape,
//! the instance, the devices' containers, the /dev/shm size, what the namespace's Pod
//! Security level forbids), and the changes it reports. Judging builds the plan;
//! `write::layout` carries it out.

use crate::facts::policy::Effective;
use crate::judge::classify::{InstanceSource, Shape};
use crate::read::annotations::SHM_SIZE;
use crate::read::podspec::PodView;
use trainplace_catalog::InstanceProfile;

/// One change, as written into the `trainplace.io/mutated` annotation.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Change {
    /// The pod template it was made in, as findings name it
    /// (`spec.pytorchReplicaSpecs.Worker.template.spec`, `spec` for a Pod,
    /// `spec.trainer` for a TrainJob's nodes); empty for a change to the workload
    /// itself (a reshape of its sizes).
    pub site: String,
    pub what: String,
    pub why: String,
}

impl Change {
    /// A change not yet placed in a template; the writer of the template sets `site`.
    pub fn new(what: impl Into<String>, why: impl Into<String>) -> Self {
        Change {
            site: String::new(),
            what: what.into(),
            why: why.into(),
        }
    }
}

/// Everything the layout needs, read before any edit.
pub struct Plan<'a> {
    pub shape: &'a Shape<'a>,
    pub instance: &'a InstanceProfile,
    pub source: InstanceSource,
    pub eff: &'a Effective<'a>,
    /// Indices of the containers that get the GPU layout.
    pub containers: Vec<usize>,
    /// /dev/shm size (annotation, policy, instance default), already validated.
    pub shm_size: String,
    /// NCCL_DEBUG level from the annotation.
    pub nccl_debug: Option<String>,
    /// The namespace enforces a Pod Security level (baseline, restricted) that forbids
    /// hostIPC and added capabilities: the apiserver would reject a pod with them.
    pub host_access_forbidden: bool,
}

/// The /dev/shm size for a pod: annotation, else policy, else the instance default, which
/// is lowered to half the smallest memory limit of the pod's device containers when it
/// would not fit under it (tmpfs pages count against the limit: the shm-memory check
/// would warn about trainplace's own change). An annotation or policy size is written as
/// asked, and warned about if it does not fit.
pub fn shm_size(
    view: &PodView<'_>,
    eff: &Effective<'_>,
    instance: &InstanceProfile,
) -> Result<String, String> {
    if let Some(v) = view.annotation(SHM_SIZE) {
        crate::read::quantity::parse_bytes(v)?;
        return Ok(v.to_string());
    }
    if let Some(size) = &eff.defaults.shm_size {
        return Ok(size.clone());
    }
    let default = instance.shm_default.clone();
    let limit = view
        .device_containers()
        .filter_map(|c| view.memory_limit(c.index))
        .filter_map(|m| crate::read::quantity::parse_bytes(m).ok())
        .min();
    Ok(
        match (limit, crate::read::quantity::parse_bytes(&default)) {
            (Some(limit), Ok(bytes)) if bytes > limit => {
                format!("{}Mi", ((limit / 2) >> 20).max(1))
            }
            _ => default,
        },
    )
}
