//! The webhook's entry point, `review_bytes`: an AdmissionReview read from the
//! request body in one pass, `oldObject` kept as text (built only when the validating
//! webhook judges an UPDATE, `updates.rs`), and bodies that
//! are not JSON told apart from JSON of the wrong shape.

use serde_json::{Value, json};
use trainplace_engine::{Endpoint, Limits, Outcome, Policy, review, review_bytes};

/// The benchmarks' ~10 KB JobSet training pod on p5.48xlarge, which the mutating
/// webhook patches (EFA, hostIPC, NCCL env, ...).
fn pod() -> Value {
    serde_json::from_str(include_str!(
        "../../../tests/fixtures/bench/training-pod-10k.json"
    ))
    .expect("the bench pod")
}

fn admission(operation: &str, object: Value, old_object: Option<Value>) -> Value {
    let mut request = json!({"uid": "u-7",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "name": "trainer-0", "namespace": "ml", "operation": operation,
        "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
        "object": object});
    if let Some(old) = old_object {
        request["oldObject"] = old;
    }
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})
}

fn answer_of(bytes: &[u8], endpoint: Endpoint) -> Value {
    let policy = Policy::embedded();
    let reviewed = review_bytes(
        bytes,
        endpoint,
        &policy,
        None,
        None,
        &Limits::default(),
        None,
    )
    .expect("a JSON body");
    serde_json::from_slice(&reviewed.body.expect("encoded")).expect("the answer is JSON")
}

fn message(answer: &Value) -> &str {
    answer["response"]["status"]["message"]
        .as_str()
        .unwrap_or("")
}

#[test]
fn bytes_and_parsed_json_get_the_same_answer() {
    let policy = Policy::embedded();
    let body = admission("CREATE", pod(), None);
    for endpoint in [Endpoint::Mutate, Endpoint::Validate] {
        let from_value = review(body.clone(), endpoint, &policy, None, None);
        let from_value: Value = serde_json::from_slice(&from_value.body.unwrap()).unwrap();
        let from_bytes = answer_of(&serde_json::to_vec(&body).unwrap(), endpoint);
        assert_eq!(from_value, from_bytes);
    }
    let patched = answer_of(&serde_json::to_vec(&body).unwrap(), Endpoint::Mutate);
    assert_eq!(patched["response"]["uid"], "u-7");
    assert_eq!(patched["response"]["patchType"], "JSONPatch", "{patched}");
}

#[test]
fn an_update_is_judged_on_its_object_whatever_its_old_object_holds() {
    let create = answer_of(
        &serde_json::to_vec(&admission("CREATE", pod(), None)).unwrap(),
        Endpoint::Mutate,
    );
    // An old object of another shape entirely, and one nested deep: neither is read.
    let mut deep = json!(1);
    for _ in 0..100 {
        deep = json!({"d": [deep]});
    }
    let deep_body = serde_json::to_vec(&admission("UPDATE", pod(), Some(deep))).unwrap();
    // Building the whole review as a JSON tree, as the webhook did, refuses it.
    let e = serde_json::from_slice::<Value>(&deep_body).unwrap_err();
    assert!(e.to_string().contains("recursion limit exceeded"), "{e}");
    let other = json!({"apiVersion": "v1", "kind": "Pod", "spec": "not a spec"});
    let other_body = serde_json::to_vec(&admission("UPDATE", pod(), Some(other))).unwrap();
    for body in [other_body, deep_body] {
        // The mutating webhook never patches a pod on UPDATE (its layout is fixed at
        // creation); the validating one judges the object as it is.
        let update = answer_of(&body, Endpoint::Mutate);
        assert_eq!(update["response"]["allowed"], true, "{update}");
        assert!(update["response"]["patch"].is_null(), "{update}");
        let judged = answer_of(&body, Endpoint::Validate);
        assert_eq!(judged["response"]["uid"], "u-7", "answered: {judged}");
    }
    assert!(create["response"]["patch"].is_string(), "{create}");
}

#[test]
fn a_body_that_is_not_json_is_told_apart_from_json_of_the_wrong_shape() {
    let policy = Policy::embedded();
    let limits = Limits::default();
    let not_json = |body: &[u8]| {
        review_bytes(body, Endpoint::Mutate, &policy, None, None, &limits, None)
            .err()
            .map(|e| e.to_string())
    };
    let e = not_json(b"{\"apiVersion\": ").expect("an early end is not JSON");
    assert!(e.contains("not an AdmissionReview JSON document"), "{e}");
    // A broken oldObject is still broken JSON, though it is never built.
    let mut text = serde_json::to_string(&admission("UPDATE", pod(), Some(json!({})))).unwrap();
    text = text.replace("\"oldObject\":{}", "\"oldObject\":{,}");
    assert!(text.contains("{,}"), "{text}");
    assert!(not_json(text.as_bytes()).is_some());
    assert_eq!(
        not_json(b"[1, 2]"),
        None,
        "JSON of the wrong shape is a review answer"
    );
}

#[test]
fn a_review_of_the_wrong_shape_is_refused_naming_what_is_wrong() {
    let cases: [(Value, &str); 5] = [
        (json!([1, 2]), "got \"\" \"\""),
        (
            json!({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview",
                "request": {"uid": 7}}),
            "expected apiVersion admission.k8s.io/v1 kind AdmissionReview, got \"admission.k8s.io/v1beta1\"",
        ),
        (
            json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}),
            "AdmissionReview has no request",
        ),
        (
            {
                let mut r = admission("CREATE", pod(), None);
                r["request"]["operation"] = json!("PATCH");
                r
            },
            "malformed AdmissionReview request: unknown variant `PATCH`",
        ),
        (
            {
                let mut r = admission("CREATE", pod(), None);
                r["request"]["uid"] = json!(["u"]);
                r
            },
            "malformed AdmissionReview request: invalid type: sequence, expected a string",
        ),
    ];
    for (body, wanted) in cases {
        let answer = answer_of(&serde_json::to_vec(&body).unwrap(), Endpoint::Validate);
        assert_eq!(answer["response"]["allowed"], false, "{answer}");
        assert!(message(&answer).contains(wanted), "{wanted:?} in {answer}");
    }
}

#[test]
fn a_review_naming_its_object_twice_is_refused_not_read_either_way() {
    // serde_json's tree keeps the last of two equal keys; the typed read refuses them,
    // so there is no second object a reader could disagree about.
    let text = serde_json::to_string(&admission("CREATE", pod(), None)).unwrap();
    let twice = text.replacen(
        "\"object\":",
        "\"object\":{\"kind\":\"ConfigMap\"},\"object\":",
        1,
    );
    let policy = Policy::embedded();
    let reviewed = review_bytes(
        twice.as_bytes(),
        Endpoint::Validate,
        &policy,
        None,
        None,
        &Limits::default(),
        None,
    )
    .expect("JSON");
    assert!(
        matches!(&reviewed.outcome, Outcome::Invalid(m) if m.contains("duplicate field `object`")),
        "{:?}",
        reviewed.outcome
    );
}

#[test]
fn a_body_that_is_not_utf8_is_not_json_and_utf8_text_reads_as_before() {
    let policy = Policy::embedded();
    let limits = Limits::default();
    // Text beyond ASCII, raw and escaped, reads the same from bytes as from a tree.
    let mut pod = pod();
    pod["metadata"]["annotations"]["team.example/owner"] = json!("Zoë ✓ 训练 \u{1F680}");
    let body = admission("CREATE", pod, None);
    let mut bytes = serde_json::to_vec(&body).unwrap();
    let from_value = review(body.clone(), Endpoint::Mutate, &policy, None, None);
    let from_value: Value = serde_json::from_slice(&from_value.body.unwrap()).unwrap();
    assert_eq!(from_value, answer_of(&bytes, Endpoint::Mutate));
    // One byte that cannot start a UTF-8 character, inside the owner's name: the
    // body is not JSON (RFC 8259 §8.1) and the answer is HTTP 400, never a review.
    let at = bytes
        .windows(3)
        .position(|w| w == b"Zo\xc3")
        .expect("the name")
        + 1;
    bytes[at] = 0xff;
    assert!(std::str::from_utf8(&bytes).is_err());
    let e = review_bytes(&bytes, Endpoint::Mutate, &policy, None, None, &limits, None)
        .err()
        .expect("a body that is not UTF-8 is not JSON")
        .to_string();
    assert!(e.contains("invalid unicode code point"), "{e}");
}
