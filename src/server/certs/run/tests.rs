use std::time::Duration;

use super::super::cluster::Hooks;
use super::super::issue::new_ca;
use super::*;

fn hooks(bundles: &[&str]) -> Hooks {
    Hooks {
        kind: "MutatingWebhookConfiguration",
        name: "trainplace".to_string(),
        resource_version: "1".to_string(),
        bundles: bundles
            .iter()
            .enumerate()
            .map(|(i, b)| (format!("w{i}"), b.as_bytes().to_vec()))
            .collect(),
    }
}

#[test]
fn the_next_ca_counts_as_trusted_only_when_every_webhook_carries_it() {
    let old = new_ca(1_800_000_000, Duration::from_secs(60)).unwrap().cert;
    let next = new_ca(1_800_000_040, Duration::from_secs(60)).unwrap().cert;
    let both = format!("{old}{next}");
    assert!(hooks_trust(
        &[hooks(&[&both]), hooks(&[&both, &next])],
        &next
    ));
    assert!(!hooks_trust(&[hooks(&[&both]), hooks(&[&old])], &next));
    assert!(
        !hooks_trust(&[hooks(&[&both, ""])], &next),
        "an empty caBundle"
    );
    assert!(!hooks_trust(&[hooks(&["garbage"])], &next));
}

#[test]
fn the_serving_names_are_the_services_four_forms_then_the_extra_ones() {
    let names = serving_names("tp", "ns", &["127.0.0.1".into(), "tp.ns.svc".into()]);
    assert_eq!(
        names,
        [
            "tp",
            "tp.ns",
            "tp.ns.svc",
            "tp.ns.svc.cluster.local",
            "127.0.0.1"
        ]
    );
}

#[test]
fn a_replica_that_registered_says_so_while_it_waits() {
    let why = "the Service has no ready endpoint yet";
    assert_eq!(
        waiting_text(why, false),
        "not registered yet: the Service has no ready endpoint yet"
    );
    // The configurations stay (and `trainplace_webhooks_registered` stays 1): /readyz
    // does not say they are missing.
    assert_eq!(
        waiting_text(why, true),
        "registered earlier; not applied again now: the Service has no ready endpoint yet"
    );
}
