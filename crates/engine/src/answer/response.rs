//! Encoding the AdmissionReview answer, and the size limits that keep one review's
//! memory bounded: how many containers an object may declare and how large the JSON
//! Patch may grow.

use kube_core::admission::AdmissionResponse;
use serde::Serialize;
use serde_json::Value;
use thiserror::Error;

use crate::judge::verdict::Patch;
use crate::read::json::Lookup as _;
use crate::read::workload::{Kind, locate};

/// Size limits for one review. The defaults are far above any real training object
/// and bound the work and memory of a hostile one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Containers (`containers`, `initContainers`, `ephemeralContainers`, in every pod
    /// template of the object) one object may declare.
    pub max_containers: usize,
    /// Largest JSON Patch (serialised, before base64) the mutating webhook returns.
    pub max_patch_bytes: usize,
    /// Units of work ([`crate::Budget`]) one review may spend per byte of its body,
    /// between the budget's floor and ceiling.
    pub work_per_byte: u64,
}

/// Default `--max-containers`. A training pod carries a handful of containers (one
/// trainer, a few sidecars); each GPU container costs ~0.5 KB of patch.
pub const DEFAULT_MAX_CONTAINERS: usize = 250;
/// Default `--max-patch-bytes`: 512 KiB. An object stored in etcd is at most 1.5 MiB
/// (etcd `--max-request-bytes`, <https://etcd.io/docs/v3.5/dev-guide/limit/>), so a patch
/// beyond a third of that is not a layout any more.
pub const DEFAULT_MAX_PATCH_BYTES: usize = 512 * 1024;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_containers: DEFAULT_MAX_CONTAINERS,
            max_patch_bytes: DEFAULT_MAX_PATCH_BYTES,
            work_per_byte: crate::Budget::UNITS_PER_BYTE,
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
            .filter_map(|site| object.lookup(&site.pointer))
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

/// The JSON Patch of a review as JSON text, within `--max-patch-bytes`
/// ([`encode_patch`]); [`answer_bytes`] puts it in the answer as base64.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedPatch(Vec<u8>);

/// Serialise `patch`, its values read from `object` (the object as laid out), refusing
/// it once the text passes `max_bytes`. The length is checked after each operation, so
/// serialising stops at the first operation past the ceiling: memory stays within the
/// ceiling plus one operation, whose value the engine built from the (size-limited)
/// object. The values are written from the object where they are, never copied.
pub fn encode_patch(
    patch: &Patch,
    object: &Value,
    max_bytes: usize,
) -> Result<EncodedPatch, EncodeError> {
    let mut out = Vec::with_capacity(4096.min(max_bytes));
    write_patch(&mut out, patch, object, max_bytes).map_err(|e| match e {
        Written::TooLarge => EncodeError::PatchTooLarge { limit: max_bytes },
        Written::Failed(e) => EncodeError::Patch(e.to_string()),
        Written::Missing(path) => EncodeError::Patch(format!(
            "the patch writes {path}, which the laid-out object does not hold"
        )),
    })?;
    Ok(EncodedPatch(out))
}

enum Written {
    TooLarge,
    Failed(serde_json::Error),
    Missing(String),
}

impl From<serde_json::Error> for Written {
    fn from(e: serde_json::Error) -> Self {
        Written::Failed(e)
    }
}

/// `patch` as JSON text, the same as `json_patch`'s `Serialize` writes it, without
/// building its operations (their pointers parsed, their values copied) first.
fn write_patch(
    out: &mut Vec<u8>,
    patch: &Patch,
    object: &Value,
    max: usize,
) -> Result<(), Written> {
    let too_large = |out: &Vec<u8>| out.len() > max;
    out.push(b'[');
    for (i, operation) in patch.operations(object).enumerate() {
        let (op, path, value) = operation.map_err(|path| Written::Missing(path.to_string()))?;
        if i > 0 {
            out.push(b',');
        }
        write_op(out, op.as_str(), path, value)?;
        if too_large(out) {
            return Err(Written::TooLarge);
        }
    }
    out.push(b']');
    if too_large(out) {
        return Err(Written::TooLarge);
    }
    Ok(())
}

/// `{"op":OP,"path":PATH,"value":VALUE}`, in the field order serde writes.
fn write_op(out: &mut Vec<u8>, op: &str, path: &str, value: &Value) -> serde_json::Result<()> {
    out.extend_from_slice(b"{\"op\":\"");
    out.extend_from_slice(op.as_bytes());
    out.extend_from_slice(b"\",\"path\":");
    serde_json::to_writer(&mut *out, path)?;
    out.extend_from_slice(b",\"value\":");
    serde_json::to_writer(&mut *out, value)?;
    out.push(b'}');
    Ok(())
}

/// The AdmissionReview answer as JSON bytes: `resp`, with `patch` (from
/// [`encode_patch`]) as its JSON Patch. Serialised straight from the typed response,
/// with no JSON tree in between.
///
/// kube-core serialises `AdmissionResponse::patch: Vec<u8>` as an array of numbers
/// (kube-rs/kube#1781), which the API server rejects and which costs one JSON value per
/// byte. The patch is therefore left out of the typed response and written after its
/// last field as the base64 string the API server expects (it decodes `patch` as a Go
/// `[]byte`). Base64 needs no JSON escaping, so it is encoded straight into the answer.
pub fn answer_bytes(
    resp: AdmissionResponse,
    patch: Option<EncodedPatch>,
) -> Result<Vec<u8>, EncodeError> {
    let resp = match patch {
        // `with_patch` is the only way to set the (private) patchType; an empty patch is
        // two bytes, and the bytes themselves are written below instead.
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
        response: &resp,
    };
    let mut out = to_bytes(&answer)?;
    let Some(patch) = patch else {
        return Ok(out);
    };
    // The answer ends with the response's closing brace and the review's; the response
    // has fields (uid, allowed), so the patch follows a comma.
    if !out.ends_with(b"}}") {
        return Err(EncodeError::Response(
            "the serialised answer does not end with its response object".into(),
        ));
    }
    out.truncate(out.len() - 2);
    out.reserve(patch.0.len().div_ceil(3) * 4 + 16);
    out.extend_from_slice(b",\"patch\":\"");
    base64_simd::STANDARD.encode_append(&patch.0, &mut out);
    out.extend_from_slice(b"\"}}");
    Ok(out)
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
    response: &'a AdmissionResponse,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judge::verdict::Op;
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

    fn patch(ops: &[(Op, &str)]) -> Patch {
        Patch(ops.iter().map(|&(op, p)| (op, p.to_string())).collect())
    }

    #[test]
    fn patch_is_base64_of_its_json() {
        // Both operations, escapes in paths and values, and no operation at all: the
        // bytes are what `json_patch`'s own `Serialize` writes for the same patch.
        let object = json!({
            "a": 1,
            "metadata": {"annotations": {"trainplace.io/mutated": "line \"one\"\nline\ttwo \u{1F680}"}},
            "spec": {"x~y": {"b": [true, null, 1.5], "a": {}},
                "containers": [{"env": [{"name": "N", "value": ""}]}]},
        });
        let patches = [
            patch(&[(Op::Add, "/a")]),
            patch(&[
                (Op::Add, "/metadata/annotations/trainplace.io~1mutated"),
                (Op::Replace, "/spec/x~0y"),
                (Op::Add, "/spec/containers/0/env/0"),
            ]),
            patch(&[]),
        ];
        for patch in patches {
            let typed = patch.to_json_patch(&object);
            assert_eq!(typed.0.len(), patch.len());
            let encoded = encode_patch(&patch, &object, 4096).unwrap();
            assert_eq!(
                String::from_utf8(encoded.0.clone()).unwrap(),
                serde_json::to_string(&typed).unwrap()
            );
            let mut resp = AdmissionResponse::invalid("x");
            resp.allowed = true;
            let answer: Value =
                serde_json::from_slice(&answer_bytes(resp, Some(encoded)).unwrap()).unwrap();
            let raw = STANDARD
                .decode_to_vec(answer["response"]["patch"].as_str().unwrap())
                .unwrap();
            assert_eq!(raw, serde_json::to_vec(&typed).unwrap());
        }
    }

    #[test]
    fn a_place_the_object_does_not_hold_is_an_error_not_a_smaller_patch() {
        let e = encode_patch(&patch(&[(Op::Add, "/gone")]), &json!({}), 4096).unwrap_err();
        assert!(e.to_string().contains("/gone"), "{e}");
    }

    #[test]
    fn the_answer_carries_the_patch_as_base64_with_its_type() {
        let object = json!({"a": 1});
        let patch = patch(&[(Op::Add, "/a")]);
        let mut resp = AdmissionResponse::invalid("x");
        resp.allowed = true;
        resp.uid = "u-1".into();
        let bytes = answer_bytes(resp, Some(encode_patch(&patch, &object, 1024).unwrap())).unwrap();
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
        assert_eq!(
            raw,
            serde_json::to_vec(&patch.to_json_patch(&object)).unwrap()
        );
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
        let object = json!({"a": "x".repeat(100)});
        let patch = patch(&[(Op::Add, "/a")]);
        assert_eq!(
            encode_patch(&patch, &object, 50),
            Err(EncodeError::PatchTooLarge { limit: 50 })
        );
        // The closing bracket counts too: a patch one byte over its ceiling is refused.
        let exact = serde_json::to_vec(&patch.to_json_patch(&object))
            .unwrap()
            .len();
        assert!(encode_patch(&patch, &object, exact).is_ok());
        assert_eq!(
            encode_patch(&patch, &object, exact - 1),
            Err(EncodeError::PatchTooLarge { limit: exact - 1 })
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
