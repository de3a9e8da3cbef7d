//! Kubernetes resource quantities, as far as trainplace needs them: whole device counts
//! (`nvidia.com/gpu: 8` or `"8"`) and byte sizes (`128Gi`).

use serde_json::Value;

pub use trainplace_catalog::quantity::parse_bytes;

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
}
