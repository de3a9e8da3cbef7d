//! Dotted version numbers as printed by NCCL and aws-ofi-nccl (`2.27.3+cuda12.9`, `1.7.4-aws`).

use std::fmt;

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Version {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

impl Version {
    pub const fn new(major: u32, minor: u32, patch: u32) -> Self {
        Self {
            major,
            minor,
            patch,
        }
    }

    /// Reads the leading `major.minor[.patch]`; suffixes like `-aws` or `+cuda12.9` are
    /// build tags, not part of the ordering we need.
    pub fn parse_lenient(text: &str) -> Option<Self> {
        let text = text.trim().trim_start_matches(['v', 'V']);
        let mut parts = text.split('.').map(|part| {
            let digits: String = part.chars().take_while(char::is_ascii_digit).collect();
            digits.parse::<u32>().ok()
        });
        let major = parts.next()??;
        let minor = parts.next()??;
        let patch = parts.next().flatten().unwrap_or(0);
        Some(Self::new(major, minor, patch))
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

impl std::str::FromStr for Version {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::parse_lenient(text).ok_or_else(|| format!("`{text}` is not a version like 1.16.2"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_build_suffixes() {
        assert_eq!(
            Version::parse_lenient("1.7.4-aws"),
            Some(Version::new(1, 7, 4))
        );
        assert_eq!(
            Version::parse_lenient("2.27.3+cuda12.9"),
            Some(Version::new(2, 27, 3))
        );
        assert_eq!(Version::parse_lenient("2.1"), Some(Version::new(2, 1, 0)));
        assert_eq!(Version::parse_lenient("GIT-abc"), None);
        assert!(Version::new(1, 16, 0) > Version::new(1, 7, 4));
    }
}
