//! Who sent a review and which object it is about, read again from the AdmissionReview
//! only when the answer denies or warns (rare): the requester for the denial's log line,
//! the object (or, for a pod named by `generateName` only, its controller) for its Event.

use k8s_openapi::api::core::v1::ObjectReference;
use serde::Deserialize;

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Review {
    request: Request,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct Request {
    kind: Gvk,
    namespace: Option<String>,
    user_info: UserInfo,
    object: Object,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Gvk {
    group: String,
    version: String,
    kind: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct UserInfo {
    username: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Object {
    metadata: Metadata,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct Metadata {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    owner_references: Vec<Owner>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct Owner {
    api_version: String,
    kind: String,
    name: String,
    uid: String,
    controller: Option<bool>,
}

/// The requester and the object an Event is about.
#[derive(Debug, Clone, PartialEq)]
pub struct Subject {
    pub user: String,
    pub regarding: ObjectReference,
}

/// Read `bytes` (an AdmissionReview already judged, so known to parse) for its subject.
pub fn read(bytes: &[u8]) -> Option<Subject> {
    let review: Review = serde_json::from_slice(bytes).ok()?;
    let r = review.request;
    let meta = r.object.metadata;
    let namespace = meta.namespace.or(r.namespace);
    let api_version = if r.kind.group.is_empty() {
        r.kind.version
    } else {
        format!("{}/{}", r.kind.group, r.kind.version)
    };
    let owner = meta
        .owner_references
        .into_iter()
        .find(|o| o.controller == Some(true));
    let regarding = match (meta.name, owner) {
        (None, Some(o)) => ObjectReference {
            api_version: Some(o.api_version),
            kind: Some(o.kind),
            name: Some(o.name),
            namespace,
            uid: Some(o.uid),
            ..Default::default()
        },
        (name, _) => ObjectReference {
            api_version: Some(api_version),
            kind: Some(r.kind.kind),
            name,
            namespace,
            uid: meta.uid,
            ..Default::default()
        },
    };
    Some(Subject {
        user: r.user_info.username,
        regarding,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_named_object_is_its_own_subject_and_a_generated_pod_its_controllers() {
        let review = json!({"request": {"kind": {"group": "batch", "version": "v1", "kind": "Job"},
            "namespace": "ml", "userInfo": {"username": "alice", "groups": ["x"]},
            "object": {"metadata": {"name": "bert", "uid": "u1"}, "spec": {}}}});
        let s = read(review.to_string().as_bytes()).unwrap();
        assert_eq!(s.user, "alice");
        assert_eq!(s.regarding.api_version.as_deref(), Some("batch/v1"));
        assert_eq!(s.regarding.kind.as_deref(), Some("Job"));
        assert_eq!(s.regarding.name.as_deref(), Some("bert"));
        assert_eq!(s.regarding.namespace.as_deref(), Some("ml"));
        assert_eq!(s.regarding.uid.as_deref(), Some("u1"));

        let pod = json!({"request": {"kind": {"group": "", "version": "v1", "kind": "Pod"},
            "namespace": "ml", "userInfo": {"username": "system:serviceaccount:kube-system:job-controller"},
            "object": {"metadata": {"generateName": "bert-0-", "ownerReferences": [
                {"apiVersion": "batch/v1", "kind": "Job", "name": "bert", "uid": "u1", "controller": true}]}}}});
        let s = read(pod.to_string().as_bytes()).unwrap();
        assert_eq!(s.regarding.kind.as_deref(), Some("Job"));
        assert_eq!(s.regarding.name.as_deref(), Some("bert"));
        assert_eq!(s.regarding.namespace.as_deref(), Some("ml"));
    }
}
