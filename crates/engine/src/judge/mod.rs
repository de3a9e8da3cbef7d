//! Judging: what a pod template is (classify, with the instance types its selection
//! reaches), the rules and their findings, the per-template judgement, the layout plan, the
//! bounds every walk stays within, strict mode, the checks that span a whole job (zones,
//! placement, NVLink domains, Capacity Block ends), the sizes an UPDATE compares findings
//! by, which controller made a pod and what a trusted controller made from an admitted
//! template, and the verdict that gathers them.

pub mod bounds;
pub(crate) mod capacity_block;
pub(crate) mod classify;
pub(crate) mod finding;
pub(crate) mod judgement;
pub(crate) mod nvlink;
pub(crate) mod owner;
pub(crate) mod placement;
pub(crate) mod plan;
pub(crate) mod rules;
pub(crate) mod selection;
pub(crate) mod sizes;
pub(crate) mod split_zones;
pub(crate) mod strict;
pub(crate) mod upstream;
pub(crate) mod verdict;
