use std::time::Duration;

use super::*;

fn inputs(now: i64, names: &[String], trust_next: bool) -> Inputs<'_> {
    Inputs {
        now,
        names,
        lifetimes: Lifetimes {
            ca: Duration::from_secs(60),
            serving: Duration::from_secs(21),
        },
        webhooks_trust_next: trust_next,
    }
}

fn cas_of(bundle: &str) -> Vec<String> {
    issue::certs("bundle", bundle)
        .unwrap()
        .iter()
        .map(|d| normalised("x", &String::from_utf8(pem(d)).unwrap()).unwrap())
        .collect()
}

fn pem(der: &[u8]) -> Vec<u8> {
    use base64::Engine;
    let b = base64::engine::general_purpose::STANDARD.encode(der);
    format!("-----BEGIN CERTIFICATE-----\n{b}\n-----END CERTIFICATE-----\n").into_bytes()
}

/// Whether a client trusting `bundle` accepts `serving` at `now`: a CA of the bundle
/// signed it and both are valid.
fn trusted(bundle: &str, serving: &str, now: i64) -> bool {
    let leaf = &issue::certs("leaf", serving).unwrap()[0];
    let leaf_ok = issue::der_window("leaf", leaf).unwrap().valid_at(now);
    leaf_ok
        && issue::certs("bundle", bundle).unwrap().iter().any(|ca| {
            issue::issued_by(leaf, ca) && issue::der_window("ca", ca).unwrap().valid_at(now)
        })
}

/// Three CA lifetimes in one-second steps. The API server's caBundle lags the Secret by
/// one step and a replica serves what the Secret held a step earlier: at every second the
/// served certificate is trusted by the caBundle the API server has, and the CA rotates.
#[test]
fn every_second_of_three_ca_lifetimes_the_served_certificate_is_trusted() {
    let names = vec!["trainplace.trainplace.svc".to_string()];
    let start = 1_800_000_000;
    let Step::Write { material, why } = plan(None, &inputs(start, &names, false)).unwrap() else {
        panic!("nothing written at first")
    };
    assert_eq!(why, Why::Created);
    let mut secret = material;
    let mut webhook_bundle = secret.bundle();
    let mut served = secret.serving.cert.clone();
    let mut whys = Vec::new();
    let mut signing_cas = vec![secret.signing.cert.clone()];
    for now in start + 1..start + 180 {
        let trust_next = secret
            .next
            .as_ref()
            .is_some_and(|n| cas_of(&webhook_bundle).contains(&normalised("n", &n.cert).unwrap()));
        let step = plan(Some(&secret), &inputs(now, &names, trust_next)).unwrap();
        if let Step::Write { material, why } = step {
            whys.push(why);
            secret = material;
        }
        assert!(
            trusted(&webhook_bundle, &served, now),
            "second {}: the served certificate is not trusted ({whys:?})",
            now - start
        );
        if signing_cas.last() != Some(&secret.signing.cert) {
            signing_cas.push(secret.signing.cert.clone());
        }
        // What the next second sees: the replica reloaded, the caBundle patched.
        served = secret.serving.cert.clone();
        webhook_bundle = secret.bundle();
        assert!(
            cas_of(&webhook_bundle).len() <= 2,
            "at most the old and the new CA"
        );
    }
    assert!(signing_cas.len() >= 3, "the CA rotated twice: {whys:?}");
    for why in [Why::NextCa, Why::Promoted, Why::Renewed, Why::Pruned] {
        assert!(whys.contains(&why), "{why:?} in {whys:?}");
    }
}

#[test]
fn the_next_ca_waits_for_the_webhooks_to_trust_it() {
    let names = vec!["a.b.svc".to_string()];
    let t0 = 1_800_000_000;
    let Step::Write { material, .. } = plan(None, &inputs(t0, &names, false)).unwrap() else {
        panic!()
    };
    let Step::Write { material, why } =
        plan(Some(&material), &inputs(t0 + 41, &names, false)).unwrap()
    else {
        panic!("a next CA at 2/3 of 60 s")
    };
    assert_eq!(why, Why::NextCa);
    let next = material.next.clone().unwrap();
    // Past the promotion time but the webhooks do not show the next CA: it does not sign.
    let step = plan(Some(&material), &inputs(t0 + 52, &names, false)).unwrap();
    if let Step::Write { material: m, .. } = &step {
        assert_eq!(m.next.as_ref(), Some(&next), "still waiting: {step:?}");
    }
    let Step::Write { material, why } =
        plan(Some(&material), &inputs(t0 + 52, &names, true)).unwrap()
    else {
        panic!("promoted")
    };
    assert_eq!(why, Why::Promoted);
    assert_eq!(material.signing, next);
    assert_eq!(
        cas_of(&material.bundle()).len(),
        2,
        "the old CA is still trusted"
    );
}

#[test]
fn a_changed_name_or_an_unusable_ca_is_replaced() {
    let names = vec!["a.b.svc".to_string()];
    let t0 = 1_800_000_000;
    let Step::Write { material, .. } = plan(None, &inputs(t0, &names, false)).unwrap() else {
        panic!()
    };
    assert_eq!(
        plan(Some(&material), &inputs(t0 + 1, &names, false)).unwrap(),
        Step::Keep
    );
    let other = vec!["c.d.svc".to_string()];
    let Step::Write { why, material: m } =
        plan(Some(&material), &inputs(t0 + 1, &other, false)).unwrap()
    else {
        panic!()
    };
    assert_eq!((why, &m.signing), (Why::Renewed, &material.signing));
    let mut wrong_key = material.clone();
    wrong_key.signing.key = material.serving.key.clone();
    let Step::Write { why, .. } = plan(Some(&wrong_key), &inputs(t0 + 1, &names, false)).unwrap()
    else {
        panic!()
    };
    assert_eq!(why, Why::Created);
    let Step::Write { why, .. } = plan(Some(&material), &inputs(t0 + 61, &names, false)).unwrap()
    else {
        panic!()
    };
    assert_eq!(why, Why::Created, "an expired CA starts over");
}
