//! Which instance types EC2 describes the network topology of, and how many network
//! layers it gives each: `DescribeInstanceTopology` and
//! `DescribeCapacityReservationTopology` answer only for the types the EC2 User Guide
//! lists (<https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-instance-topology-prerequisites.html>,
//! read 2026-11-28). For other types their `NetworkNodes` is empty.
//!
//! The node set is top-down: the first network node is layer 1, the broadest, and the
//! last is the bottom node the instance connects to
//! (<https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/how-ec2-instance-topology-works.html>).
//! The layer counts below are what `DescribeInstanceTopology` gives; for a Capacity
//! Reservation the same page says 1, 2 or 3 nodes, by the reservation's type and state.

/// The page the supported types and Regions come from.
pub const TOPOLOGY_PREREQUISITES_URL: &str =
    "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-instance-topology-prerequisites.html";

/// The page on what a node set means (top-down, the bottom node next to the instance).
pub const TOPOLOGY_HOW_IT_WORKS_URL: &str =
    "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/how-ec2-instance-topology-works.html";

/// Regions the prerequisites page names where `DescribeCapacityReservationTopology` is
/// not supported: Israel (Tel Aviv) and AWS GovCloud (US-West).
pub const NO_RESERVATION_TOPOLOGY_REGIONS: [&str; 2] = ["il-central-1", "us-gov-west-1"];

/// Types whose instance topology has three network nodes (layers 1 to 3).
const THREE_LAYERS: &[&str] = &[
    "g6e.xlarge",
    "g6e.2xlarge",
    "g6e.4xlarge",
    "g6e.8xlarge",
    "g6e.12xlarge",
    "g6e.16xlarge",
    "g6e.24xlarge",
    "g6e.48xlarge",
    "g7e.2xlarge",
    "g7e.4xlarge",
    "g7e.8xlarge",
    "g7e.12xlarge",
    "g7e.24xlarge",
    "g7e.48xlarge",
    "hpc6a.48xlarge",
    "hpc6id.32xlarge",
    "hpc7g.4xlarge",
    "hpc7g.8xlarge",
    "hpc7g.16xlarge",
    "hpc7a.12xlarge",
    "hpc7a.24xlarge",
    "hpc7a.48xlarge",
    "hpc7a.96xlarge",
    "hpc8a.96xlarge",
    "p3dn.24xlarge",
    "p4d.24xlarge",
    "p4de.24xlarge",
    "p5.48xlarge",
    "p5e.48xlarge",
    "p5en.48xlarge",
    "p6e-gb200.36xlarge",
    "trn1.2xlarge",
    "trn1.32xlarge",
    "trn1n.32xlarge",
    "trn2.48xlarge",
    "trn2u.48xlarge",
];

/// Types whose instance topology has four network nodes (layers 1 to 4).
const FOUR_LAYERS: &[&str] = &["p6-b200.48xlarge", "p6-b300.48xlarge"];

/// How many network layers EC2 describes for `instance_type`'s instances, or `None`
/// when the API does not support the type.
pub fn network_layers(instance_type: &str) -> Option<u8> {
    if FOUR_LAYERS.contains(&instance_type) {
        Some(4)
    } else if THREE_LAYERS.contains(&instance_type) {
        Some(3)
    } else {
        None
    }
}

/// Whether `DescribeCapacityReservationTopology` is offered in `region`.
pub fn reservation_topology_in(region: &str) -> bool {
    !NO_RESERVATION_TOPOLOGY_REGIONS.contains(&region)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_listed_types_and_no_others() {
        assert_eq!(network_layers("p5.48xlarge"), Some(3));
        assert_eq!(network_layers("trn2.48xlarge"), Some(3));
        assert_eq!(network_layers("p6-b200.48xlarge"), Some(4));
        // Not on the page: the small P5 size, older G types.
        assert_eq!(network_layers("p5.4xlarge"), None);
        assert_eq!(network_layers("g5.48xlarge"), None);
        assert_eq!(network_layers(""), None);
        assert!(!reservation_topology_in("il-central-1"));
        assert!(reservation_topology_in("us-east-1"));
    }
}
