//! Known AWS regions and the zone-name check. Source: AWS "Regions and Zones"
//! documentation (commercial + GovCloud regions), mid-2026. A region missing here
//! is rejected with the list, so a typo never produces a config for nowhere.

pub const REGIONS: &[&str] = &[
    "us-east-1",
    "us-east-2",
    "us-west-1",
    "us-west-2",
    "af-south-1",
    "ap-east-1",
    "ap-east-2",
    "ap-south-1",
    "ap-south-2",
    "ap-northeast-1",
    "ap-northeast-2",
    "ap-northeast-3",
    "ap-southeast-1",
    "ap-southeast-2",
    "ap-southeast-3",
    "ap-southeast-4",
    "ap-southeast-5",
    "ap-southeast-7",
    "ca-central-1",
    "ca-west-1",
    "eu-central-1",
    "eu-central-2",
    "eu-west-1",
    "eu-west-2",
    "eu-west-3",
    "eu-south-1",
    "eu-south-2",
    "eu-north-1",
    "il-central-1",
    "me-south-1",
    "me-central-1",
    "mx-central-1",
    "sa-east-1",
    "us-gov-east-1",
    "us-gov-west-1",
];

pub fn is_known_region(name: &str) -> bool {
    REGIONS.contains(&name)
}

/// A zone name (not a zone id like `use1-az1`) of `region`: the region plus one letter.
pub fn is_zone_of(zone: &str, region: &str) -> bool {
    zone.strip_prefix(region)
        .is_some_and(|rest| rest.len() == 1 && rest.chars().all(|c| c.is_ascii_lowercase()))
}

/// The region a zone name belongs to, when it is a known region's zone.
pub fn region_of(zone: &str) -> Option<&'static str> {
    REGIONS.iter().copied().find(|r| is_zone_of(zone, r))
}

/// A second zone for the cluster's VPC: eksctl needs at least two zones for a cluster,
/// while the GPU nodegroup stays in one. Prefer one the user allowed.
pub fn companion_zone(zone: &str, region: &str, allowed: &[String]) -> String {
    if let Some(other) = allowed.iter().find(|z| z.as_str() != zone) {
        return other.clone();
    }
    let letter = if zone.ends_with('a') { 'b' } else { 'a' };
    format!("{region}{letter}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zones_belong_to_their_region() {
        assert!(is_zone_of("us-east-1a", "us-east-1"));
        assert!(!is_zone_of("us-east-2a", "us-east-1"));
        assert!(!is_zone_of("use1-az1", "us-east-1"));
        assert_eq!(companion_zone("us-east-1a", "us-east-1", &[]), "us-east-1b");
        assert_eq!(companion_zone("us-east-1c", "us-east-1", &[]), "us-east-1a");
    }
}
