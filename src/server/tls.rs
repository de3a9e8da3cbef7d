//! Serving certificate behind an `ArcSwap`: connections in flight keep the key they
//! handshook with; new handshakes get the newest good certificate.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use arc_swap::ArcSwap;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum TlsError {
    #[error("{path}: cannot read certificate chain: {message}")]
    Cert { path: String, message: String },
    #[error("{path}: cannot read private key: {message}")]
    Key { path: String, message: String },
    #[error("{path}: no certificate in the file")]
    NoCert { path: String },
    #[error("certificate and key do not match or the key type is unsupported: {0}")]
    Mismatch(String),
    #[error("cannot generate a self-signed certificate: {0}")]
    SelfSigned(String),
    #[error("{path}: cannot parse the leaf certificate: {message}")]
    Parse { path: String, message: String },
    #[error(
        "{path}: the certificate expired at {not_after} (unix time {not_after_unix}); renew it"
    )]
    Expired {
        path: String,
        not_after: String,
        not_after_unix: i64,
    },
    #[error(
        "{path}: the certificate is not valid before {not_before}; check the issuer's and this host's clocks"
    )]
    NotYetValid { path: String, not_before: String },
}

/// A certificate ready to serve, with when it stops being valid.
pub struct Loaded {
    pub key: CertifiedKey,
    /// The leaf's notAfter, unix seconds.
    pub not_after: i64,
}

/// Days from `now` (unix seconds) until `not_after`, rounded down (negative: past).
pub fn days_left(not_after: i64, now: i64) -> i64 {
    (not_after - now).div_euclid(86_400)
}

pub fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// The leaf's validity window; refuse it unless `now` lies inside.
fn check_validity(path: &str, leaf: &CertificateDer<'_>, now: i64) -> Result<i64, TlsError> {
    use x509_parser::prelude::{FromDer, X509Certificate};
    let (_, cert) = X509Certificate::from_der(leaf.as_ref()).map_err(|e| TlsError::Parse {
        path: path.to_string(),
        message: e.to_string(),
    })?;
    let v = cert.validity();
    if now < v.not_before.timestamp() {
        return Err(TlsError::NotYetValid {
            path: path.to_string(),
            not_before: v.not_before.to_string(),
        });
    }
    if now > v.not_after.timestamp() {
        return Err(TlsError::Expired {
            path: path.to_string(),
            not_after: v.not_after.to_string(),
            not_after_unix: v.not_after.timestamp(),
        });
    }
    Ok(v.not_after.timestamp())
}

pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Load a PEM chain and key into a signing-ready `CertifiedKey`; refuses a leaf that
/// is expired or not yet valid and a key that does not match it.
pub fn load_pem(cert: &Path, key: &Path) -> Result<Loaded, TlsError> {
    let cp = cert.display().to_string();
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .and_then(|it| it.collect::<Result<_, _>>())
        .map_err(|e| TlsError::Cert {
            path: cp.clone(),
            message: e.to_string(),
        })?;
    if chain.is_empty() {
        return Err(TlsError::NoCert { path: cp });
    }
    let not_after = check_validity(&cp, &chain[0], unix_now())?;
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| TlsError::Key {
        path: key.display().to_string(),
        message: e.to_string(),
    })?;
    Ok(Loaded {
        key: certified(chain, key)?,
        not_after,
    })
}

/// Like `load_pem`, from PEM text already in memory (`what` names it in errors).
pub fn load_pem_bytes(what: &str, cert: &[u8], key: &[u8]) -> Result<Loaded, TlsError> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert)
        .collect::<Result<_, _>>()
        .map_err(|e| TlsError::Cert {
            path: what.to_string(),
            message: e.to_string(),
        })?;
    let Some(leaf) = chain.first() else {
        return Err(TlsError::NoCert {
            path: what.to_string(),
        });
    };
    let not_after = check_validity(what, leaf, unix_now())?;
    let key = PrivateKeyDer::from_pem_slice(key).map_err(|e| TlsError::Key {
        path: what.to_string(),
        message: e.to_string(),
    })?;
    Ok(Loaded {
        key: certified(chain, key)?,
        not_after,
    })
}

fn certified(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> Result<CertifiedKey, TlsError> {
    let ck = CertifiedKey::from_der(chain, key, &provider())
        .map_err(|e| TlsError::Mismatch(e.to_string()))?;
    // from_der lets an undeterminable match through; a webhook key must be checkable.
    ck.keys_match()
        .map_err(|e| TlsError::Mismatch(e.to_string()))?;
    Ok(ck)
}

/// A self-signed ECDSA P-256 certificate for local use and first start.
pub fn self_signed(names: &[&str]) -> Result<Loaded, TlsError> {
    let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    let generated = rcgen::generate_simple_self_signed(names)
        .map_err(|e| TlsError::SelfSigned(e.to_string()))?;
    let der = generated.cert.der().clone();
    let not_after = check_validity("self-signed", &der, unix_now())?;
    let key = PrivateKeyDer::Pkcs8(generated.signing_key.serialize_der().into());
    Ok(Loaded {
        key: certified(vec![der], key)?,
        not_after,
    })
}

/// The resolver rustls asks on every handshake.
#[derive(Debug)]
pub struct CertStore {
    current: ArcSwap<CertifiedKey>,
    not_after: AtomicI64,
}

/// Warn when the served certificate has fewer days left than this.
pub const EXPIRY_WARNING_DAYS: i64 = 14;

impl CertStore {
    pub fn new(initial: Loaded) -> Arc<Self> {
        let store = Arc::new(CertStore {
            current: ArcSwap::from_pointee(initial.key),
            not_after: AtomicI64::new(initial.not_after),
        });
        store.warn_if_expiring();
        store
    }

    pub fn replace(&self, next: Loaded) {
        self.current.store(Arc::new(next.key));
        self.not_after.store(next.not_after, Ordering::Release);
        self.warn_if_expiring();
    }

    /// The served certificate's notAfter, unix seconds.
    pub fn not_after(&self) -> i64 {
        self.not_after.load(Ordering::Acquire)
    }

    /// Whole days until the served certificate expires.
    pub fn days_left(&self) -> i64 {
        days_left(self.not_after.load(Ordering::Acquire), unix_now())
    }

    /// Log a warning when the served certificate expires within 14 days; returns the
    /// days left.
    pub fn warn_if_expiring(&self) -> i64 {
        let days = self.days_left();
        if days < EXPIRY_WARNING_DAYS {
            tracing::warn!(
                days_left = days,
                "the serving certificate expires soon: renew it (cert-manager or certs/make-certs.sh)"
            );
        }
        days
    }
}

impl ResolvesServerCert for CertStore {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.load_full())
    }
}

/// rustls server config using the store; HTTP/2 and HTTP/1.1 offered.
pub fn server_config(store: Arc<CertStore>) -> Result<rustls::ServerConfig, rustls::Error> {
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_cert_resolver(store);
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(cfg)
}

#[cfg(test)]
mod tests {
    use super::days_left;

    #[test]
    fn days_left_rounds_down() {
        assert_eq!(days_left(86_400 * 3 + 5, 0), 3);
        assert_eq!(days_left(0, 1), -1);
    }
}
