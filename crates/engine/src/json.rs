//! Small helpers for reading and editing raw JSON objects without re-serialising
//! typed structs (unknown fields must survive untouched).

use serde_json::{Map, Value};

/// `obj[key]` as an object, created empty when missing. Returns `None` when the key
/// holds something other than an object (we never overwrite user data).
pub fn object_at<'a>(obj: &'a mut Value, key: &str) -> Option<&'a mut Map<String, Value>> {
    let map = obj.as_object_mut()?;
    let slot = map
        .entry(key.to_string())
        .or_insert_with(|| Value::Object(Map::new()));
    if slot.is_null() {
        *slot = Value::Object(Map::new());
    }
    slot.as_object_mut()
}

/// `obj[key]` as an array, created empty when missing or null.
pub fn array_at<'a>(obj: &'a mut Value, key: &str) -> Option<&'a mut Vec<Value>> {
    let map = obj.as_object_mut()?;
    let slot = map
        .entry(key.to_string())
        .or_insert_with(|| Value::Array(Vec::new()));
    if slot.is_null() {
        *slot = Value::Array(Vec::new());
    }
    slot.as_array_mut()
}

/// Walk `keys` through nested objects, creating empty objects on the way.
pub fn object_path<'a>(obj: &'a mut Value, keys: &[&str]) -> Option<&'a mut Value> {
    let mut cur = obj;
    for key in keys {
        object_at(cur, key)?;
        cur = cur.get_mut(*key)?;
    }
    Some(cur)
}

/// A string at `keys`, if every step exists and the leaf is a string.
pub fn str_at<'a>(obj: &'a Value, keys: &[&str]) -> Option<&'a str> {
    let mut cur = obj;
    for key in keys {
        cur = cur.get(*key)?;
    }
    cur.as_str()
}

/// Entries of the array at `keys`, or an empty slice.
pub fn items<'a>(obj: &'a Value, keys: &[&str]) -> &'a [Value] {
    let mut cur = obj;
    for key in keys {
        match cur.get(*key) {
            Some(v) => cur = v,
            None => return &[],
        }
    }
    cur.as_array().map(Vec::as_slice).unwrap_or(&[])
}

/// Escape one JSON Pointer token (RFC 6901).
pub fn escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}
