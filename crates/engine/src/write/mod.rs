//! Writing: the edits on the raw JSON, recorded as a JSON Patch (`edit`); the layout a
//! judged template's plan gives it (one pod per node, devices, shared
//! memory, NCCL env, tolerations, the zone), the reshape of a workload's sizes to whole
//! nodes, and a TrainJob's patches, all as edits on the raw JSON.

pub(crate) mod edit;
pub(crate) mod layout;
pub(crate) mod reshape;
pub(crate) mod trainjob;
pub(crate) mod zone_pin;
