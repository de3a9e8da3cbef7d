//! Byte sizes as Kubernetes writes them (`128Gi`, `500M`, `1073741824`): the catalog's
//! /dev/shm defaults, and the engine's sizes, read one way.

const BINARY: [(&str, u64); 6] = [
    ("Ki", 1 << 10),
    ("Mi", 1 << 20),
    ("Gi", 1 << 30),
    ("Ti", 1 << 40),
    ("Pi", 1 << 50),
    ("Ei", 1 << 60),
];
const DECIMAL: [(&str, u64); 6] = [
    ("k", 1_000),
    ("M", 1_000_000),
    ("G", 1_000_000_000),
    ("T", 1_000_000_000_000),
    ("P", 1_000_000_000_000_000),
    ("E", 1_000_000_000_000_000_000),
];

/// Parse a byte quantity such as `64Gi`, `500M` or `1073741824` into bytes.
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let (digits, mult) = BINARY
        .iter()
        .chain(DECIMAL.iter())
        .find_map(|(suffix, mult)| t.strip_suffix(suffix).map(|d| (d, *mult)))
        .unwrap_or((t, 1));
    let n: u64 = digits.parse().map_err(|_| {
        format!("{text:?} is not a size; use a whole number with an optional suffix like 64Gi")
    })?;
    n.checked_mul(mult)
        .ok_or_else(|| format!("{text:?} is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_bytes("64Gi"), Ok(64 << 30));
        assert_eq!(parse_bytes("1k"), Ok(1000));
        assert_eq!(parse_bytes("12"), Ok(12));
        assert!(parse_bytes("lots").is_err());
        assert!(parse_bytes("99999999999Ei").is_err());
    }
}
