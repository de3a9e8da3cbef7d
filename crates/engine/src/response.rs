//! Encoding the AdmissionReview answer, and the size limits that keep one review's
//! memory bounded: how many containers an object may declare and how large the JSON
//! Patch may grow.

use std::io::Write;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use kube_core::admission::AdmissionResponse;
use serde::Serialize;
use serde_json::Value;
use thiserror::Error;

/// Size limits for one review. The defaults are far above any real training object
/// and bound the work and memory of a hostile one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Containers (`containers`, `initContainers`, `ephemeralContainers`, in every pod
    /// template of the object) one object may declare.
    pub max_containers: usize,
    /// Largest JSON Patch (serialised, before base64) the mutating webhook returns.
    pub max_patch_bytes: usize,
}

/// Default `--max-containers`. A training pod carries a handful of containers (one
/// trainer, a few sidecars); each GPU container costs ~0.5 KB of patch.
pub const DEFAULT_MAX_CONTAINERS: usize = 250;
/// Default `--max-patch-bytes`: 512 KiB. An object stored in etcd is at most 1.5 MiB
/// (etcd `--max-request-bytes`, https://etcd.io/docs/v3.5/dev-guide/limit/), so a patch
/// beyond a third of that is not a layout any more.
pub const DEFAULT_MAX_PATCH_BYTES: usize = 512 * 1024;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_containers: DEFAULT_MAX_CONTAINERS,
            max_patch_bytes: DEFAULT_MAX_PATCH_BYTES,
        }
    }
}

/// Why an answer could not be produced.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum EncodeError {
    #[error(
        "the layout patch is larger than {limit} bytes (--max-patch-bytes); the object has too many containers to rewrite"
    )]
    PatchTooLarge { limit: usize },
    #[error("cannot serialise the patch: {0}")]
    Patch(String),
    #[error("cannot serialise the AdmissionReview response: {0}")]
    Response(String),
}

/// Containers declared anywhere in `object`: every element of an array named
/// `containers`, `initContainers` or `ephemeralContainers`, at any depth (pod spec,
/// Job/JobSet/PyTorchJob/... templates alike).
pub fn count_containers(object: &Value) -> usize {
    match object {
        Value::Object(map) => map
            .iter()
            .map(|(key, v)| {
                let here = match (key.as_str(), v) {
                    ("containers" | "initContainers" | "ephemeralContainers", Value::Array(a)) => {
                        a.len()
                    }
                    _ => 0,
                };
                here.saturating_add(count_containers(v))
            })
            .fold(0usize, usize::saturating_add),
        Value::Array(items) => items
            .iter()
            .map(count_containers)
            .fold(0usize, usize::saturating_add),
        _ => 0,
    }
}

/// A writer that refuses to grow past `limit` bytes.
struct Capped<W> {
    inner: W,
    written: usize,
    limit: usize,
}

impl<W: Write> Write for Capped<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.written = self.written.saturating_add(buf.len());
        if self.written > self.limit {
            return Err(std::io::Error::other("patch ceiling"));
        }
        self.inner.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Serialise `patch` and encode it as base64 text (the API server decodes `patch` as a
/// Go `[]byte`, i.e. base64), stopping as soon as the serialisation passes
/// `max_bytes`. The JSON is written into one buffer and encoded in one call: many
/// small writes through a streaming encoder cost more than the buffer, which the
/// ceiling bounds.
pub fn encode_patch(patch: &json_patch::Patch, max_bytes: usize) -> Result<String, EncodeError> {
    let mut w = Capped {
        inner: Vec::with_capacity(4096.min(max_bytes)),
        written: 0,
        limit: max_bytes,
    };
    if let Err(e) = serde_json::to_writer(&mut w, patch) {
        return Err(if w.written > w.limit {
            EncodeError::PatchTooLarge { limit: max_bytes }
        } else {
            EncodeError::Patch(e.to_string())
        });
    }
    Ok(STANDARD.encode(&w.inner))
}

/// The AdmissionReview for `resp`, with `patch` (already base64) as a JSON Patch.
///
/// kube-core serialises `AdmissionResponse::patch: Vec<u8>` as an array of numbers
/// (kube-rs/kube#1781), which the API server rejects and which costs one JSON value per
/// byte. The patch is therefore left out of the typed response and put in as the
/// base64 string the API server expects.
pub fn review_json(resp: AdmissionResponse, patch: Option<String>) -> Result<Value, EncodeError> {
    let resp = match patch {
        // `with_patch` is the only way to set the (private) patchType; an empty patch is
        // two bytes, and the bytes themselves are replaced below.
        Some(_) => resp
            .with_patch(json_patch::Patch(Vec::new()))
            .map_err(|e| EncodeError::Response(e.to_string()))
            .map(|mut r| {
                r.patch = None;
                r
            })?,
        None => resp,
    };
    let mut v = to_json(&resp.into_review())?;
    if let Some(patch) = patch
        && let Some(response) = v.get_mut("response").and_then(Value::as_object_mut)
    {
        response.insert("patch".into(), Value::String(patch));
    }
    Ok(v)
}

/// `serde_json::to_value`, with its failure kept as an error instead of a `null`.
pub fn to_json<T: Serialize>(value: &T) -> Result<Value, EncodeError> {
    serde_json::to_value(value).map_err(|e| EncodeError::Response(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn counts_containers_in_every_template() {
        let jobset = json!({"spec": {"replicatedJobs": [
            {"template": {"spec": {"template": {"spec": {
                "initContainers": [{}, {}], "containers": [{}, {}, {}]}}}}},
            {"template": {"spec": {"template": {"spec": {"containers": [{}]}}}}}
        ]}});
        assert_eq!(count_containers(&jobset), 6);
        assert_eq!(count_containers(&json!({"containers": "x"})), 0);
    }

    #[test]
    fn patch_is_base64_of_its_json() {
        let patch: json_patch::Patch =
            serde_json::from_value(json!([{"op": "add", "path": "/a", "value": 1}])).unwrap();
        let b64 = encode_patch(&patch, 1024).unwrap();
        let raw = STANDARD.decode(b64).unwrap();
        assert_eq!(raw, serde_json::to_vec(&patch).unwrap());
    }

    #[test]
    fn patch_over_the_ceiling_is_refused() {
        let patch: json_patch::Patch =
            serde_json::from_value(json!([{"op": "add", "path": "/a", "value": "x".repeat(100)}]))
                .unwrap();
        assert_eq!(
            encode_patch(&patch, 50),
            Err(EncodeError::PatchTooLarge { limit: 50 })
        );
    }

    /// A value whose serialisation fails, as a map with non-string keys does.
    struct Unserialisable;
    impl Serialize for Unserialisable {
        fn serialize<S: serde::Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
            Err(serde::ser::Error::custom("broken on purpose"))
        }
    }

    #[test]
    fn a_failed_serialisation_is_an_error_not_null() {
        let e = to_json(&Unserialisable).unwrap_err();
        assert!(e.to_string().contains("broken on purpose"), "{e}");
    }
}
