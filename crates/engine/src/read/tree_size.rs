//! What an AdmissionReview's objects would cost in memory as JSON trees, read from its
//! text without building them: one pass of serde's visitor that allocates nothing but
//! the path to the longest list. A body of many small objects costs far more as a tree
//! than as text (a `serde_json::Value` object with members is a B-tree node, about 650
//! bytes, whatever its size), so a 3 MiB body can become a tree of hundreds of MiB; the
//! review refuses such a body before building it (`answer::admission`).
//!
//! The estimate, per value of the object (measured with serde_json 1, x86_64: 100,000
//! two-member objects in an array take 78 MiB as a tree, 300,000 numbers 9.4 MiB):
//! 32 bytes for the value itself, 650 more for an object with members, 24 plus its
//! length for each member's key, and its length for a string.

use std::fmt;

use serde::Deserialize;
use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

/// Bytes of one `Value` (an enum of 32 bytes on 64-bit targets).
const VALUE: u64 = 32;
/// A `Value::Object` with members: its B-tree's first leaf node.
const OBJECT_NODE: u64 = 650;
/// A member's key (`String`).
const KEY: u64 = 24;

/// The estimated tree of one object, and its longest list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TreeSize {
    /// Estimated bytes of the tree.
    pub bytes: u64,
    /// The longest list: its path (`spec.containers[].env`) and length.
    pub longest: Option<(String, u64)>,
    /// Estimated bytes the review copies on top of the tree: a TrainJob's
    /// `spec.trainer` and `spec.runtimePatches`, which its node pod is assembled from.
    pub copied: u64,
}

impl TreeSize {
    /// The most the review holds at once: the tree and what it copies of it.
    pub fn held(&self) -> u64 {
        self.bytes.saturating_add(self.copied)
    }
}

/// The fields of a TrainJob's `spec` that its node pod copies.
const COPIED: [&str; 2] = ["trainer", "runtimePatches"];

/// The review's two objects, as `TreeSize`s; other fields are skipped unread.
#[derive(Deserialize, Default)]
pub(crate) struct ReviewSize {
    #[serde(default)]
    request: Option<RequestSize>,
}

#[derive(Deserialize, Default)]
struct RequestSize {
    #[serde(default)]
    object: Option<TreeSize>,
    #[serde(default, rename = "oldObject")]
    old_object: Option<TreeSize>,
}

impl ReviewSize {
    /// The larger of the two objects' trees (both webhooks may build both).
    pub(crate) fn largest(&self) -> Option<&TreeSize> {
        let r = self.request.as_ref()?;
        [r.object.as_ref(), r.old_object.as_ref()]
            .into_iter()
            .flatten()
            .max_by_key(|t| t.held())
    }
}

impl<'de> Deserialize<'de> for TreeSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut count = Count::default();
        Walk(&mut count).deserialize(d)?;
        Ok(TreeSize {
            bytes: count.bytes,
            longest: count.longest,
            copied: if count.trainjob { count.copied } else { 0 },
        })
    }
}

#[derive(Default)]
struct Count {
    bytes: u64,
    path: Vec<String>,
    longest: Option<(String, u64)>,
    /// Bytes under the fields of [`COPIED`].
    copied: u64,
    /// The object's `kind` is TrainJob.
    trainjob: bool,
}

impl Count {
    fn list(&mut self, len: u64) {
        if self.longest.as_ref().is_none_or(|(_, l)| len > *l) {
            let mut path = String::new();
            for step in &self.path {
                if !path.is_empty() && step != "[]" {
                    path.push('.');
                }
                path.push_str(step);
            }
            self.longest = Some((path, len));
        }
    }
}

struct Walk<'c>(&'c mut Count);

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("JSON")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        self.0.bytes += VALUE;
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        self.0.bytes += VALUE;
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        self.0.bytes += VALUE;
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        self.0.bytes += VALUE;
        Ok(())
    }
    fn visit_str<E>(self, s: &str) -> Result<(), E> {
        self.0.bytes += VALUE + s.len() as u64;
        if self.0.path.len() == 1 && self.0.path[0] == "kind" && s == "TrainJob" {
            self.0.trainjob = true;
        }
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        self.0.bytes += VALUE;
        Ok(())
    }
    fn visit_none<E>(self) -> Result<(), E> {
        self.0.bytes += VALUE;
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let count = self.0;
        count.bytes += VALUE;
        count.path.push("[]".into());
        let mut len = 0u64;
        while seq.next_element_seed(Walk(&mut *count))?.is_some() {
            len += 1;
        }
        count.path.pop();
        count.list(len);
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let count = self.0;
        count.bytes += VALUE;
        let mut members = false;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            members = true;
            count.bytes += KEY + key.len() as u64;
            let copied =
                count.path.len() == 1 && count.path[0] == "spec" && COPIED.contains(&key.as_ref());
            count.path.push(key.into_owned());
            let before = count.bytes;
            map.next_value_seed(Walk(&mut *count))?;
            if copied {
                count.copied += count.bytes - before;
            }
            count.path.pop();
        }
        if members {
            count.bytes += OBJECT_NODE;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn size(json: &str) -> TreeSize {
        serde_json::from_str(json).expect("JSON")
    }

    #[test]
    fn small_objects_weigh_more_than_their_text() {
        let env: Vec<String> = (0..1000)
            .map(|i| format!(r#"{{"name":"E{i}","value":"x"}}"#))
            .collect();
        let pod = format!(
            r#"{{"spec":{{"containers":[{{"name":"a","env":[{}]}}]}}}}"#,
            env.join(",")
        );
        let t = size(&pod);
        // 1,000 two-member objects: about 780 bytes each, as measured.
        assert!(t.bytes > 700_000 && t.bytes < 900_000, "{}", t.bytes);
        assert_eq!(t.longest, Some(("spec.containers[].env".to_string(), 1000)));
    }

    #[test]
    fn the_review_weighs_its_objects_not_its_envelope() {
        let review = r#"{"apiVersion":"admission.k8s.io/v1","request":{"uid":"u","userInfo":{"groups":["a","b"]},"object":{"a":[1,2,3]},"oldObject":{"a":[1,2,3,4,5,6,7,8]}}}"#;
        let r: ReviewSize = serde_json::from_str(review).expect("JSON");
        let largest = r.largest().expect("objects");
        assert_eq!(largest.longest.as_ref().map(|(_, n)| *n), Some(8));
    }
}
