//! The answer time of each hostile shape of `tests/work_bounds.rs` at 1 MiB and 3 MiB:
//! the body built once, then `review_bytes` timed (the best of `RUNS`), with the work
//! it counted and how it ended. A normal review (the bench's ~10 KB pod) is timed too.
//!
//!   cargo build --release -p trainplace-engine --example hostile_shapes
//!   target/release/examples/hostile_shapes                  # every shape, /validate
//!   target/release/examples/hostile_shapes var_refs mutate  # one shape, /mutate
//!
//! The last line is the process's peak RSS (`VmHWM`): run one shape per process to
//! read that shape's.
//!
//!   HOSTILE_WRITE=DIR target/release/examples/hostile_shapes
//!
//! writes each shape's AdmissionReview at 1 and 3 MiB to `DIR/KIND_FIELD-MIB.json`
//! instead (what scripts/bench-hostile.sh sends to a running webhook).

use std::time::{Duration, Instant};

use trainplace_engine::{Endpoint, Limits, Outcome, Policy, review_bytes};

#[path = "../tests/shapes/mod.rs"]
mod shapes;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const RUNS: usize = 3;
const MIB: usize = 1 << 20;

fn main() {
    let only = std::env::args().nth(1).filter(|a| a != "-");
    let endpoint = match std::env::args().nth(2).as_deref() {
        Some("mutate") => Endpoint::Mutate,
        _ => Endpoint::Validate,
    };
    if let Some(dir) = std::env::var_os("HOSTILE_WRITE") {
        for shape in shapes::all()
            .iter()
            .filter(|s| only.as_deref().is_none_or(|o| o == s.name))
        {
            for mib in [1, 3] {
                let path = std::path::Path::new(&dir).join(format!(
                    "{}-{mib}.json",
                    shape.label().replace(['/', ' '], "_")
                ));
                std::fs::write(&path, shape.review(mib * MIB)).expect("write the review");
            }
        }
        return;
    }
    let policy = Policy::embedded();
    let limits = Limits::default();
    println!(
        "{:<30} {:>5} {:>9} {:>12} ending",
        "shape", "MiB", "ms", "work"
    );
    for shape in shapes::all()
        .iter()
        .filter(|s| only.as_deref().is_none_or(|o| o == s.name))
    {
        for mib in [1, 3] {
            let body = shape.review(mib * MIB);
            let mut best = Duration::MAX;
            let mut last = None;
            for _ in 0..RUNS {
                let started = Instant::now();
                let r = review_bytes(&body, endpoint, &policy, None, None, &limits, None)
                    .expect("JSON");
                best = best.min(started.elapsed());
                last = Some(r);
            }
            let r = last.expect("one run");
            let ending = match &r.outcome {
                Outcome::Judged { .. } => "verdict",
                Outcome::OverBudget { .. } => "over budget",
                Outcome::TooBigToRead { .. } => "too big to read",
                Outcome::BadObject { .. } => "refused",
                _ => "other",
            };
            println!(
                "{:<30} {:>5} {:>9.1} {:>12} {ending}",
                shape.label(),
                mib,
                best.as_secs_f64() * 1e3,
                r.work.spent
            );
        }
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    if let Some(line) = status.lines().find(|l| l.starts_with("VmHWM")) {
        println!("peak RSS {}", line.trim_start_matches("VmHWM:").trim());
    }
}
