//! AdmissionReview in, AdmissionReview out. The object is taken from the raw JSON
//! (never round-tripped through typed structs); the response is built from the request
//! with kube-core so the uid and types are echoed correctly.

use kube_core::admission::{AdmissionRequest, AdmissionResponse, Operation};
use kube_core::{DynamicObject, TypeMeta};
use serde_json::Value;

use crate::answer::mark::MarkKeys;
use crate::answer::response::{EncodeError, Limits, answer_bytes, count_containers, encode_patch};
use crate::engine::{evaluate_owned, judge_owned};
use crate::facts::inventory::{Snapshot, scale_replicas_path};
use crate::facts::policy::Policy;
use crate::facts::requester::Requester;
use crate::judge::verdict::Verdict;
use crate::read::incoming::{Incoming, Types};

/// Which webhook is answering.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// Returns the layout patch; denies only objects it cannot read.
    Mutate,
    /// Denies what policy forbids; warns in `warn` mode.
    Validate,
}

impl Endpoint {
    pub fn as_str(self) -> &'static str {
        match self {
            Endpoint::Mutate => "mutate",
            Endpoint::Validate => "validate",
        }
    }
}

/// How a review ended, for logs and metrics (bounded labels only).
#[derive(Debug, Clone)]
pub enum Outcome {
    /// The review itself was unusable (not an AdmissionReview v1, no request).
    Invalid(String),
    /// Nothing to judge (DELETE, CONNECT, no object).
    Passed { operation: &'static str },
    /// The object could not be read; denied with the reason.
    BadObject {
        operation: &'static str,
        message: String,
    },
    Judged {
        operation: &'static str,
        verdict: Box<Verdict>,
    },
}

pub struct Reviewed {
    /// The AdmissionReview to send back (HTTP 200) as JSON bytes, or why it could not
    /// be encoded (the server answers HTTP 500 with the message, never a JSON `null`).
    pub body: Result<Vec<u8>, EncodeError>,
    pub uid: String,
    pub dry_run: bool,
    pub outcome: Outcome,
}

fn op_label(op: &Operation) -> &'static str {
    match op {
        Operation::Create => "CREATE",
        Operation::Update => "UPDATE",
        Operation::Delete => "DELETE",
        Operation::Connect => "CONNECT",
    }
}

const API_VERSION: &str = "admission.k8s.io/v1";
const KIND: &str = "AdmissionReview";

fn wrong_types(api: &str, kind: &str) -> Reviewed {
    invalid(format!(
        "expected apiVersion {API_VERSION} kind {KIND}, got {api:?} {kind:?}; set admissionReviewVersions: [v1] in the webhook configuration"
    ))
}

fn invalid(message: String) -> Reviewed {
    Reviewed {
        body: answer_bytes(AdmissionResponse::invalid(&message), None),
        uid: String::new(),
        dry_run: false,
        outcome: Outcome::Invalid(message),
    }
}

/// Answer one AdmissionReview already parsed as JSON, with the default [`Limits`] (for
/// tests and tools; the server answers from the body's bytes with [`review_bytes`]).
/// `inventory` is the cluster snapshot when one is available (namespace labels, node
/// types, sibling zones).
pub fn review(
    body: Value,
    endpoint: Endpoint,
    policy: &Policy,
    inventory: Option<&Snapshot>,
    marks: Option<&MarkKeys>,
) -> Reviewed {
    let types = Types {
        api_version: body.get("apiVersion").cloned(),
        kind: body.get("kind").cloned(),
    };
    let incoming = serde_json::from_value::<Incoming>(body);
    let limits = Limits::default();
    answer(
        incoming,
        || Ok(types),
        endpoint,
        Judges {
            policy,
            inventory,
            marks,
            limits: &limits,
            now: None,
        },
    )
}

/// The request body was not JSON at all (the server answers HTTP 400).
#[derive(Debug, thiserror::Error)]
#[error("request body is not an AdmissionReview JSON document: {0}")]
pub struct NotJson(serde_json::Error);

/// Answer one AdmissionReview from the request body's bytes, as the webhook receives
/// it: parsed in one pass, with `oldObject` kept as text. `limits` are the server's
/// `--max-containers` and `--max-patch-bytes`; `now` is the request's time, for
/// time-bound rules (Capacity Block ends; `None` skips them). The engine reads no clock.
pub fn review_bytes(
    body: &[u8],
    endpoint: Endpoint,
    policy: &Policy,
    inventory: Option<&Snapshot>,
    marks: Option<&MarkKeys>,
    limits: &Limits,
    now: Option<jiff::Timestamp>,
) -> Result<Reviewed, NotJson> {
    // One check of the whole body instead of serde_json checking each string it reads:
    // text that is UTF-8 is read as `str`. Bytes that are not go through the same byte
    // parser as before, which names where they stop being JSON.
    let parsed = match std::str::from_utf8(body) {
        Ok(text) => serde_json::from_str::<Incoming>(text),
        Err(_) => serde_json::from_slice::<Incoming>(body),
    };
    let incoming = match parsed {
        // Syntax, an early end or I/O: not JSON, as opposed to JSON of the wrong shape.
        Err(e) if !e.is_data() => return Err(NotJson(e)),
        parsed => parsed,
    };
    let types = || serde_json::from_slice::<Types>(body);
    Ok(answer(
        incoming,
        types,
        endpoint,
        Judges {
            policy,
            inventory,
            marks,
            limits,
            now,
        },
    ))
}

/// What a review is judged with.
struct Judges<'a> {
    policy: &'a Policy,
    inventory: Option<&'a Snapshot>,
    marks: Option<&'a MarkKeys>,
    limits: &'a Limits,
    now: Option<jiff::Timestamp>,
}

/// The request of a review: its object, its old object (raw) and the rest; or the
/// answer to a review that is not one.
type Parts = (
    Value,
    Option<Box<serde_json::value::RawValue>>,
    AdmissionRequest<DynamicObject>,
);

fn request_of(
    incoming: Result<Incoming, serde_json::Error>,
    types: impl FnOnce() -> Result<Types, serde_json::Error>,
) -> Result<Parts, Reviewed> {
    let incoming = match incoming {
        Ok(incoming) => incoming,
        Err(e) => {
            // Name a wrong version or kind before a field of the request.
            let types = types().unwrap_or_default();
            let (api, kind) = types.texts();
            if api != API_VERSION || kind != KIND {
                return Err(wrong_types(api, kind));
            }
            return Err(invalid(format!("malformed AdmissionReview request: {e}")));
        }
    };
    if incoming.api_version != API_VERSION || incoming.kind != KIND {
        return Err(wrong_types(&incoming.api_version, &incoming.kind));
    }
    let Some(request) = incoming.request else {
        return Err(invalid("AdmissionReview has no request".into()));
    };
    Ok(request.split(TypeMeta {
        api_version: incoming.api_version,
        kind: incoming.kind,
    }))
}

/// The verdict on the object: the mutating webhook lays it out, the validating one
/// judges it as it will be stored (no patch) and, on an UPDATE, for what it changes.
fn judge(
    endpoint: Endpoint,
    object: Value,
    old_object: Option<Box<serde_json::value::RawValue>>,
    policy: &Policy,
    who: &Requester<'_>,
) -> Result<Verdict, crate::error::ObjectError> {
    if endpoint == Endpoint::Mutate {
        return evaluate_owned(object, policy, who);
    }
    let mut verdict = judge_owned(object, policy, who)?;
    if let Some(old) = old_object
        && let Ok(old) = serde_json::from_str::<Value>(old.get())
        && !old.is_null()
    {
        crate::judge::update::judge_change(old, &mut verdict, policy, who);
    }
    Ok(verdict)
}

/// Who asks: the request's namespace (its labels from the inventory), groups, and the
/// time to judge time-bound rules at.
fn requester<'a>(
    req: &'a AdmissionRequest<DynamicObject>,
    namespace: &'a str,
    inventory: Option<&'a Snapshot>,
    marks: Option<&'a MarkKeys>,
    now: Option<jiff::Timestamp>,
) -> Requester<'a> {
    Requester {
        namespace,
        namespace_labels: inventory.and_then(|i| i.namespace_labels(namespace)),
        inventory,
        groups: req.user_info.groups.as_deref().unwrap_or_default(),
        marks,
        now,
        claims: None,
        updating: matches!(req.operation, Operation::Update),
    }
}

/// How messages name the object under review: its kind and name.
fn object_name(req: &AdmissionRequest<DynamicObject>) -> String {
    let name = if req.name.is_empty() {
        "(unnamed)"
    } else {
        &req.name
    };
    format!("{} {name}", req.kind.kind)
}

/// Why an object carrying more containers than one review may is refused, if it does.
fn too_many_containers(
    object: &Value,
    limits: &Limits,
    req: &AdmissionRequest<DynamicObject>,
) -> Option<String> {
    let containers = count_containers(object);
    (containers > limits.max_containers).then(|| {
        format!(
            "trainplace refuses {}: it declares {containers} containers, more than the {} one review may carry (--max-containers); a training pod has a handful. Split the object or raise the limit",
            object_name(req),
            limits.max_containers
        )
    })
}

/// The validating webhook's answer: denied with every enforced finding's reason, and
/// the warnings.
fn validation_response(base: AdmissionResponse, verdict: &Verdict) -> AdmissionResponse {
    let warnings = verdict.warnings();
    let mut resp = if verdict.allowed {
        base
    } else {
        deny(base, &verdict.reasons().join("\n"))
    };
    if !warnings.is_empty() {
        resp.warnings = Some(warnings);
    }
    resp
}

fn answer(
    incoming: Result<Incoming, serde_json::Error>,
    types: impl FnOnce() -> Result<Types, serde_json::Error>,
    endpoint: Endpoint,
    judges: Judges<'_>,
) -> Reviewed {
    let Judges {
        policy,
        inventory,
        marks,
        limits,
        now,
    } = judges;
    let (object, old_object, req) = match request_of(incoming, types) {
        Ok(parts) => parts,
        Err(reviewed) => return reviewed,
    };
    let operation = op_label(&req.operation);
    let base = AdmissionResponse::from(&req);
    let uid = req.uid.clone();
    let dry_run = req.dry_run;
    let done = |resp: AdmissionResponse, outcome| Reviewed {
        body: answer_bytes(resp, None),
        uid: uid.clone(),
        dry_run,
        outcome,
    };
    if !matches!(req.operation, Operation::Create | Operation::Update) || object.is_null() {
        return done(base, Outcome::Passed { operation });
    }
    // A pod's layout is fixed when it is created; an UPDATE is only validated (its job
    // label, `update.rs`), never patched.
    if endpoint == Endpoint::Mutate
        && req.operation == Operation::Update
        && req.kind.kind == "Pod"
        && req.kind.group.is_empty()
    {
        return done(base, Outcome::Passed { operation });
    }
    let object_name = || object_name(&req);
    if let Some(message) = too_many_containers(&object, limits, &req) {
        return done(
            deny(base, &message),
            Outcome::BadObject { operation, message },
        );
    }
    let namespace = req.namespace.clone().unwrap_or_default();
    let object = if req.sub_resource.as_deref() == Some("scale") {
        match scaled_object(&req, &object, &namespace, inventory) {
            Scaled::Judge(parent) => parent,
            Scaled::Pass(note) => {
                let mut resp = base;
                resp.warnings = Some(vec![note]);
                return done(resp, Outcome::Passed { operation });
            }
        }
    } else {
        object
    };
    let who = requester(&req, &namespace, inventory, marks, now);
    let is_scale = req.sub_resource.as_deref() == Some("scale");
    // An UPDATE is refused only for what it changes (`update.rs`); a Scale's old
    // object is a Scale, not the workload judged.
    let old_object = old_object.filter(|_| req.operation == Operation::Update && !is_scale);
    let verdict = match judge(endpoint, object, old_object, policy, &who) {
        Ok(v) => v,
        Err(e) => {
            let message = format!("trainplace cannot read {}: {e}", object_name());
            let resp = deny(base, &message);
            return done(resp, Outcome::BadObject { operation, message });
        }
    };
    let (resp, patch) = match endpoint {
        // A Scale is judged on the workload it scales; that workload's patch would not
        // apply to the Scale object.
        Endpoint::Mutate if verdict.patch.0.is_empty() || is_scale => (base, None),
        Endpoint::Mutate => match encode_patch(&verdict.patch, limits.max_patch_bytes) {
            Ok(encoded) => (base, Some(encoded)),
            Err(e) => {
                let message = format!("trainplace cannot patch {}: {e}", object_name());
                return done(
                    deny(base, &message),
                    Outcome::BadObject { operation, message },
                );
            }
        },
        Endpoint::Validate => (validation_response(base, &verdict), None),
    };
    Reviewed {
        body: answer_bytes(resp, patch),
        uid,
        dry_run,
        outcome: Outcome::Judged {
            operation,
            verdict: Box::new(verdict),
        },
    }
}

/// What a Scale review is judged as.
enum Scaled {
    /// The workload it scales, with the new replica count written in.
    Judge(Value),
    /// Not judged (a scale-down, or a workload the inventory does not hold), with why.
    Pass(String),
}

/// A Scale (`pytorchjobs/scale`, `paddlejobs/scale`) carries only
/// a replica count: judge the workload it scales, from the inventory, with its
/// CRD's `specReplicasPath` set to the new count, so `kubectl scale` or an autoscaler cannot grow a job past what its
/// layout allows.
fn scaled_object(
    req: &AdmissionRequest<DynamicObject>,
    scale: &Value,
    namespace: &str,
    inventory: Option<&Snapshot>,
) -> Scaled {
    let replicas = |v: &Value| v.pointer("/spec/replicas").and_then(Value::as_u64);
    let Some(new) = replicas(scale) else {
        return Scaled::Pass("trainplace: a Scale without spec.replicas was not judged.".into());
    };
    let resource = req.resource.resource.as_str();
    let Some(parent) = inventory.and_then(|i| i.scalable(namespace, resource, &req.name)) else {
        return Scaled::Pass(format!(
            "trainplace could not judge this scale of {resource}/{}: the cluster inventory does not hold it (run the webhook with --inventory auto); the new size was not checked against the layout rules.",
            req.name
        ));
    };
    let Some(path) = scale_replicas_path(resource) else {
        return Scaled::Pass(format!(
            "trainplace does not know where a scale of {resource} writes its replicas; the new size was not checked."
        ));
    };
    let mut parent = parent.clone();
    let (holder, key) = path.rsplit_once('/').unwrap_or(("", path));
    if let Some(m) = parent.pointer_mut(holder).and_then(Value::as_object_mut) {
        m.insert(key.to_string(), Value::from(new));
    }
    Scaled::Judge(parent)
}

fn deny(resp: AdmissionResponse, message: &str) -> AdmissionResponse {
    let mut resp = resp.deny(message);
    resp.result.code = 403;
    resp.result.status = Some(kube_core::response::StatusSummary::Failure);
    resp.result.reason = "Forbidden".into();
    resp
}
