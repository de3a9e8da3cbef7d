//! One hostile shape of `tests/work_bounds.rs`, reviewed once, on the system allocator,
//! for a heap profiler (heaptrack intercepts malloc; `hostile_shapes` runs on mimalloc,
//! which it cannot see):
//!
//!   cargo build --profile profiling -p trainplace-engine --example hostile_heap
//!   heaptrack target/profiling/examples/hostile_heap args Pod 3          # SHAPE KIND MIB [mutate]
//!   heaptrack_print --print-peaks 1 heaptrack.hostile_heap.*.zst
//!
//! The body is built before the review (its bytes are in the profile too).

use trainplace_engine::{Endpoint, Limits, Policy, review_bytes};

#[path = "../tests/shapes/mod.rs"]
mod shapes;

fn main() {
    let mut args = std::env::args().skip(1);
    let usage = "usage: hostile_heap SHAPE [KIND [MIB [mutate]]], e.g. hostile_heap args Pod 3";
    let Some(name) = args.next() else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let kind = args.next().unwrap_or_else(|| "Pod".into());
    let Some(mib) = args.next().map_or(Some(3), |m| m.parse::<usize>().ok()) else {
        eprintln!("{usage}: MIB is a whole number");
        std::process::exit(2);
    };
    let endpoint = match args.next().as_deref() {
        Some("mutate") => Endpoint::Mutate,
        _ => Endpoint::Validate,
    };
    let Some(shape) = shapes::all()
        .into_iter()
        .find(|s| s.name == name && s.label().starts_with(&format!("{kind}/")))
    else {
        eprintln!("no shape {kind}/{name} in tests/shapes/mod.rs");
        std::process::exit(2);
    };
    let body = shape.review(mib << 20);
    match review_bytes(
        &body,
        endpoint,
        &Policy::embedded(),
        None,
        None,
        &Limits::default(),
        None,
    ) {
        Ok(r) => eprintln!("{}: work {}", shape.label(), r.work.spent),
        Err(e) => {
            eprintln!("{}: {e}", shape.label());
            std::process::exit(1);
        }
    }
}
