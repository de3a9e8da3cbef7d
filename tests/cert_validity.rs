//! The serving certificate over real TLS: an expired, not-yet-valid or mismatched
//! certificate is refused (at start and on reload, keeping the last good one); one
//! close to expiry is served with its days left on /metrics.

mod common;

use std::path::{Path, PathBuf};

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
async fn failed_reloads(srv: &trainplace::server::Running, n: u64) -> bool {
    let series = "trainplace_certificate_reloads_total{outcome=\"failure\"}";
    wait_for_count(srv.probe_addr, series, n).await
}

/// A Secret volume as kubelet mounts it: `tls.crt` and `tls.key` link through `..data`
/// to one directory per version, and a new version replaces `..data` in one rename. The
/// server's watcher sees each version whole, never a new certificate beside an old
/// key, so each version is exactly one reload to wait for.
struct SecretVolume {
    root: tempfile::TempDir,
    versions: std::cell::Cell<u32>,
}

impl SecretVolume {
    fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        for file in ["tls.crt", "tls.key"] {
            std::os::unix::fs::symlink(format!("..data/{file}"), root.path().join(file)).unwrap();
        }
        SecretVolume {
            root,
            versions: std::cell::Cell::new(0),
        }
    }

    /// The certificate and key paths the server is given.
    fn paths(&self) -> (PathBuf, PathBuf) {
        (
            self.root.path().join("tls.crt"),
            self.root.path().join("tls.key"),
        )
    }

    /// Publish a new version; `write` fills its directory with tls.crt and tls.key.
    fn publish(&self, write: impl FnOnce(&Path)) {
        let n = self.versions.get() + 1;
        self.versions.set(n);
        let version = format!("..v{n}");
        std::fs::create_dir(self.root.path().join(&version)).unwrap();
        write(&self.root.path().join(&version));
        let link = self.root.path().join("..data_tmp");
        std::os::unix::fs::symlink(&version, &link).unwrap();
        std::fs::rename(&link, self.root.path().join("..data")).unwrap();
    }
}

#[tokio::test]
async fn reload_refuses_expired_not_yet_valid_and_mismatched_certificates() {
    let volume = SecretVolume::new();
    let good = Pki::new("good-ca");
    volume.publish(|d| {
        good.write_leaf(d);
    });
    let srv = serve(config(Some(volume.paths()), None)).await;
    assert!(trusted_by(&srv, &good).await);
    let now = OffsetDateTime::now_utc();

    // Expired yesterday.
    let bad = Pki::new("expired-ca");
    volume.publish(|d| {
        bad.write_leaf_valid(d, Some((now - days(30), now - days(1))));
    });
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
    volume.publish(|d| {
        early.write_leaf_valid(d, Some((now + days(1), now + days(90))));
    });
    assert!(
        failed_reloads(&srv, 2).await,
        "not-yet-valid certificate not refused"
    );
    assert!(!trusted_by(&srv, &early).await);

    // A valid certificate with another certificate's key.
    let mixed = Pki::new("mixed-ca");
    volume.publish(|d| {
        let (crt, _) = mixed.write_leaf(d);
        let stray = tempfile::tempdir().unwrap();
        let (_, stray_key) = mixed.write_leaf(stray.path());
        common::write_atomic(
            &crt.with_file_name("tls.key"),
            &std::fs::read(stray_key).unwrap(),
        );
    });
    assert!(failed_reloads(&srv, 3).await, "mismatched key not refused");
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
