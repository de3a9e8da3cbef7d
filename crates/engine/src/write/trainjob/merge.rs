//! Merging runtime patches and finding what one adds, in time linear in their size. A
//! TrainJob may carry many patches with long lists (up to the API server's 3 MiB
//! request limit), so list entries are found by name or by a fingerprint of their
//! content through hash maps, and every patch for one place is merged in one pass,
//! never one patch at a time over a list that keeps growing.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};

use serde_json::{Map, Value};

/// A hash of a JSON value that equal values share (object keys in any order).
fn fingerprint(v: &Value) -> u64 {
    fn feed(v: &Value, h: &mut DefaultHasher) {
        crate::budget::draw(PATCHES, 1);
        match v {
            Value::Null => 0u8.hash(h),
            Value::Bool(b) => (1u8, b).hash(h),
            Value::Number(n) => (2u8, n.to_string()).hash(h),
            Value::String(s) => (3u8, s).hash(h),
            Value::Array(a) => {
                (4u8, a.len()).hash(h);
                for x in a {
                    feed(x, h);
                }
            }
            Value::Object(m) => {
                (5u8, m.len()).hash(h);
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort_unstable();
                for k in keys {
                    k.hash(h);
                    feed(&m[k], h);
                }
            }
        }
    }
    let mut h = DefaultHasher::new();
    feed(v, &mut h);
    h.finish()
}

const PATCHES: &str = "spec.runtimePatches";

fn name(v: &Value) -> Option<&str> {
    v.get("name").and_then(Value::as_str)
}

/// Merge `patches`, in order, into `acc` the way list-of-named-objects patches read:
/// objects key by key, named list entries by name, other list entries appended when
/// new; a value of another shape replaces what was there.
pub(super) fn merge_all(acc: &mut Value, patches: &[&Value]) {
    let mut run: Vec<&Value> = Vec::new();
    for p in patches {
        let same = matches!(
            (&*acc, p),
            (Value::Object(_), Value::Object(_)) | (Value::Array(_), Value::Array(_))
        );
        if same {
            run.push(p);
            continue;
        }
        merge_run(acc, &run);
        run.clear();
        *acc = (*p).clone();
    }
    merge_run(acc, &run);
}

/// Merge `value` into `acc[key]` as a patch `{key: value}` would be merged.
pub(super) fn merge_field(acc: &mut Map<String, Value>, key: &str, value: &Value) {
    crate::budget::draw_len(PATCHES, 1);
    match acc.get_mut(key) {
        Some(slot) => merge_all(slot, &[value]),
        None => {
            acc.insert(key.to_string(), value.clone());
        }
    }
}

/// Patches all of `acc`'s own shape (objects into an object, arrays into an array).
fn merge_run(acc: &mut Value, run: &[&Value]) {
    if run.is_empty() {
        return;
    }
    match acc {
        Value::Object(a) => merge_objects(a, run),
        Value::Array(a) => merge_arrays(a, run),
        _ => {}
    }
}

fn merge_objects(acc: &mut Map<String, Value>, run: &[&Value]) {
    let keys: usize = run.iter().filter_map(|p| p.as_object()).map(Map::len).sum();
    crate::budget::draw_len(PATCHES, keys);
    // Each key's patches in order, keys in the order they first appear.
    let mut order: Vec<&String> = Vec::new();
    let mut by_key: HashMap<&String, Vec<&Value>> = HashMap::new();
    for p in run {
        for (k, v) in p.as_object().into_iter().flatten() {
            by_key
                .entry(k)
                .or_insert_with(|| {
                    order.push(k);
                    Vec::new()
                })
                .push(v);
        }
    }
    for k in order {
        let vals = &by_key[k];
        match acc.get_mut(k.as_str()) {
            Some(slot) => merge_all(slot, vals),
            None => {
                let mut first = vals[0].clone();
                merge_all(&mut first, &vals[1..]);
                acc.insert(k.clone(), first);
            }
        }
    }
}

fn merge_arrays(acc: &mut Vec<Value>, run: &[&Value]) {
    let entries: usize = run.iter().filter_map(|p| p.as_array()).map(Vec::len).sum();
    crate::budget::draw_len(PATCHES, acc.len() + entries);
    let mut named: HashMap<String, usize> = HashMap::new();
    let mut seen: HashMap<u64, Vec<usize>> = HashMap::new();
    for (i, e) in acc.iter().enumerate() {
        if let Some(n) = name(e) {
            named.entry(n.to_string()).or_insert(i);
        }
        seen.entry(fingerprint(e)).or_default().push(i);
    }
    let mut pending: Vec<(usize, Vec<&Value>)> = Vec::new();
    let mut pending_at: HashMap<usize, usize> = HashMap::new();
    for p in run {
        for v in p.as_array().into_iter().flatten() {
            if let Some(&i) = name(v).and_then(|n| named.get(n)) {
                let slot = *pending_at.entry(i).or_insert_with(|| {
                    pending.push((i, Vec::new()));
                    pending.len() - 1
                });
                pending[slot].1.push(v);
                continue;
            }
            let fp = fingerprint(v);
            let present = seen
                .get(&fp)
                .is_some_and(|at| at.iter().any(|&i| acc[i] == *v));
            if present {
                continue;
            }
            acc.push(v.clone());
            let i = acc.len() - 1;
            if let Some(n) = name(v) {
                named.insert(n.to_string(), i);
            }
            seen.entry(fp).or_default().push(i);
        }
    }
    for (i, vals) in pending {
        merge_all(&mut acc[i], &vals);
    }
}

/// What `after` adds to `base`: changed keys, recursively; new list entries.
pub(super) fn delta(after: &Value, base: &Value) -> Option<Value> {
    match (after, base) {
        (a, b) if a == b => None,
        (Value::Object(a), Value::Object(b)) => {
            let m: Map<String, Value> = a
                .iter()
                .filter_map(|(k, v)| match b.get(k) {
                    Some(bv) => delta(v, bv).map(|d| (k.clone(), d)),
                    None => Some((k.clone(), v.clone())),
                })
                .collect();
            (!m.is_empty()).then_some(Value::Object(m))
        }
        (Value::Array(a), Value::Array(b)) => {
            crate::budget::draw_len(PATCHES, a.len() + b.len());
            let mut seen: HashMap<u64, Vec<&Value>> = HashMap::new();
            for x in b {
                seen.entry(fingerprint(x)).or_default().push(x);
            }
            let new: Vec<Value> = a
                .iter()
                .filter(|v| !seen.get(&fingerprint(v)).is_some_and(|xs| xs.contains(v)))
                .cloned()
                .collect();
            (!new.is_empty()).then_some(Value::Array(new))
        }
        (a, _) => Some(a.clone()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{delta, merge_all};

    #[test]
    fn patches_merge_by_name_append_when_new_and_replace_other_shapes() {
        let mut acc =
            json!({"containers": [{"name": "node", "env": [{"name": "A", "value": "1"}]}]});
        let p1 = json!({"containers": [{"name": "node", "env": [{"name": "A", "value": "2"}, {"name": "B", "value": "3"}]}], "hostIPC": true});
        let p2 = json!({"containers": [{"name": "node", "env": [{"name": "B", "value": "4"}]}, {"name": "side"}], "hostIPC": false});
        let p3 = json!({"volumes": ["x", "x", "y"]});
        merge_all(&mut acc, &[&p1, &p2, &p3]);
        assert_eq!(
            acc,
            json!({"containers": [{"name": "node", "env": [{"name": "A", "value": "2"}, {"name": "B", "value": "4"}]}, {"name": "side"}],
                "hostIPC": false, "volumes": ["x", "x", "y"]})
        );
        let mut shape = json!({"a": [1]});
        merge_all(
            &mut shape,
            &[&json!({"a": {"b": 1}}), &json!({"a": {"c": 2}})],
        );
        assert_eq!(shape, json!({"a": {"b": 1, "c": 2}}));
        assert_eq!(
            delta(
                &json!({"l": [1, 2, {"k": 1}]}),
                &json!({"l": [{"k": 1}, 1]})
            ),
            Some(json!({"l": [2]}))
        );
    }
}
