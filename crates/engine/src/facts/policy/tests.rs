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
    let text = include_str!("../../../../../examples/policy-restricted.yaml");
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
        marks: None,
        now: None,
        claims: None,
        updating: None,
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
        marks: None,
        now: None,
        claims: None,
        updating: None,
    };
    let user = Requester {
        namespace: "prod",
        namespace_labels: None,
        groups: &users,
        inventory: None,
        marks: None,
        now: None,
        claims: None,
        updating: None,
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
        marks: None,
        now: None,
        claims: None,
        updating: None,
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

#[test]
fn a_file_that_sets_one_default_keeps_every_other_section() {
    let text = "apiVersion: trainplace.io/v1alpha1\nkind: Policy\ndefaults:\n  instanceType: p5.48xlarge\n";
    let p = Policy::from_parts(text, "p.yaml", Catalog::embedded()).unwrap();
    let who = Requester {
        namespace: "team-a",
        ..Default::default()
    };
    // A file without optIns keeps the defaults' grants: it does not revoke every opt-in.
    assert!(p.may_opt_in(OptIn::AllowPartialNode, &who));
    assert!(p.may_opt_in(OptIn::Skip, &who));
    let eff = p.effective(&who);
    assert_eq!(eff.defaults.instance_type.as_deref(), Some("p5.48xlarge"));
    assert_eq!(eff.defaults.aws_ofi_nccl_version.as_deref(), Some("1.16.0"));
    assert_eq!(eff.mode_partial_node(), Mode::Enforce);
    assert!(p.warnings().is_empty());
}

#[test]
fn a_file_that_writes_opt_ins_decides_every_grant() {
    let text = "apiVersion: trainplace.io/v1alpha1\nkind: Policy\noptIns:\n  skip: { namespaces: [\"*\"], groups: [admins] }\nrules:\n  multiAz: warn\n";
    let p = Policy::from_parts(text, "p.yaml", Catalog::embedded()).unwrap();
    let who = Requester {
        namespace: "team-a",
        ..Default::default()
    };
    assert!(!p.may_opt_in(OptIn::AllowPartialNode, &who));
    assert!(!p.may_opt_in(OptIn::Skip, &who));
    let eff = p.effective(&who);
    assert_eq!(eff.mode_multi_az(), Mode::Warn);
    assert_eq!(eff.mode_partial_node(), Mode::Enforce);
}

#[test]
fn kebab_case_keys_are_read_with_a_deprecation_warning() {
    let old = "apiVersion: trainplace.io/v1alpha1\nkind: Policy\nrules:\n  partial-node: warn\noptIns:\n  allow-multi-az: { namespaces: [\"*\"], groups: [\"*\"] }\nnamespaces:\n  - match: { names: [research] }\n    rules: { multi-az: audit }\n";
    let p = Policy::from_parts(old, "old.yaml", Catalog::embedded()).unwrap();
    let who = Requester {
        namespace: "research",
        ..Default::default()
    };
    assert_eq!(p.effective(&who).mode_partial_node(), Mode::Warn);
    assert_eq!(p.effective(&who).mode_multi_az(), Mode::Audit);
    assert!(p.may_opt_in(OptIn::AllowMultiAz, &who));
    let w = p.warnings().join("\n");
    assert!(
        w.contains(
            "old.yaml: rules.partial-node is the deprecated spelling; write rules.partialNode"
        ),
        "{w}"
    );
    assert!(
        w.contains("optIns.allow-multi-az") && w.contains("optIns.allowMultiAz"),
        "{w}"
    );
    assert!(w.contains("namespaces[0].rules.multi-az"), "{w}");
    let new = old
        .replace("partial-node", "partialNode")
        .replace("allow-multi-az", "allowMultiAz")
        .replace("multi-az", "multiAz");
    let p = Policy::from_parts(&new, "new.yaml", Catalog::embedded()).unwrap();
    assert!(p.warnings().is_empty(), "{:?}", p.warnings());
}
