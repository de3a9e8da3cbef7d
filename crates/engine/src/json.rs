//! Small helpers for reading raw JSON objects (edits go through `edit::Cursor`).

use serde_json::Value;

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
