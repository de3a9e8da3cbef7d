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

/// A zone name (not a zone id like `use1-az1`) of `region`: the region plus one letter
/// (an Availability Zone), or a Local Zone of it, `region-<location>-<n><letter>` such as
/// `us-east-1-dfw-2a`, the Dallas Local Zone where P6e-GB200 UltraServer Capacity Blocks
/// are sold (<https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-launch.html>;
/// names: <https://docs.aws.amazon.com/local-zones/latest/ug/available-local-zones.html>).
pub fn is_zone_of(zone: &str, region: &str) -> bool {
    let Some(rest) = zone.strip_prefix(region) else {
        return false;
    };
    if rest.len() == 1 {
        return rest.chars().all(|c| c.is_ascii_lowercase());
    }
    is_local_zone_suffix(rest)
}

/// `-<location>-<digits><letter>`: a Local Zone's part after its region.
fn is_local_zone_suffix(rest: &str) -> bool {
    let mut parts = rest.strip_prefix('-').unwrap_or("").split('-');
    let (Some(location), Some(tail), None) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    let letter = tail.chars().last();
    let digits = &tail[..tail.len().saturating_sub(1)];
    (2..=4).contains(&location.len())
        && location.chars().all(|c| c.is_ascii_lowercase())
        && !digits.is_empty()
        && digits.chars().all(|c| c.is_ascii_digit())
        && letter.is_some_and(|c| c.is_ascii_lowercase())
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

#[cfg(test)]
mod local_zone_tests {
    use super::*;

    #[test]
    fn local_zones_belong_to_their_region() {
        assert!(is_zone_of("us-east-1-dfw-2a", "us-east-1"));
        assert_eq!(region_of("us-east-1-dfw-2a"), Some("us-east-1"));
        assert!(is_zone_of("us-east-1a", "us-east-1"));
        for bad in [
            "us-east-1-dfw",
            "us-east-1-dfw-a",
            "us-east-1-DFW-2a",
            "us-east-1-dfw-2a-x",
            "us-east-1ab",
        ] {
            assert!(!is_zone_of(bad, "us-east-1"), "{bad}");
        }
        // Not us-east-1's zone through a prefix of another region's name.
        assert!(!is_zone_of("us-east-12a", "us-east-1"));
    }
}
