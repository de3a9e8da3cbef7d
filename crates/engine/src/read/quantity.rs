//! Kubernetes resource quantities, as far as trainplace needs them: whole device counts
//! (`nvidia.com/gpu: 8` or `"8"`) and byte sizes (`128Gi`).

use serde_json::Value;

/// Parse a device count. Extended resources must be whole numbers.
pub fn parse_count(value: &Value) -> Result<u32, String> {
    match value {
        Value::Number(n) => n
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| format!("{n} is not a whole, non-negative device count")),
        Value::String(s) => {
            let t = s.trim();
            t.parse::<u32>()
                .map_err(|_| format!("{s:?} is not a whole, non-negative device count"))
        }
        other => Err(format!("{other} is not a quantity")),
    }
}

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
    use serde_json::json;

    #[test]
    fn counts() {
        assert_eq!(parse_count(&json!(8)), Ok(8));
        assert_eq!(parse_count(&json!("4")), Ok(4));
        assert!(parse_count(&json!(-1)).is_err());
        assert!(parse_count(&json!("0.5")).is_err());
        assert!(parse_count(&json!(1.5)).is_err());
        assert!(parse_count(&json!(null)).is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_bytes("64Gi"), Ok(64 << 30));
        assert_eq!(parse_bytes("1k"), Ok(1000));
        assert_eq!(parse_bytes("12"), Ok(12));
        assert!(parse_bytes("lots").is_err());
        assert!(parse_bytes("99999999999Ei").is_err());
    }
}
