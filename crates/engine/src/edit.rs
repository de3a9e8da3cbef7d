//! In-place edits of a raw JSON object that record themselves as RFC 6902 `add`
//! operations. The webhook owns the object it was sent, so the layout is written
//! straight into it: no clone of the object and no tree diff in the hot path. Edits
//! only add (missing keys, appended list entries), so user values are never replaced.

use std::borrow::Cow;

use serde_json::{Map, Value};

use crate::json::{child_pointer, unescape};

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
    /// Each addition looks up its own ancestors (nearest first) among the objects and
    /// arrays recorded so far, so folding costs the pointer's depth per operation, not
    /// the number of operations before it (a pod of many containers records thousands).
    pub fn into_patch(self) -> json_patch::Patch {
        let mut out: Vec<(Op, String, Value)> = Vec::with_capacity(self.0.len());
        // Pointer of each recorded object or array -> its entries in `out`, latest last.
        let mut containers: foldhash::HashMap<String, Vec<usize>> = Default::default();
        'next: for (op, path, mut value) in self.0 {
            if op == Op::Add && !containers.is_empty() {
                for (cut, _) in path.rmatch_indices('/') {
                    let (ancestor, rest) = path.split_at(cut);
                    let Some(found) = containers.get(ancestor) else {
                        continue;
                    };
                    for &i in found.iter().rev() {
                        match insert_under(&mut out[i].2, rest, value) {
                            Ok(()) => continue 'next,
                            Err(back) => value = back,
                        }
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
