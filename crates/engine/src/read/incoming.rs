//! What the webhook reads of an AdmissionReview, parsed in one pass: the request's
//! fields typed, its `object` as JSON, and its `oldObject` kept as raw text. Only the
//! validating webhook reads `oldObject` (to judge what an UPDATE changes), so it is
//! built as a JSON tree there and nowhere else.

use k8s_openapi::api::authentication::v1::UserInfo;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use kube_core::DynamicObject;
use kube_core::admission::{AdmissionRequest, Operation};
use kube_core::{GroupVersionKind, GroupVersionResource, TypeMeta};
use serde::Deserialize;
use serde_json::Value;

/// The review's envelope. Fields other than these (and those of [`Request`]) are
/// ignored, as kube-core's `AdmissionReview` ignores them.
/// `O` is how the object is read: a JSON tree, or skipped unread (`IgnoredAny`) when
/// the review is answered without it (a body too large to build, `read::tree_size`).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
#[serde(bound(deserialize = "O: Deserialize<'de> + Default"))]
pub(crate) struct Incoming<O = Value> {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub request: Option<Request<O>>,
}

/// kube-core's `AdmissionRequest` field for field (the same names, types and
/// defaults), except that `object` stays JSON and `oldObject` is not kept.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
#[serde(bound(deserialize = "O: Deserialize<'de> + Default"))]
pub(crate) struct Request<O = Value> {
    uid: String,
    kind: GroupVersionKind,
    resource: GroupVersionResource,
    #[serde(default)]
    sub_resource: Option<String>,
    #[serde(default)]
    request_kind: Option<GroupVersionKind>,
    #[serde(default)]
    request_resource: Option<GroupVersionResource>,
    #[serde(default)]
    request_sub_resource: Option<String>,
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: Option<String>,
    operation: Operation,
    user_info: UserInfo,
    #[serde(default)]
    object: O,
    // Kept as text (still checked to be well-formed JSON); built only when judged.
    #[serde(default, rename = "oldObject")]
    old_object: Option<Box<serde_json::value::RawValue>>,
    #[serde(default)]
    dry_run: bool,
    #[serde(default)]
    options: Option<RawExtension>,
}

impl<O> Request<O> {
    /// The object under review, and the rest of the request as kube-core's type
    /// (without objects), for building the response and reading who asked.
    pub(crate) fn split(
        self,
        types: TypeMeta,
    ) -> (
        O,
        Option<Box<serde_json::value::RawValue>>,
        AdmissionRequest<DynamicObject>,
    ) {
        let request = AdmissionRequest {
            types,
            uid: self.uid,
            kind: self.kind,
            resource: self.resource,
            sub_resource: self.sub_resource,
            request_kind: self.request_kind,
            request_resource: self.request_resource,
            request_sub_resource: self.request_sub_resource,
            name: self.name,
            namespace: self.namespace,
            operation: self.operation,
            user_info: self.user_info,
            object: None,
            old_object: None,
            dry_run: self.dry_run,
            options: self.options,
        };
        (self.object, self.old_object, request)
    }
}

/// Only the review's version and kind, to name them when the rest does not parse.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Types {
    #[serde(default)]
    pub api_version: Option<Value>,
    #[serde(default)]
    pub kind: Option<Value>,
}

impl Types {
    /// The version and kind as text ("" where missing or not a string).
    pub(crate) fn texts(&self) -> (&str, &str) {
        fn text(v: &Option<Value>) -> &str {
            v.as_ref().and_then(Value::as_str).unwrap_or("")
        }
        (text(&self.api_version), text(&self.kind))
    }
}
