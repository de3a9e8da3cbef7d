//! In-place edits of a raw JSON object that record themselves as RFC 6902 `add`
//! operations. The webhook owns the object it was sent, so the layout is written
//! straight into it: no clone of the object and no tree diff in the hot path. Edits
//! only add (missing keys, appended list entries), so user values are never replaced.

use std::borrow::Cow;

use serde_json::{Map, Value};

use crate::read::json::{child_pointer, unescape};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Add,
    /// Only for trainplace's own annotation.
    Replace,
}

/// The recorded operations, in application order.
#[derive(Debug, Default)]
pub struct Ops(Vec<(Op, String, Value)>);

/// A place in the object being edited, with its JSON Pointer.
pub struct Cursor<'v> {
    pub value: &'v mut Value,
    pub ptr: String,
}

impl<'v> Cursor<'v> {
    pub fn root(value: &'v mut Value, ptr: &str) -> Self {
        Cursor {
            value,
            ptr: ptr.to_string(),
        }
    }

    /// An existing child by key or index; never creates.
    pub fn get(self, key: &str) -> Option<Cursor<'v>> {
        let value = match self.value {
            Value::Object(m) => m.get_mut(key)?,
            Value::Array(a) => a.get_mut(key.parse::<usize>().ok()?)?,
            _ => return None,
        };
        let ptr = child_pointer(&self.ptr, key);
        Some(Cursor { value, ptr })
    }

    /// An existing array entry; never creates.
    pub fn at(self, index: usize) -> Option<Cursor<'v>> {
        let value = self.value.as_array_mut()?.get_mut(index)?;
        let ptr = child_pointer(&self.ptr, itoa::Buffer::new().format(index));
        Some(Cursor { value, ptr })
    }

    fn ensure(self, key: &str, empty: fn() -> Value, ops: &mut Ops) -> Option<Cursor<'v>> {
        let map = self.value.as_object_mut()?;
        let ptr = child_pointer(&self.ptr, key);
        let slot = match map.get(key) {
            Some(v) if !v.is_null() => map.get_mut(key)?,
            Some(_) => {
                // An explicit null is the user's value; leave it rather than replace it.
                return None;
            }
            None => {
                ops.0.push((Op::Add, ptr.clone(), empty()));
                map.entry(key.to_string()).or_insert_with(empty)
            }
        };
        Some(Cursor { value: slot, ptr })
    }

    /// The object at `key`, added empty when missing. `None` if it holds something else.
    pub fn object(self, key: &str, ops: &mut Ops) -> Option<Cursor<'v>> {
        self.ensure(key, || Value::Object(Map::new()), ops)
            .filter(|c| c.value.is_object())
    }

    /// The array at `key`, added empty when missing. `None` if it holds something else.
    pub fn array(self, key: &str, ops: &mut Ops) -> Option<Cursor<'v>> {
        self.ensure(key, || Value::Array(Vec::new()), ops)
            .filter(|c| c.value.is_array())
    }

    /// Walk nested objects, adding the missing ones.
    pub fn objects(self, keys: &[&str], ops: &mut Ops) -> Option<Cursor<'v>> {
        keys.iter().try_fold(self, |c, k| c.object(k, ops))
    }

    /// Append to this array.
    pub fn push(&mut self, v: Value, ops: &mut Ops) {
        if let Value::Array(a) = self.value {
            let ptr = child_pointer(&self.ptr, itoa::Buffer::new().format(a.len()));
            ops.0.push((Op::Add, ptr, v.clone()));
            a.push(v);
        }
    }

    /// Set `key` in this object when it is missing; returns whether it was added.
    pub fn insert_missing(&mut self, key: &str, v: Value, ops: &mut Ops) -> bool {
        match self.value {
            Value::Object(m) if !m.contains_key(key) => {
                ops.0
                    .push((Op::Add, child_pointer(&self.ptr, key), v.clone()));
                m.insert(key.to_string(), v);
                true
            }
            _ => false,
        }
    }

    /// Set `key` in this object, replacing any value (used only for trainplace's own
    /// annotation).
    pub fn set(&mut self, key: &str, v: Value, ops: &mut Ops) {
        if let Value::Object(m) = self.value {
            let ptr = child_pointer(&self.ptr, key);
            let op = if m.contains_key(key) {
                Op::Replace
            } else {
                Op::Add
            };
            ops.0.push((op, ptr, v.clone()));
            m.insert(key.to_string(), v);
        }
    }
}

impl Ops {
    /// Record a replacement the caller already made (reshape only).
    pub fn replace(&mut self, ptr: &str, v: Value) {
        self.0.push((Op::Replace, ptr.to_string(), v));
    }

    /// Fold additions into containers added earlier in the same patch, so a new
    /// `affinity` arrives as one operation, then build the JSON Patch.
    ///
    /// Each addition looks up its own ancestors among the objects and arrays recorded
    /// so far and tries them latest first, as a scan back over every earlier operation
    /// would, but at the cost of the pointer's depth per operation rather than the
    /// number of operations before it (a pod of many containers records thousands).
    pub fn into_patch(self) -> json_patch::Patch {
        crate::budget::draw_len("the layout patch", self.0.len());
        let mut out: Vec<(Op, String, Value)> = Vec::with_capacity(self.0.len());
        // Pointer of each recorded object or array -> its entries in `out`.
        let mut containers: foldhash::HashMap<String, Vec<usize>> = Default::default();
        let mut candidates: Vec<(usize, usize)> = Vec::new();
        'next: for (op, path, mut value) in self.0 {
            if op == Op::Add && !containers.is_empty() {
                candidates.clear();
                for (cut, _) in path.rmatch_indices('/') {
                    if let Some(found) = containers.get(&path[..cut]) {
                        candidates.extend(found.iter().map(|&i| (i, cut)));
                    }
                }
                candidates.sort_unstable_by_key(|&(i, _)| std::cmp::Reverse(i));
                for &(i, cut) in &candidates {
                    match insert_under(&mut out[i].2, &path[cut..], value) {
                        Ok(()) => continue 'next,
                        Err(back) => value = back,
                    }
                }
            }
            if value.is_object() || value.is_array() {
                containers.entry(path.clone()).or_default().push(out.len());
            }
            out.push((op, path, value));
        }
        let ops = out
            .into_iter()
            .filter_map(|(op, path, value)| {
                // Every pointer here was built from escaped tokens, so parsing succeeds.
                let path = json_patch::jsonptr::PointerBuf::parse(path).ok()?;
                Some(match op {
                    Op::Add => {
                        json_patch::PatchOperation::Add(json_patch::AddOperation { path, value })
                    }
                    Op::Replace => {
                        json_patch::PatchOperation::Replace(json_patch::ReplaceOperation {
                            path,
                            value,
                        })
                    }
                })
            })
            .collect();
        json_patch::Patch(ops)
    }
}

/// Put `value` at relative pointer `rest` inside `container` (which we created), or
/// hand it back when that place is missing or taken.
fn insert_under(container: &mut Value, rest: &str, value: Value) -> Result<(), Value> {
    let tokens: Vec<Cow<'_, str>> = rest[1..].split('/').map(unescape).collect();
    let Some((last, parents)) = tokens.split_last() else {
        return Err(value);
    };
    let mut cur = container;
    for t in parents {
        let next = match cur {
            Value::Object(m) => m.get_mut(t.as_ref()),
            Value::Array(a) => t.parse::<usize>().ok().and_then(|i| a.get_mut(i)),
            _ => None,
        };
        match next {
            Some(v) => cur = v,
            None => return Err(value),
        }
    }
    match cur {
        Value::Object(m) if !m.contains_key(last.as_ref()) => {
            m.insert(last.to_string(), value);
            Ok(())
        }
        Value::Array(a) if last.parse::<usize>().ok() == Some(a.len()) => {
            a.push(value);
            Ok(())
        }
        _ => Err(value),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn add(ops: &mut Ops, path: &str, value: Value) {
        ops.0.push((Op::Add, path.to_string(), value));
    }

    #[test]
    fn additions_fold_into_containers_added_earlier() {
        let mut ops = Ops::default();
        add(&mut ops, "/spec/affinity", json!({}));
        add(&mut ops, "/spec/tolerations", json!([]));
        add(&mut ops, "/spec/affinity/podAffinity", json!({}));
        add(&mut ops, "/spec/affinity/podAffinity/required", json!([]));
        add(&mut ops, "/spec/tolerations/0", json!({"key": "a"}));
        add(
            &mut ops,
            "/spec/affinity/podAffinity/required/0",
            json!({"x": 1}),
        );
        // Not under anything added here: stays its own operation.
        add(&mut ops, "/spec/containers/0/env/3", json!({"name": "N"}));
        // Under a container, but not at its end: cannot fold, stays.
        add(&mut ops, "/spec/tolerations/5", json!({"key": "b"}));
        let patch = serde_json::to_value(ops.into_patch()).unwrap();
        assert_eq!(
            patch,
            json!([
                {"op": "add", "path": "/spec/affinity",
                    "value": {"podAffinity": {"required": [{"x": 1}]}}},
                {"op": "add", "path": "/spec/tolerations", "value": [{"key": "a"}]},
                {"op": "add", "path": "/spec/containers/0/env/3", "value": {"name": "N"}},
                {"op": "add", "path": "/spec/tolerations/5", "value": {"key": "b"}},
            ])
        );
    }

    #[test]
    fn the_latest_container_takes_the_addition_even_when_a_nearer_one_is_older() {
        let mut ops = Ops::default();
        add(&mut ops, "/a/b", json!({}));
        ops.replace("/a", json!({"b": {}}));
        add(&mut ops, "/a/b/c", json!(1));
        let patch = ops.into_patch();
        // Folding into the older `/a/b` would be undone by the replace that follows it.
        let mut doc = json!({"a": {}});
        json_patch::patch(&mut doc, &patch).unwrap();
        assert_eq!(doc, json!({"a": {"b": {"c": 1}}}));
        assert_eq!(patch.0.len(), 2, "{patch:?}");
    }
}
