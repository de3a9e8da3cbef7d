//! Real AWS data as the aws CLI prints it: Capacity Block offerings, the account's
//! capacity reservations and instance types.
//! Parsed field by field so a malformed document names the entry and the field.

pub mod instance_types;
pub mod offerings;
pub mod reservations;

use serde_json::Value;

use crate::error::{InputError, InputSource};

/// The array under `key` in a CLI output document.
fn top_array<'a>(
    doc: &'a Value,
    key: &str,
    source: InputSource,
) -> Result<&'a [Value], InputError> {
    match doc.get(key) {
        Some(Value::Array(items)) => Ok(items),
        Some(_) => Err(InputError::new(source, key, "must be an array")),
        None => Err(InputError::new(
            source,
            key,
            "missing (is this the aws CLI's JSON output?)",
        )),
    }
}

/// Field access that reports `Key[i].Field` paths.
struct Entry<'a> {
    value: &'a Value,
    path: String,
    source: InputSource,
}

impl<'a> Entry<'a> {
    fn new(
        value: &'a Value,
        key: &str,
        index: usize,
        source: InputSource,
    ) -> Result<Self, InputError> {
        let path = format!("{key}[{index}]");
        if !value.is_object() {
            return Err(InputError::new(source, path, "must be an object"));
        }
        Ok(Self {
            value,
            path,
            source,
        })
    }

    fn err(&self, field: &str, message: impl Into<String>) -> InputError {
        InputError::new(self.source, format!("{}.{field}", self.path), message)
    }

    fn opt(&self, field: &str) -> Option<&'a Value> {
        self.value.get(field).filter(|v| !v.is_null())
    }

    fn str(&self, field: &str) -> Result<&'a str, InputError> {
        match self.opt(field) {
            Some(Value::String(s)) if !s.is_empty() => Ok(s),
            Some(Value::String(_)) => Err(self.err(field, "is empty")),
            Some(_) => Err(self.err(field, "must be a string")),
            None => Err(self.err(field, "missing")),
        }
    }

    fn u32(&self, field: &str) -> Result<u32, InputError> {
        match self.opt(field) {
            Some(v) => v
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| self.err(field, format!("must be a non-negative integer, got {v}"))),
            None => Err(self.err(field, "missing")),
        }
    }

    fn child(&self, field: &str) -> Option<Entry<'a>> {
        self.opt(field).map(|value| Entry {
            value,
            path: format!("{}.{field}", self.path),
            source: self.source,
        })
    }
}
