//! How much checkpoint storage a job needs, and what it costs.
//!
//! A checkpoint of a model trained with mixed precision and Adam holds the model states:
//! the fp16/bf16 weights (2 bytes a parameter), and the fp32 weights, momentum and
//! variance (4 + 4 + 4): [`BYTES_PER_PARAM`] = 16 bytes a parameter, the "16Ψ bytes" of
//! model states in ZeRO, §3.1 (Rajbhandari et al., <https://arxiv.org/abs/1910.02054>).
//! With the model's size (`modelParamsBillions`), one checkpoint is
//! `params x 16 bytes`. Without it, one checkpoint is bounded by what the job holds in
//! accelerator memory (`GPUs x memory per GPU`): a safe but larger default, which the plan
//! says and tells how to narrow.
//!
//! The file system holds [`CHECKPOINTS_KEPT`] checkpoints (the last good one, the one
//! before it, the one being written), rounded up to a size FSx for Lustre PERSISTENT_2
//! SSD accepts: 1,200 GiB, 2,400 GiB, then multiples of 2,400 GiB (`StorageCapacity`,
//! <https://docs.aws.amazon.com/fsx/latest/APIReference/API_CreateFileSystem.html>).
//!
//! Price: PERSISTENT_2 SSD at 250 MB/s/TiB, [`USD_PER_GB_MONTH`] in us-east-1, billed per
//! GB-month and prorated by the second (<https://aws.amazon.com/fsx/lustre/pricing/>;
//! other regions differ: the docs list it among what to check by hand). The plan counts
//! it for the run's hours; the file system bills until it is deleted.

use trainplace_catalog::InstanceProfile;

use crate::plan::CapacityPlan;
use crate::request::Request;
use crate::shape::Shape;

/// Model-state bytes per parameter in a mixed-precision Adam checkpoint (ZeRO §3.1).
pub const BYTES_PER_PARAM: u64 = 16;
pub const CHECKPOINTS_KEPT: u64 = 3;
/// Runs at least this long get checkpoint storage even on-demand.
pub const LONG_RUN_HOURS: u32 = 24;
/// PERSISTENT_2 SSD capacities: 1,200, 2,400, then multiples of 2,400 GiB.
pub const FSX_MIN_GIB: u64 = 1200;
pub const FSX_STEP_GIB: u64 = 2400;
pub const THROUGHPUT_MBPS_PER_TIB: u32 = 250;
/// us-east-1 list price of PERSISTENT_2 SSD at 250 MB/s/TiB, per GB-month.
pub const USD_PER_GB_MONTH: f64 = 0.21;
/// Hours in the month FSx prices by (730: 8,760 / 12).
pub const HOURS_PER_MONTH: f64 = 730.0;
/// Accelerator memory assumed when the catalog has none for the type.
const FALLBACK_GIB_PER_ACCELERATOR: u64 = 96;
const GIB: u64 = 1 << 30;

/// Whether the plan gets checkpoint storage: Capacity Blocks (their end is a deadline)
/// and runs of at least [`LONG_RUN_HOURS`]; not nodes that exist (their cluster's storage
/// is its own).
pub fn applies(req: &Request, plan: &CapacityPlan) -> bool {
    match plan {
        CapacityPlan::Existing { .. } => false,
        CapacityPlan::CapacityBlock { .. } => true,
        _ => req.job_hours >= LONG_RUN_HOURS,
    }
}

/// The size of the checkpoint storage and how it was reached.
#[derive(Debug, Clone, PartialEq)]
pub struct Sizing {
    /// One checkpoint, GiB (rounded up).
    pub checkpoint_gib: u64,
    /// [`CHECKPOINTS_KEPT`] of them.
    pub needed_gib: u64,
    /// The FSx capacity that holds them.
    pub fsx_gib: u64,
    /// The arithmetic, for the plan's notes.
    pub formula: String,
    /// Whether the model's size was given (else the accelerator-memory bound).
    pub from_model: bool,
}

pub fn sizing(req: &Request, p: &InstanceProfile, shape: &Shape) -> Sizing {
    let (checkpoint_gib, what, from_model) = match req.model_params_billions {
        Some(b) => {
            let bytes = (b * 1e9).ceil() as u64 * BYTES_PER_PARAM;
            (
                bytes.div_ceil(GIB),
                format!(
                    "{b} B parameters x {BYTES_PER_PARAM} bytes (mixed-precision Adam states, ZeRO §3.1)"
                ),
                true,
            )
        }
        None => {
            let per = p
                .accelerator_memory_gi_b
                .map_or(FALLBACK_GIB_PER_ACCELERATOR, u64::from);
            let gpus = u64::from(shape.total_gpus);
            (
                gpus * per,
                format!(
                    "at most the job's accelerator memory, {gpus} x {per} GiB (no --model-params-billions given; with it, params x {BYTES_PER_PARAM} bytes)"
                ),
                false,
            )
        }
    };
    let needed_gib = CHECKPOINTS_KEPT * checkpoint_gib;
    let fsx_gib = fsx_capacity_gib(needed_gib);
    Sizing {
        checkpoint_gib,
        needed_gib,
        fsx_gib,
        formula: format!(
            "one checkpoint = {what} = {checkpoint_gib} GiB; {CHECKPOINTS_KEPT} kept = {needed_gib} GiB, rounded up to {fsx_gib} GiB (PERSISTENT_2 SSD: 1200, 2400, then multiples of 2400 GiB)"
        ),
        from_model,
    }
}

/// The smallest PERSISTENT_2 SSD capacity holding `gib`.
pub fn fsx_capacity_gib(gib: u64) -> u64 {
    if gib <= FSX_MIN_GIB {
        FSX_MIN_GIB
    } else {
        gib.div_ceil(FSX_STEP_GIB) * FSX_STEP_GIB
    }
}

/// GB (10^9 bytes, what FSx prices) in a GiB (what it sizes in).
const GB_PER_GIB: f64 = 1.073_741_824;

/// A month of `gib`.
pub fn usd_per_month(gib: u64) -> f64 {
    round2(gib as f64 * GB_PER_GIB * USD_PER_GB_MONTH)
}

/// What `gib` costs over `hours`.
pub fn usd_for_hours(gib: u64, hours: u32) -> f64 {
    round2(gib as f64 * GB_PER_GIB * USD_PER_GB_MONTH * f64::from(hours) / HOURS_PER_MONTH)
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}
