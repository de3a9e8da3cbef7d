//! Encoding the AdmissionReview answer, and the size limits that keep one review's
//! memory bounded: how many containers an object may declare and how large the JSON
//! Patch may grow.

use std::io::Write;

use kube_core::admission::AdmissionResponse;
use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;
use thiserror::Error;

use crate::workload::{Kind, locate};

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

/// Containers in the pod templates the engine reviews: every element of
/// `containers`, `initContainers` and `ephemeralContainers` of each template
/// [`locate`] finds (a Pod's own spec, a Job's, each JobSet replicated job's, ...).
/// A TrainJob has no template of its own, so every such array anywhere in it counts
/// (its pod overrides). Arrays elsewhere are never read, so they cost no review work
/// and are not counted; an object [`locate`] cannot read counts 0 and is refused by
/// the engine with the reason.
pub fn count_containers(object: &Value) -> usize {
    match locate(object) {
        Ok((Kind::TrainJob, _)) => containers_anywhere(object),
        Ok((_, sites)) => sites
            .iter()
            .filter_map(|site| object.pointer(&site.pointer))
            .map(|template| containers_in_spec(&template["spec"]))
            .fold(0, usize::saturating_add),
        Err(_) => 0,
    }
}

const CONTAINER_LISTS: [&str; 3] = ["containers", "initContainers", "ephemeralContainers"];

fn containers_in_spec(spec: &Value) -> usize {
    CONTAINER_LISTS
        .iter()
        .filter_map(|list| spec.get(list).and_then(Value::as_array))
        .map(Vec::len)
        .fold(0, usize::saturating_add)
}

fn containers_anywhere(value: &Value) -> usize {
    match value {
        Value::Object(map) => map
            .iter()
            .map(|(key, v)| {
                let here = match v {
                    Value::Array(a) if CONTAINER_LISTS.contains(&key.as_str()) => a.len(),
                    _ => 0,
                };
                here.saturating_add(containers_anywhere(v))
            })
            .fold(0, usize::saturating_add),
        Value::Array(items) => items
            .iter()
            .map(containers_anywhere)
            .fold(0, usize::saturating_add),
        _ => 0,
    }
}

/// A writer that refuses to grow past `limit` bytes.
struct Capped {
    inner: Vec<u8>,
    written: usize,
    limit: usize,
}

impl Write for Capped {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.written = self.written.saturating_add(buf.len());
        if self.written > self.limit {
            return Err(std::io::Error::other("patch ceiling"));
        }
        self.inner.extend_from_slice(buf);
        Ok(buf.len())
    }

    // serde_json writes every token with `write_all`; one check and one copy per call
    // instead of the default retry loop around `write`.
    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        self.write(buf).map(drop)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Serialise `patch` and encode it as base64 (the API server decodes `patch` as a Go
/// `[]byte`, i.e. base64), stopping as soon as the serialisation passes `max_bytes`.
/// The JSON is written into one buffer and encoded in one call: many small writes
/// through a streaming encoder cost more than the buffer, which the ceiling bounds.
/// The result is the JSON string (quotes included) ready to be put in the answer.
pub fn encode_patch(
    patch: &json_patch::Patch,
    max_bytes: usize,
) -> Result<Box<RawValue>, EncodeError> {
    let mut w = Capped {
        inner: Vec::with_capacity(4096.min(max_bytes)),
        written: 0,
        limit: max_bytes,
    };
    if let Err(e) = write_patch(&mut w, patch) {
        return Err(if w.written > w.limit {
            EncodeError::PatchTooLarge { limit: max_bytes }
        } else {
            EncodeError::Patch(e.to_string())
        });
    }
    // Base64 needs no JSON escaping: the quoted text is the JSON string as it is.
    let mut quoted = String::with_capacity(w.inner.len().div_ceil(3) * 4 + 2);
    quoted.push('"');
    base64_simd::STANDARD.encode_append(&w.inner, &mut quoted);
    quoted.push('"');
    RawValue::from_string(quoted).map_err(|e| EncodeError::Patch(e.to_string()))
}

/// `patch` as JSON text, the same as its `Serialize` writes. The operations the
/// engine records (`add`, `replace`) are written directly rather than through serde's
/// internally tagged enum (14k of 667k instructions per review of the 10 KB pod,
/// README "Performance"); others go through serde.
fn write_patch(w: &mut Capped, patch: &json_patch::Patch) -> serde_json::Result<()> {
    use json_patch::PatchOperation::{Add, Replace};
    w.write_all(b"[").map_err(serde_json::Error::io)?;
    for (i, op) in patch.0.iter().enumerate() {
        if i > 0 {
            w.write_all(b",").map_err(serde_json::Error::io)?;
        }
        let (head, path, value): (&[u8], _, _) = match op {
            Add(a) => (b"{\"op\":\"add\",\"path\":", &a.path, &a.value),
            Replace(r) => (b"{\"op\":\"replace\",\"path\":", &r.path, &r.value),
            other => {
                serde_json::to_writer(&mut *w, other)?;
                continue;
            }
        };
        w.write_all(head).map_err(serde_json::Error::io)?;
        serde_json::to_writer(&mut *w, path.as_str())?;
        w.write_all(b",\"value\":").map_err(serde_json::Error::io)?;
        serde_json::to_writer(&mut *w, value)?;
        w.write_all(b"}").map_err(serde_json::Error::io)?;
    }
    w.write_all(b"]").map_err(serde_json::Error::io)
}

/// The AdmissionReview answer as JSON bytes: `resp`, with `patch` (from
/// [`encode_patch`]) as its JSON Patch. Serialised straight from the typed response,
/// with no JSON tree in between.
///
/// kube-core serialises `AdmissionResponse::patch: Vec<u8>` as an array of numbers
/// (kube-rs/kube#1781), which the API server rejects and which costs one JSON value per
/// byte. The patch is therefore left out of the typed response and written next to it
/// as the base64 string the API server expects.
pub fn answer_bytes(
    resp: AdmissionResponse,
    patch: Option<Box<RawValue>>,
) -> Result<Vec<u8>, EncodeError> {
    let resp = match patch {
        // `with_patch` is the only way to set the (private) patchType; an empty patch is
        // two bytes, and the bytes themselves are written by `Answer` instead.
        Some(_) => resp
            .with_patch(json_patch::Patch(Vec::new()))
            .map_err(|e| EncodeError::Response(e.to_string()))
            .map(|mut r| {
                r.patch = None;
                r
            })?,
        None => resp,
    };
    let answer = Answer {
        api_version: &resp.types.api_version,
        kind: &resp.types.kind,
        response: WithPatch {
            response: &resp,
            patch: patch.as_deref(),
        },
    };
    to_bytes(&answer)
}

/// `serde_json::to_vec`, with its failure kept as an error (answered as HTTP 500).
fn to_bytes<T: Serialize>(value: &T) -> Result<Vec<u8>, EncodeError> {
    serde_json::to_vec(value).map_err(|e| EncodeError::Response(e.to_string()))
}

/// `AdmissionReview` with only a response, as kube-core's `into_review` gives it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Answer<'a> {
    api_version: &'a str,
    kind: &'a str,
    response: WithPatch<'a>,
}

#[derive(Serialize)]
struct WithPatch<'a> {
    #[serde(flatten)]
    response: &'a AdmissionResponse,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch: Option<&'a RawValue>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64_simd::STANDARD;
    use serde_json::json;

    #[test]
    fn counts_containers_in_every_template() {
        let jobset = json!({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "spec": {"replicatedJobs": [
            {"template": {"spec": {"template": {"spec": {
                "initContainers": [{}, {}], "containers": [{}, {}, {}]}}}}},
            {"template": {"spec": {"template": {"spec": {"containers": [{}]}}}}}
        ]}});
        assert_eq!(count_containers(&jobset), 6);
        let pod = |spec: Value| json!({"apiVersion": "v1", "kind": "Pod", "spec": spec});
        assert_eq!(count_containers(&pod(json!({"containers": "x"}))), 0);
        assert_eq!(
            count_containers(&pod(
                json!({"containers": [{}], "ephemeralContainers": [{}, {}]})
            )),
            3
        );
    }

    #[test]
    fn containers_outside_a_template_are_not_review_work() {
        // Not a template the engine reads: the same arrays under a container's env, or
        // in a kind trainplace passes through unchanged.
        let hidden = json!({"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [
            {"name": "a", "env": [{"name": "X", "containers": [{}, {}, {}]}]}]}});
        assert_eq!(count_containers(&hidden), 1);
        let other =
            json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"containers": [{}, {}]}});
        assert_eq!(count_containers(&other), 0);
    }

    #[test]
    fn a_trainjob_counts_the_containers_of_its_overrides() {
        let trainjob = json!({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "spec": {"podTemplateOverrides": [{"targetJobs": [{"name": "node"}],
                "spec": {"containers": [{"name": "a"}, {"name": "b"}], "initContainers": [{"name": "c"}]}}]}});
        assert_eq!(count_containers(&trainjob), 3);
    }

    #[test]
    fn patch_is_base64_of_its_json() {
        // Every kind of operation, escapes in paths and values, and no operation at all:
        // the bytes are what the patch's own `Serialize` writes.
        let patches = [
            json!([{"op": "add", "path": "/a", "value": 1}]),
            json!([
                {"op": "add", "path": "/metadata/annotations/trainplace.io~1mutated",
                    "value": "line \"one\"\nline\ttwo \u{1F680}"},
                {"op": "replace", "path": "/spec/x~0y", "value": {"b": [true, null, 1.5], "a": {}}},
                {"op": "remove", "path": "/spec/z"},
                {"op": "test", "path": "/spec/t", "value": "v"},
                {"op": "move", "from": "/a", "path": "/b"},
                {"op": "copy", "from": "/b", "path": "/c"},
                {"op": "add", "path": "/spec/containers/0/env/-", "value": {"name": "N", "value": ""}},
            ]),
            json!([]),
        ];
        for value in patches {
            let patch: json_patch::Patch = serde_json::from_value(value).unwrap();
            let quoted = encode_patch(&patch, 4096).unwrap();
            let b64: String = serde_json::from_str(quoted.get()).unwrap();
            let raw = STANDARD.decode_to_vec(b64).unwrap();
            assert_eq!(
                String::from_utf8(raw).unwrap(),
                serde_json::to_string(&patch).unwrap()
            );
        }
    }

    #[test]
    fn the_answer_carries_the_patch_as_base64_with_its_type() {
        let patch: json_patch::Patch =
            serde_json::from_value(json!([{"op": "add", "path": "/a", "value": 1}])).unwrap();
        let mut resp = AdmissionResponse::invalid("x");
        resp.allowed = true;
        resp.uid = "u-1".into();
        let bytes = answer_bytes(resp, Some(encode_patch(&patch, 1024).unwrap())).unwrap();
        let answer: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(answer["apiVersion"], "admission.k8s.io/v1");
        assert_eq!(answer["kind"], "AdmissionReview");
        let r = &answer["response"];
        assert_eq!(
            (&r["uid"], &r["allowed"], &r["patchType"]),
            (&json!("u-1"), &json!(true), &json!("JSONPatch"))
        );
        let raw = STANDARD
            .decode_to_vec(r["patch"].as_str().unwrap())
            .unwrap();
        assert_eq!(raw, serde_json::to_vec(&patch).unwrap());
        let plain: Value =
            serde_json::from_slice(&answer_bytes(AdmissionResponse::invalid("no"), None).unwrap())
                .unwrap();
        assert!(
            plain["response"].get("patch").is_none()
                && plain["response"].get("patchType").is_none(),
            "{plain}"
        );
        assert_eq!(plain["response"]["status"]["message"], "no");
    }

    #[test]
    fn patch_over_the_ceiling_is_refused() {
        let patch: json_patch::Patch =
            serde_json::from_value(json!([{"op": "add", "path": "/a", "value": "x".repeat(100)}]))
                .unwrap();
        assert_eq!(
            encode_patch(&patch, 50).map(|raw| raw.get().to_string()),
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
        let e = to_bytes(&Unserialisable).unwrap_err();
        assert!(e.to_string().contains("broken on purpose"), "{e}");
    }
}
