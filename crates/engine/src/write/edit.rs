//! In-place edits of a raw JSON object that record themselves as RFC 6902 `add`
//! operations. The webhook owns the object it was sent, so the layout is written
//! straight into it: no clone of the object and no tree diff in the hot path. Edits
//! only add (missing keys, appended list entries), so user values are never replaced.

use serde_json::{Map, Value};

use crate::judge::verdict::{Op, Patch};
use crate::read::json::child_pointer;

/// The recorded operations, in application order: their places only, as the values
/// are the object's ([`Patch`]).
#[derive(Debug, Default)]
pub struct Ops(Vec<(Op, String)>);

/// An object of `members`, moved in. (`json!` serializes each value it is given, so a
/// value built beforehand and put in through it is copied: a long list, or a pod
/// affinity term in every review.)
pub fn owned_object<const N: usize>(members: [(&str, Value); N]) -> Value {
    Value::Object(
        members
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    )
}

/// A place in the object being edited, with its JSON Pointer.
pub struct Cursor<'v> {
    pub value: &'v mut Value,
    /// Empty inside a place this patch added, where nothing is recorded.
    ptr: String,
    /// Inside a place this patch added: what is written here is in that place's
    /// value ([`Patch`]), so it is not recorded again.
    fresh: bool,
}

impl<'v> Cursor<'v> {
    pub fn root(value: &'v mut Value, ptr: &str) -> Self {
        Cursor {
            value,
            ptr: ptr.to_string(),
            fresh: false,
        }
    }

    /// The same place, borrowed for a while.
    pub fn reborrow(&mut self) -> Cursor<'_> {
        Cursor {
            value: &mut *self.value,
            ptr: self.ptr.clone(),
            fresh: self.fresh,
        }
    }

    /// An existing child by key or index; never creates.
    pub fn get(self, key: &str) -> Option<Cursor<'v>> {
        let value = match self.value {
            Value::Object(m) => m.get_mut(key)?,
            Value::Array(a) => a.get_mut(key.parse::<usize>().ok()?)?,
            _ => return None,
        };
        Some(Cursor {
            value,
            ptr: child(&self.ptr, self.fresh, key),
            fresh: self.fresh,
        })
    }

    /// An existing array entry; never creates.
    pub fn at(self, index: usize) -> Option<Cursor<'v>> {
        let value = self.value.as_array_mut()?.get_mut(index)?;
        Some(Cursor {
            value,
            ptr: child(&self.ptr, self.fresh, itoa::Buffer::new().format(index)),
            fresh: self.fresh,
        })
    }

    fn ensure(self, key: &str, empty: fn() -> Value, ops: &mut Ops) -> Option<Cursor<'v>> {
        let added = match self.value.as_object()?.get(key) {
            Some(v) if !v.is_null() => false,
            // An explicit null is the user's value; leave it rather than replace it.
            Some(_) => return None,
            None => true,
        };
        let mut ptr = child(&self.ptr, self.fresh, key);
        let map = self.value.as_object_mut()?;
        let slot = if added {
            // Recorded here; nothing inside it is, so its own pointer is not kept.
            if !self.fresh {
                ops.0.push((Op::Add, std::mem::take(&mut ptr)));
            }
            map.entry(key.to_string()).or_insert_with(empty)
        } else {
            map.get_mut(key)?
        };
        Some(Cursor {
            value: slot,
            ptr,
            fresh: self.fresh || added,
        })
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
            if !self.fresh {
                let ptr = child_pointer(&self.ptr, itoa::Buffer::new().format(a.len()));
                ops.0.push((Op::Add, ptr));
            }
            a.push(v);
        }
    }

    /// Set `key` in this object when it is missing; returns whether it was added.
    pub fn insert_missing(&mut self, key: &str, v: Value, ops: &mut Ops) -> bool {
        match self.value {
            Value::Object(m) if !m.contains_key(key) => {
                if !self.fresh {
                    ops.0.push((Op::Add, child_pointer(&self.ptr, key)));
                }
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
            if !self.fresh {
                let op = if m.contains_key(key) {
                    Op::Replace
                } else {
                    Op::Add
                };
                ops.0.push((op, child_pointer(&self.ptr, key)));
            }
            m.insert(key.to_string(), v);
        }
    }
}

/// The pointer of a child of the place at `parent`, when it can be recorded: none
/// inside a place the patch added (`fresh`), so a miss or a fresh place builds none.
fn child(parent: &str, fresh: bool, token: &str) -> String {
    if fresh {
        String::new()
    } else {
        child_pointer(parent, token)
    }
}

impl Ops {
    /// Record a replacement the caller already made (reshape only).
    pub fn replace(&mut self, ptr: &str) {
        self.0.push((Op::Replace, ptr.to_string()));
    }

    /// The patch: each place once, and none inside another recorded place, whose value
    /// (the object's, [`Patch`]) already holds it. So a new `affinity` arrives as one
    /// operation, and an addition to a list a reshape replaced later is in the
    /// replacement rather than applied to a list that is gone.
    ///
    /// A dozen places are compared pairwise; more are sorted once (n log n: a pod of
    /// many containers records thousands).
    pub fn into_patch(self) -> Patch {
        crate::budget::draw_len("the layout patch", self.0.len());
        let places: Vec<&str> = self.0.iter().map(|(_, p)| p.as_str()).collect();
        let keep = if places.len() <= PAIRWISE_UP_TO {
            pairwise(&places)
        } else {
            sorted(&places)
        };
        Patch(
            self.0
                .into_iter()
                .zip(keep)
                .filter_map(|(op, keep)| keep.then_some(op))
                .collect(),
        )
    }
}

/// Up to this many operations (an ordinary pod records about a dozen), each place is
/// compared with every other: cheaper than sorting them, and at most 1,024 comparisons.
const PAIRWISE_UP_TO: usize = 32;

/// `inside(a, b)`: `a` is `b` or a place inside it.
fn inside(a: &str, b: &str) -> bool {
    a.strip_prefix(b)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// Which places to keep: each the first of its place, and inside no other.
fn pairwise(places: &[&str]) -> Vec<bool> {
    places
        .iter()
        .enumerate()
        .map(|(i, p)| {
            !places
                .iter()
                .enumerate()
                .any(|(j, q)| j != i && inside(p, q) && (p.len() != q.len() || j < i))
        })
        .collect()
}

/// The same as [`pairwise`], in n log n. Sorted token by token, a place comes right
/// before everything inside it, so each place is inside the last one kept or inside
/// none. Ties keep the order recorded: the first of a place is kept.
fn sorted(places: &[&str]) -> Vec<bool> {
    let mut order: Vec<usize> = (0..places.len()).collect();
    order.sort_unstable_by(|&a, &b| token_order(places[a], places[b]).then(a.cmp(&b)));
    let mut keep = vec![false; places.len()];
    let mut last_kept: Option<&str> = None;
    for i in order {
        if !last_kept.is_some_and(|k| inside(places[i], k)) {
            keep[i] = true;
            last_kept = Some(places[i]);
        }
    }
    keep
}

/// Pointers in the order of their tokens, compared as text: where they first differ, an
/// end sorts first, then a `/`, then any other byte (as `split('/')` would compare them,
/// without splitting).
fn token_order(a: &str, b: &str) -> std::cmp::Ordering {
    let same = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    let rank = |c: Option<&u8>| match c {
        None => 0,
        Some(b'/') => 1,
        Some(&c) => u16::from(c) + 2,
    };
    rank(a.as_bytes().get(same)).cmp(&rank(b.as_bytes().get(same)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn record(ops: &mut Ops, op: Op, path: &str) {
        ops.0.push((op, path.to_string()));
    }

    #[test]
    fn places_inside_recorded_places_go_with_them() {
        let mut ops = Ops::default();
        for path in [
            "/spec/affinity",
            "/spec/tolerations",
            "/spec/affinity/podAffinity",
            "/spec/affinity/podAffinity/required",
            "/spec/tolerations/0",
            "/spec/affinity/podAffinity/required/0",
            // Not under anything recorded here: its own operation.
            "/spec/containers/0/env/3",
            // A sibling whose name starts like a recorded place's is not inside it.
            "/spec/tolerationsExtra",
        ] {
            record(&mut ops, Op::Add, path);
        }
        let laid_out = json!({"spec": {
            "affinity": {"podAffinity": {"required": [{"x": 1}]}},
            "tolerations": [{"key": "a"}],
            "containers": [{"env": [{}, {}, {}, {"name": "N"}]}],
            "tolerationsExtra": 1,
        }});
        let patch = serde_json::to_value(ops.into_patch().to_json_patch(&laid_out)).unwrap();
        assert_eq!(
            patch,
            json!([
                {"op": "add", "path": "/spec/affinity",
                    "value": {"podAffinity": {"required": [{"x": 1}]}}},
                {"op": "add", "path": "/spec/tolerations", "value": [{"key": "a"}]},
                {"op": "add", "path": "/spec/containers/0/env/3", "value": {"name": "N"}},
                {"op": "add", "path": "/spec/tolerationsExtra", "value": 1},
            ])
        );
    }

    #[test]
    fn a_later_replacement_takes_the_additions_inside_it() {
        let mut ops = Ops::default();
        record(&mut ops, Op::Add, "/a/b");
        record(&mut ops, Op::Replace, "/a");
        record(&mut ops, Op::Add, "/a/b/c");
        record(&mut ops, Op::Replace, "/a");
        let laid_out = json!({"a": {"b": {"c": 1}}});
        let patch = ops.into_patch().to_json_patch(&laid_out);
        assert_eq!(patch.0.len(), 1, "{patch:?}");
        let mut doc = json!({"a": {}});
        json_patch::patch(&mut doc, &patch).unwrap();
        assert_eq!(doc, laid_out);
    }

    #[test]
    fn sorting_keeps_the_places_the_pairwise_comparison_keeps() {
        // Siblings that sort between a place and what is inside it byte by byte
        // (`-`, `.` and `!` are below `/`), repeats, and replacements.
        let paths = [
            "/spec/a",
            "/spec/a-x",
            "/spec/a/b",
            "/spec/a.y/c",
            "/spec/a/b/0",
            "/spec/a!",
            "/spec/a",
            "/spec",
            "/meta/x~1y",
            "/meta/x~1y/z",
            "/meta/x",
            "/spec/a-x/1",
        ];
        // Every window of the list, so the places come in many orders.
        for start in 0..paths.len() {
            for end in start + 1..=paths.len() {
                let mut window: Vec<&str> = paths[start..end].to_vec();
                assert_eq!(sorted(&window), pairwise(&window), "{window:?}");
                window.reverse();
                assert_eq!(sorted(&window), pairwise(&window), "{window:?}");
            }
        }
        let keep = pairwise(&["/spec/a", "/spec/a-x", "/spec/a/b", "/spec/a"]);
        assert_eq!(keep, [true, true, false, false]);
    }

    #[test]
    fn writes_inside_a_place_this_patch_added_are_not_recorded_again() {
        let sent = json!({"spec": {"containers": [{"name": "a"}]}});
        let mut doc = sent.clone();
        let mut ops = Ops::default();
        let mut root = Cursor::root(&mut doc, "");
        let spec = root.reborrow().get("spec").unwrap();
        let mut terms = spec
            .objects(&["affinity", "podAffinity"], &mut ops)
            .and_then(|c| c.array("required", &mut ops))
            .unwrap();
        terms.push(json!({"topologyKey": "zone"}), &mut ops);
        terms.push(json!({"topologyKey": "host"}), &mut ops);
        // Reached again from the root: `affinity` exists now, so this is recorded, and
        // folded into `affinity` when the patch is made.
        let mut anti = root
            .reborrow()
            .objects(&["spec", "affinity", "podAntiAffinity"], &mut ops)
            .unwrap();
        anti.insert_missing("x", json!(1), &mut ops);
        let mut c = root.get("spec").and_then(|s| s.get("containers")).unwrap();
        c.push(json!({"name": "b"}), &mut ops);
        assert_eq!(
            ops.0.iter().map(|(_, p)| p.as_str()).collect::<Vec<_>>(),
            [
                "/spec/affinity",
                "/spec/affinity/podAntiAffinity",
                "/spec/containers/1"
            ]
        );
        let patch = ops.into_patch().to_json_patch(&doc);
        assert_eq!(patch.0.len(), 2, "{patch:?}");
        let mut applied = sent;
        json_patch::patch(&mut applied, &patch).unwrap();
        assert_eq!(applied, doc);
    }
}
