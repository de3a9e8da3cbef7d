//! The serving certificate over real TLS: an expired, not-yet-valid or mismatched
//! certificate is refused (at start and on reload, keeping the last good one); one
//! close to expiry is served with its days left on /metrics.

mod common;

use std::time::Duration;

use common::*;
use time::OffsetDateTime;

fn days(n: i64) -> time::Duration {
    time::Duration::days(n)
}

/// Does a client trusting only `ca` complete a request against the server?
async fn trusted_by(srv: &trainplace::server::Running, ca: &Pki) -> bool {
    let pod = fixture_object("full-node-p5-jobset");
    client(&ca.ca_pem)
        .post(format!("{}/validate", https_base(srv)))
        .json(&review_for(&pod, "t"))
        .send()
        .await
        .is_ok()
}

/// Wait until at least `n` certificate reloads have failed.
async fn failed_reloads(srv: &trainplace::server::Running, n: u32) -> bool {
    for _ in 0..50 {
        let m = metrics_text(srv.probe_addr).await;
        let failed = m
            .lines()
            .find_map(|l| {
                l.strip_prefix("trainplace_certificate_reloads_total{outcome=\"failure\"} ")
            })
            .and_then(|v| v.trim().parse::<u32>().ok())
            .unwrap_or(0);
        if failed >= n {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

#[tokio::test]
async fn reload_refuses_expired_not_yet_valid_and_mismatched_certificates() {
    let dir = tempfile::tempdir().unwrap();
    let good = Pki::new("good-ca");
    let (crt, key) = good.write_leaf(dir.path());
    let srv = serve(config(Some((crt.clone(), key.clone())), None)).await;
    assert!(trusted_by(&srv, &good).await);
    let now = OffsetDateTime::now_utc();

    // Expired yesterday.
    let bad = Pki::new("expired-ca");
    bad.write_leaf_valid(dir.path(), Some((now - days(30), now - days(1))));
    assert!(
        failed_reloads(&srv, 1).await,
        "expired certificate not refused"
    );
    assert!(
        trusted_by(&srv, &good).await,
        "last good certificate not kept"
    );
    assert!(!trusted_by(&srv, &bad).await, "expired certificate served");

    // Valid only from tomorrow.
    let early = Pki::new("early-ca");
    early.write_leaf_valid(dir.path(), Some((now + days(1), now + days(90))));
    assert!(
        failed_reloads(&srv, 2).await,
        "not-yet-valid certificate not refused"
    );
    assert!(!trusted_by(&srv, &early).await);

    // A valid certificate with another certificate's key (each step is a mismatch).
    let (one, two) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mixed = Pki::new("mixed-ca");
    let (mixed_crt, _) = mixed.write_leaf(one.path());
    let (_, stray_key) = mixed.write_leaf(two.path());
    common::write_atomic(&crt, &std::fs::read(&mixed_crt).unwrap());
    common::write_atomic(&key, &std::fs::read(&stray_key).unwrap());
    assert!(failed_reloads(&srv, 3).await, "mismatched key not refused");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(trusted_by(&srv, &good).await);
    assert!(!trusted_by(&srv, &mixed).await);
    srv.handle.shutdown();
}

#[tokio::test]
async fn start_refuses_an_expired_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let now = OffsetDateTime::now_utc();
    let ca = Pki::new("expired-ca");
    let (crt, key) = ca.write_leaf_valid(dir.path(), Some((now - days(30), now - days(1))));
    let error = trainplace::server::start(config(Some((crt, key)), None))
        .await
        .err()
        .expect("an expired certificate must not start the server");
    let text = format!("{error:#}");
    assert!(text.contains("expired"), "{text}");
}

#[tokio::test]
async fn a_certificate_close_to_expiry_is_served_with_its_days_left() {
    let dir = tempfile::tempdir().unwrap();
    let now = OffsetDateTime::now_utc();
    let ca = Pki::new("soon-ca");
    let (crt, key) = ca.write_leaf_valid(
        dir.path(),
        Some((now - days(80), now + days(5) + time::Duration::hours(1))),
    );
    let srv = serve(config(Some((crt, key)), None)).await;
    assert!(trusted_by(&srv, &ca).await);
    assert!(srv.store.days_left() == 5, "{}", srv.store.days_left());
    assert!(srv.store.warn_if_expiring() < trainplace::server::tls::EXPIRY_WARNING_DAYS);
    let m = metrics_text(srv.probe_addr).await;
    assert!(m.contains("trainplace_certificate_expiry_days 5"), "{m}");
    srv.handle.shutdown();
}
