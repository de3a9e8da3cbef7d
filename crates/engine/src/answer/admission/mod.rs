//! AdmissionReview in, AdmissionReview out. The object is taken from the raw JSON
//! (never round-tripped through typed structs); the response is built from the request
//! with kube-core so the uid and types are echoed correctly.

mod refusal;
mod scale;

use kube_core::admission::{AdmissionRequest, AdmissionResponse, Operation};
use kube_core::{DynamicObject, TypeMeta};
use serde_json::Value;

use crate::answer::response::{EncodeError, EncodedPatch, Limits, answer_bytes, encode_patch};
use crate::budget::{Budget, OverBudget, Work, metered};
use crate::engine::{evaluate_owned, judge_owned};
use crate::error::ObjectError;
use crate::facts::inventory::Snapshot;
use crate::facts::mark::MarkKeys;
use crate::facts::policy::Policy;
use crate::facts::requester::Requester;
use crate::judge::verdict::Verdict;
use crate::read::incoming::{Incoming, Types};
use crate::read::tree_size::{ReviewSize, TreeSize};
use refusal::{
    deny, object_name, over_budget, too_big_to_read, too_many_containers, validation_response,
};
use scale::{Scaled, scaled_object};

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
    /// Judging the object needed more work than the review's [`Budget`] grants:
    /// denied at `/validate`, allowed without a layout at `/mutate`.
    OverBudget {
        operation: &'static str,
        over: OverBudget,
    },
    /// The object's JSON tree would take more memory than one review may use
    /// (`read::tree_size`): answered from the body's text without building it, as
    /// `OverBudget` is (denied at `/validate`, allowed without a layout at `/mutate`).
    TooBigToRead {
        operation: &'static str,
        size: TreeSize,
    },
}

pub struct Reviewed {
    /// The AdmissionReview to send back (HTTP 200) as JSON bytes, or why it could not
    /// be encoded (the server answers HTTP 500 with the message, never a JSON `null`).
    pub body: Result<Vec<u8>, EncodeError>,
    pub uid: String,
    pub dry_run: bool,
    pub outcome: Outcome,
    /// The work the review did, in the units of its [`Budget`].
    pub work: Work,
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
        work: Work::default(),
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
    let (mut reviewed, work) = metered(Budget::ceiling(), || {
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
    });
    reviewed.work = work;
    reviewed
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
    if let Some(reviewed) = too_big(body, endpoint) {
        return Ok(reviewed);
    }
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
    // The work the object may cost is sized from the body it came in.
    let (mut reviewed, work) = metered(Budget::per_byte(body.len(), limits.work_per_byte), || {
        answer(
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
        )
    });
    reviewed.work = work;
    Ok(reviewed)
}

/// Bodies from this size on are weighed before their objects are built: below it, no
/// object can reach `MAX_TREE_BYTES` with what the review copies of it (a member costs
/// at least 7 bytes of text and under 800 bytes of tree, and a TrainJob's node pod
/// copies at most the whole object once: 128 KiB / 7 x 800 x 2 is 29 MiB).
pub const TREE_CHECK_FROM_BYTES: usize = 128 * 1024;

/// The estimated JSON tree one review may build of an object (`read::tree_size`): a pod
/// at every bound of `judge::bounds` (64 containers of 512 env entries) takes about 27
/// MiB. Past it, counting what the review copies of the object (`TreeSize::held`), the
/// object is refused unread, so a 3 MiB body of small objects cannot take a replica's
/// memory (docs/performance.md).
pub const MAX_TREE_BYTES: u64 = 32 * 1024 * 1024;

/// The answer to a CREATE or UPDATE whose object (or old object) would
/// take more than `MAX_TREE_BYTES` as a tree, from the body's text alone; `None` for
/// everything else, which is read as usual.
fn too_big(body: &[u8], endpoint: Endpoint) -> Option<Reviewed> {
    if body.len() < TREE_CHECK_FROM_BYTES {
        return None;
    }
    let text = std::str::from_utf8(body).ok()?;
    let size = serde_json::from_str::<ReviewSize>(text).ok()?;
    // Both webhooks may build the old object of an UPDATE (the mutating one to see
    // whether the update changes the spec).
    let big = size
        .largest()
        .filter(|t| t.held() > MAX_TREE_BYTES)?
        .clone();
    let slim = serde_json::from_str::<Incoming<serde::de::IgnoredAny>>(text);
    let (_, _, req) = request_of(slim, || serde_json::from_str::<Types>(text)).ok()?;
    if !matches!(req.operation, Operation::Create | Operation::Update) {
        return None;
    }
    let resp = too_big_to_read(endpoint, AdmissionResponse::from(&req), &req, &big);
    Some(Reviewed {
        body: answer_bytes(resp, None),
        uid: req.uid,
        dry_run: req.dry_run,
        outcome: Outcome::TooBigToRead {
            operation: op_label(&req.operation),
            size: big,
        },
        work: Work::default(),
    })
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
type Parts<O = Value> = (
    O,
    Option<Box<serde_json::value::RawValue>>,
    AdmissionRequest<DynamicObject>,
);

fn request_of<O>(
    incoming: Result<Incoming<O>, serde_json::Error>,
    types: impl FnOnce() -> Result<Types, serde_json::Error>,
) -> Result<Parts<O>, Box<Reviewed>> {
    let incoming = match incoming {
        Ok(incoming) => incoming,
        Err(e) => {
            // Name a wrong version or kind before a field of the request.
            let types = types().unwrap_or_default();
            let (api, kind) = types.texts();
            if api != API_VERSION || kind != KIND {
                return Err(Box::new(wrong_types(api, kind)));
            }
            return Err(Box::new(invalid(format!(
                "malformed AdmissionReview request: {e}"
            ))));
        }
    };
    if incoming.api_version != API_VERSION || incoming.kind != KIND {
        return Err(Box::new(wrong_types(&incoming.api_version, &incoming.kind)));
    }
    let Some(request) = incoming.request else {
        return Err(Box::new(invalid("AdmissionReview has no request".into())));
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
    policy: &Policy,
    who: &Requester<'_>,
) -> Result<Verdict, crate::error::ObjectError> {
    if endpoint == Endpoint::Mutate {
        return evaluate_owned(object, policy, who);
    }
    let mut verdict = judge_owned(object, policy, who)?;
    if let Some(old) = who.updating {
        crate::engine::update::judge_change(old, &mut verdict, policy, who);
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
    stored: Option<&'a Value>,
) -> Requester<'a> {
    Requester {
        namespace,
        namespace_labels: inventory.and_then(|i| i.namespace_labels(namespace)),
        inventory,
        groups: req.user_info.groups.as_deref().unwrap_or_default(),
        marks,
        now,
        claims: None,
        updating: stored,
    }
}

fn answer(
    incoming: Result<Incoming, serde_json::Error>,
    types: impl FnOnce() -> Result<Types, serde_json::Error>,
    endpoint: Endpoint,
    judges: Judges<'_>,
) -> Reviewed {
    let (object, old_object, req) = match request_of(incoming, types) {
        Ok(parts) => parts,
        Err(reviewed) => return *reviewed,
    };
    let (resp, patch, outcome) = decide(endpoint, &req, object, old_object, judges);
    Reviewed {
        body: answer_bytes(resp, patch),
        uid: req.uid,
        dry_run: req.dry_run,
        outcome,
        work: Work::default(),
    }
}

/// The response to a request, its patch, and how the review ended.
fn decide(
    endpoint: Endpoint,
    req: &AdmissionRequest<DynamicObject>,
    object: Value,
    old_object: Option<Box<serde_json::value::RawValue>>,
    judges: Judges<'_>,
) -> (AdmissionResponse, Option<EncodedPatch>, Outcome) {
    let operation = op_label(&req.operation);
    let base = AdmissionResponse::from(req);
    let refused = |base, message: String| {
        (
            deny(base, &message),
            None,
            Outcome::BadObject { operation, message },
        )
    };
    if passes(endpoint, req, &object) {
        return (base, None, Outcome::Passed { operation });
    }
    if let Some(message) = too_many_containers(&object, judges.limits, req) {
        return refused(base, message);
    }
    let namespace = req.namespace.clone().unwrap_or_default();
    let is_scale = req.sub_resource.as_deref() == Some("scale");
    // Strict mode reads no size: a scale changes nothing it judges.
    if is_scale && judges.policy.strict() {
        return (base, None, Outcome::Passed { operation });
    }
    // An UPDATE (a Scale too) is refused only for what it changes (`update.rs`).
    let updating = req.operation == Operation::Update;
    let (object, stored) = if is_scale {
        match scaled_object(req, &object, &namespace, judges.inventory) {
            // A Scale's old object is a Scale: what it changes is the workload as stored.
            Scaled::Judge { scaled, stored } => (scaled, Some(stored).filter(|_| updating)),
            Scaled::Pass(note) => {
                let mut resp = base;
                resp.warnings = Some(vec![note]);
                return (resp, None, Outcome::Passed { operation });
            }
        }
    } else {
        let stored = old_object
            .filter(|_| updating)
            .and_then(|old| serde_json::from_str::<Value>(old.get()).ok())
            .filter(|old| !old.is_null());
        (object, stored)
    };
    let who = requester(
        req,
        &namespace,
        judges.inventory,
        judges.marks,
        judges.now,
        stored.as_ref(),
    );
    if endpoint == Endpoint::Mutate
        && !is_scale
        && let Some(old) = &stored
        && crate::engine::update::leave_as_sent(old, &object, &who, judges.policy)
    {
        return (base, None, Outcome::Passed { operation });
    }
    let judged = judge(endpoint, object, judges.policy, &who);
    let verdict = match (judged, crate::budget::spent()) {
        (Err(ObjectError::OverBudget(over)), _) | (Ok(_), Some(over)) => {
            let resp = over_budget(endpoint, base, req, &over);
            return (resp, None, Outcome::OverBudget { operation, over });
        }
        (Ok(v), None) => v,
        (Err(e), _) => {
            let message = format!("trainplace cannot read {}: {e}", object_name(req));
            return refused(base, message);
        }
    };
    let (resp, patch) = match endpoint {
        // A Job's or JobSet's UPDATE: the templates' metadata only (the mark signed
        // again for Kueue's node selector), or nothing when the layout itself would
        // change (a newer policy, an object stored without it).
        Endpoint::Mutate
            if req.operation == Operation::Update
                && crate::engine::update::immutable_templates(&verdict.object)
                && !verdict.patch.only_template_metadata() =>
        {
            (base, None)
        }
        // A Scale is judged on the workload it scales; that workload's patch would not
        // apply to the Scale object.
        Endpoint::Mutate if verdict.patch.is_empty() || is_scale => (base, None),
        Endpoint::Mutate => match encode_patch(
            &verdict.patch,
            &verdict.object,
            judges.limits.max_patch_bytes,
        ) {
            Ok(encoded) => (base, Some(encoded)),
            Err(e) => {
                let message = format!("trainplace cannot patch {}: {e}", object_name(req));
                return refused(base, message);
            }
        },
        Endpoint::Validate => (validation_response(base, &verdict), None),
    };
    let verdict = Box::new(verdict);
    (resp, patch, Outcome::Judged { operation, verdict })
}

/// Reviews with nothing to judge: not a CREATE or UPDATE, no object, or an UPDATE of a
/// Pod at the mutating webhook (a pod's layout is fixed when it is created; an UPDATE
/// is only validated, its job label in `update.rs`, never patched).
fn passes(endpoint: Endpoint, req: &AdmissionRequest<DynamicObject>, object: &Value) -> bool {
    !matches!(req.operation, Operation::Create | Operation::Update)
        || object.is_null()
        || (endpoint == Endpoint::Mutate
            && req.operation == Operation::Update
            && req.kind.kind == "Pod"
            && req.kind.group.is_empty())
        || scheduler_claim(req, object)
}

/// A ResourceClaim kube-scheduler writes for a pod's DRA-backed extended resources:
/// one request per container of the counts the pod asks for, which the pod was judged
/// on when it was created. Judging the claim again per request would refuse the pod's
/// own devices (a whole 1-GPU node, 8 GPUs split 4 + 4 over two containers) and its
/// granted opt-in, which the scheduler does not copy: the pod would stay Pending. Only
/// the scheduler itself is believed; the annotation alone, which anyone can write, is not.
/// <https://github.com/kubernetes/enhancements/tree/master/keps/sig-scheduling/5004-dra-extended-resource>
fn scheduler_claim(req: &AdmissionRequest<DynamicObject>, object: &Value) -> bool {
    use crate::read::annotations::{EXTENDED_RESOURCE_CLAIM, SCHEDULER_USER};
    req.operation == Operation::Create
        && req.kind.group == "resource.k8s.io"
        && req.kind.kind == "ResourceClaim"
        && req.user_info.username.as_deref() == Some(SCHEDULER_USER)
        && crate::read::json::str_at(
            object,
            &["metadata", "annotations", EXTENDED_RESOURCE_CLAIM],
        ) == Some("true")
}
