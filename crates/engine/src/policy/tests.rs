use super::*;

#[test]
fn embedded_policy_loads() {
    let p = Policy::embedded();
    let who = Requester {
        namespace: "team-a",
        ..Default::default()
    };
    let eff = p.effective(&who);
    assert_eq!(eff.mode_partial_node(), Mode::Enforce);
    assert_eq!(eff.plugin_version, semver::Version::new(1, 16, 0));
    assert!(p.may_opt_in(OptIn::Skip, &who));
}

#[test]
fn unknown_key_is_an_error_with_line() {
    let text = "apiVersion: trainplace.io/v1alpha1\nkind: Policy\nrules:\n  partial-nod: warn\n";
    let err = Policy::from_parts(text, "p.yaml", Catalog::embedded()).unwrap_err();
    let msg = err.to_string();
    assert!(msg.starts_with("p.yaml:4:"), "{msg}");
    assert!(msg.contains("partial-nod"), "{msg}");
}

#[test]
fn bad_mode_is_an_error() {
    let text = "apiVersion: trainplace.io/v1alpha1\nkind: Policy\nrules:\n  multi-az: deny\n";
    let err = Policy::from_parts(text, "p.yaml", Catalog::embedded()).unwrap_err();
    assert!(err.to_string().contains("deny"), "{err}");
}

#[test]
fn unknown_default_instance_is_an_error() {
    let text =
        "apiVersion: trainplace.io/v1alpha1\nkind: Policy\ndefaults:\n  instanceType: p9.huge\n";
    let err = Policy::from_parts(text, "p.yaml", Catalog::embedded()).unwrap_err();
    assert!(err.to_string().contains("p9.huge"), "{err}");
}

fn restricted() -> Policy {
    let text = include_str!("../../../../examples/policy-restricted.yaml");
    Policy::from_parts(text, "examples/policy-restricted.yaml", Catalog::embedded()).unwrap()
}

#[test]
fn namespace_overrides_by_name_and_label() {
    let p = restricted();
    let research = Requester {
        namespace: "research",
        ..Default::default()
    };
    let eff = p.effective(&research);
    assert_eq!(eff.mode_partial_node(), Mode::Warn);
    assert_eq!(eff.mode_multi_az(), Mode::Warn);

    let labels = BTreeMap::from([("trainplace.io/tier".to_string(), "sandbox".to_string())]);
    let sandbox = Requester {
        namespace: "play",
        namespace_labels: Some(&labels),
        groups: &[],
        inventory: None,
    };
    let eff = p.effective(&sandbox);
    assert_eq!(eff.mode_partial_node(), Mode::Audit);
    assert_eq!(eff.mode_multi_az(), Mode::Enforce);
    assert_eq!(eff.defaults.instance_type.as_deref(), Some("g6e.48xlarge"));

    let other = Requester {
        namespace: "prod",
        ..Default::default()
    };
    assert_eq!(p.effective(&other).mode_partial_node(), Mode::Enforce);
}

#[test]
fn opt_in_grants_by_namespace_and_group() {
    let p = restricted();
    let admins = vec!["ml-platform-admins".to_string()];
    let users = vec!["system:authenticated".to_string()];
    let admin = Requester {
        namespace: "prod",
        namespace_labels: None,
        groups: &admins,
        inventory: None,
    };
    let user = Requester {
        namespace: "prod",
        namespace_labels: None,
        groups: &users,
        inventory: None,
    };
    assert!(p.may_opt_in(OptIn::Skip, &admin));
    assert!(!p.may_opt_in(OptIn::Skip, &user));
    assert!(!p.may_opt_in(OptIn::AllowMultiAz, &admin));
    assert!(!p.may_opt_in(OptIn::AllowPartialNode, &user));
    let research = Requester {
        namespace: "research",
        namespace_labels: None,
        groups: &users,
        inventory: None,
    };
    assert!(p.may_opt_in(OptIn::AllowPartialNode, &research));
}

#[test]
fn training_selectors_match() {
    let p = restricted();
    let labels = BTreeMap::from([(
        "app.kubernetes.io/component".to_string(),
        "trainer".to_string(),
    )]);
    assert!(p.training_selector_matches(&labels));
    assert!(!p.training_selector_matches(&BTreeMap::new()));
}
