// temporary: one shape at 3 MiB, system allocator, for heaptrack
use trainplace_engine::{Endpoint, Limits, Policy, review_bytes};
#[path = "../tests/shapes/mod.rs"]
mod shapes;
fn main() {
    let only = std::env::args().nth(1).unwrap();
    let kind = std::env::args().nth(2).unwrap_or("Pod".into());
    let mib: usize = std::env::args()
        .nth(3)
        .map(|s| s.parse().unwrap())
        .unwrap_or(3);
    let endpoint = match std::env::args().nth(4).as_deref() {
        Some("mutate") => Endpoint::Mutate,
        _ => Endpoint::Validate,
    };
    let policy = Policy::embedded();
    let limits = Limits::default();
    let shape = shapes::all()
        .into_iter()
        .find(|s| s.name == only && s.label().starts_with(&kind))
        .unwrap();
    let body = shape.review(mib << 20);
    let r = review_bytes(&body, endpoint, &policy, None, None, &limits, None).unwrap();
    eprintln!("{} work {}", shape.label(), r.work.spent);
}
