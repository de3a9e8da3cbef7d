//! Property tests ("fuzzing") of the parsers that take untrusted input: the
//! AdmissionReview path and the policy loader. They must never panic, and a review
//! must always produce an AdmissionReview answer. proptest keeps failing seeds in
//! `proptest-regressions/`, and the hand-kept regression cases below run every time.

use proptest::prelude::*;
use serde_json::{Value, json};
use trainplace_engine::{Catalog, Policy};
use trainplace_engine::{Endpoint, review};

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        (-1e12f64..1e12).prop_map(|f| json!(f)),
        "[a-zA-Z0-9/._-]{0,12}".prop_map(Value::String),
        prop_oneof![
            Just("nvidia.com/gpu"),
            Just("8"),
            Just("-1"),
            Just("p5.48xlarge"),
            Just("true"),
            Just("In")
        ]
        .prop_map(|s| Value::String(s.into())),
    ];
    leaf.prop_recursive(5, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    "[a-z]{1,8}".prop_map(String::from),
                    Just("spec".to_string()),
                    Just("containers".to_string()),
                    Just("resources".to_string()),
                    Just("limits".to_string()),
                    Just("nvidia.com/gpu".to_string()),
                    Just("metadata".to_string()),
                    Just("labels".to_string()),
                    Just("annotations".to_string()),
                    Just("env".to_string()),
                    Just("affinity".to_string()),
                ],
                inner,
                0..5
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn base_review() -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "a",
            "operation": "CREATE",
            "userInfo": {"username": "x", "groups": ["g"]},
            "object": {
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "p", "labels": {"jobset.sigs.k8s.io/jobset-name": "j"}},
                "spec": {
                    "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"},
                    "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 8}}}]
                }
            }
        }
    })
}

/// Every path into a JSON value, as JSON Pointers.
fn pointers(v: &Value, at: String, out: &mut Vec<String>) {
    out.push(at.clone());
    match v {
        Value::Object(m) => m.iter().for_each(|(k, c)| {
            pointers(
                c,
                format!("{at}/{}", k.replace('~', "~0").replace('/', "~1")),
                out,
            )
        }),
        Value::Array(a) => a
            .iter()
            .enumerate()
            .for_each(|(i, c)| pointers(c, format!("{at}/{i}"), out)),
        _ => {}
    }
}

fn answered(body: Value) {
    let policy = Policy::embedded();
    for ep in [Endpoint::Mutate, Endpoint::Validate] {
        let r = review(body.clone(), ep, &policy, None, None);
        let answer: Value =
            serde_json::from_slice(r.body.as_ref().expect("encoded")).expect("JSON");
        assert!(
            answer["response"]["allowed"].is_boolean(),
            "no answer for {body}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_json_never_panics(v in arb_json()) {
        answered(v.clone());
        let mut r = base_review();
        r["request"]["object"] = v;
        answered(r);
    }

    #[test]
    fn any_subtree_of_a_real_review_replaced(seed in any::<prop::sample::Index>(), v in arb_json()) {
        let mut r = base_review();
        let mut ps = Vec::new();
        pointers(&r, String::new(), &mut ps);
        let p = seed.get(&ps).clone();
        if let Some(slot) = r.pointer_mut(&p) { *slot = v; }
        answered(r);
    }

    #[test]
    fn policy_text_never_panics(text in "[ -~\n]{0,400}") {
        let _ = Policy::from_parts(&text, "fuzz.yaml", Catalog::embedded());
        let _ = Catalog::from_yaml(&text, "fuzz.yaml");
    }

    #[test]
    fn damaged_default_policy_never_panics(cut in 0usize..2000, insert in "[ -~\n]{0,8}") {
        let mut text = trainplace_engine::EMBEDDED_POLICY.to_string();
        let at = cut.min(text.len());
        let at = (0..=at).rev().find(|i| text.is_char_boundary(*i)).unwrap_or(0);
        text.insert_str(at, &insert);
        let _ = Policy::from_parts(&text, "fuzz.yaml", Catalog::embedded());
    }
}

/// Cases found while fuzzing or by hand, kept as plain tests.
#[test]
fn regression_cases() {
    let cases = [
        json!(null),
        json!([]),
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": null}),
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": 5}}),
        // GPU count beyond u32, negative EFA, env as a string, containers as an object.
        {
            let mut r = base_review();
            r["request"]["object"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] =
                json!(1u64 << 40);
            r
        },
        {
            let mut r = base_review();
            r["request"]["object"]["spec"]["containers"][0]["resources"]["limits"]["vpc.amazonaws.com/efa"] =
                json!(-3);
            r
        },
        {
            let mut r = base_review();
            r["request"]["object"]["spec"]["containers"][0]["env"] = json!("PET_NNODES=4");
            r
        },
        {
            let mut r = base_review();
            r["request"]["object"]["spec"]["containers"] = json!({"name": "c"});
            r
        },
        {
            let mut r = base_review();
            r["request"]["object"]["spec"]["affinity"] = json!({"podAffinity": 3});
            r
        },
        {
            let mut r = base_review();
            r["request"]["object"]["metadata"]["annotations"] = json!(["x"]);
            r
        },
    ];
    for c in cases {
        answered(c);
    }
}
