//! The identity of a plan's purchases: the tag `aws-cli.sh` puts on the Capacity Blocks
//! it buys, by which the Karpenter node class selects them and a rerun finds them, and
//! the plan id in it.

use crate::recommend::{CapacityPlan, Recommendation};

/// Tag `aws-cli.sh` puts on purchased Capacity Blocks so the node class finds them, and
/// by which a rerun finds the blocks an earlier run of the same plan bought.
pub const RESERVATION_TAG: &str = "trainplace.io/reservation";

/// The tag's value: the cluster and job names and, for a plan with chosen blocks, the
/// plan's id ([`plan_id`]). Names alone are not a plan's identity: two
/// plans with the default names would find, and reuse, each other's blocks.
pub fn reservation_tag_value(rec: &Recommendation) -> String {
    let names = format!("{}-{}", rec.request.names.cluster, rec.request.names.job);
    match plan_id(rec) {
        Some(id) => format!("{names}-{id}"),
        None => names,
    }
}

/// The plan's id: 12 hex digits of a 64-bit FNV-1a hash of what makes a purchase this
/// plan's (region, namespace, cluster and job names, instance type, and the chosen
/// offerings' ids in order), stable across reruns of `trainplace advise` with the same
/// choice. `None` until blocks are chosen. FNV-1a (<http://www.isthe.com/chongo/tech/comp/fnv/>)
/// tells plans apart; it is no secret and needs none.
pub fn plan_id(rec: &Recommendation) -> Option<String> {
    let CapacityPlan::CapacityBlock {
        blocks: Some(plan), ..
    } = &rec.capacity
    else {
        return None;
    };
    let names = &rec.request.names;
    let mut parts = vec![
        rec.request.region.as_str(),
        names.namespace.as_str(),
        names.cluster.as_str(),
        names.job.as_str(),
        rec.instance.name.as_str(),
    ];
    parts.extend(plan.offerings.iter().map(|o| o.id.as_str()));
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in parts.join("\n").bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    Some(format!("{:012x}", hash >> 16))
}
