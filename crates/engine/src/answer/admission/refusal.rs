//! How a review is refused: the object's name in messages, the container bound, the
//! 403 denial, and the validating webhook's denial with its warnings.

use kube_core::DynamicObject;
use kube_core::admission::{AdmissionRequest, AdmissionResponse};
use serde_json::Value;

use super::Endpoint;
use crate::answer::response::{Limits, count_containers};
use crate::budget::OverBudget;
use crate::judge::verdict::Verdict;
use crate::read::tree_size::TreeSize;

/// How messages name the object under review: its kind and name.
pub(super) fn object_name(req: &AdmissionRequest<DynamicObject>) -> String {
    let name = if req.name.is_empty() {
        "(unnamed)"
    } else {
        &req.name
    };
    format!("{} {name}", req.kind.kind)
}

/// Why an object carrying more containers than one review may is refused, if it does.
pub(super) fn too_many_containers(
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
pub(super) fn validation_response(base: AdmissionResponse, verdict: &Verdict) -> AdmissionResponse {
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

/// The answer to a review that ran out of budget: the validating webhook denies the
/// object naming the field and the limit; the mutating one allows it unchanged and
/// says why it has no layout.
pub(super) fn over_budget(
    endpoint: Endpoint,
    base: AdmissionResponse,
    req: &AdmissionRequest<DynamicObject>,
    over: &OverBudget,
) -> AdmissionResponse {
    unread(endpoint, base, req, &over.to_string())
}

/// The answer to an object too large to build as a tree (`read::tree_size`): as
/// `over_budget`, naming its estimated size, its longest list and the limit.
pub(super) fn too_big_to_read(
    endpoint: Endpoint,
    base: AdmissionResponse,
    req: &AdmissionRequest<DynamicObject>,
    size: &TreeSize,
) -> AdmissionResponse {
    let mib = |b: u64| b.div_ceil(1024 * 1024);
    let longest = size
        .longest
        .as_ref()
        .map(|(path, n)| format!(" (its longest list: {path}, {n} entries)"))
        .unwrap_or_default();
    let why = format!(
        "reading it would take about {} MiB of memory{longest}, more than the {} MiB one review may use",
        mib(size.held()),
        mib(super::MAX_TREE_BYTES)
    );
    unread(endpoint, base, req, &why)
}

/// An object answered without a verdict, for `why`: the validating webhook denies it,
/// the mutating one admits it unchanged and says why it has no layout.
fn unread(
    endpoint: Endpoint,
    base: AdmissionResponse,
    req: &AdmissionRequest<DynamicObject>,
    why: &str,
) -> AdmissionResponse {
    let name = object_name(req);
    match endpoint {
        Endpoint::Validate => deny(
            base,
            &format!(
                "trainplace refuses {name}: {why}. No training object needs that much; shorten the list or split the object"
            ),
        ),
        Endpoint::Mutate => {
            let mut resp = base;
            resp.warnings = Some(vec![format!(
                "trainplace did not lay out {name}: {why}. It is admitted without a layout; the validating webhook judges it"
            )]);
            resp
        }
    }
}

pub(super) fn deny(resp: AdmissionResponse, message: &str) -> AdmissionResponse {
    let mut resp = resp.deny(message);
    resp.result.code = 403;
    resp.result.status = Some(kube_core::response::StatusSummary::Failure);
    resp.result.reason = "Forbidden".into();
    resp
}
