//! Serving certificate behind an `ArcSwap`: connections in flight keep the key they
//! handshook with; new handshakes get the newest good certificate.

use std::path::Path;
use std::sync::Arc;

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
}

pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Load a PEM chain and key into a signing-ready `CertifiedKey`.
pub fn load_pem(cert: &Path, key: &Path) -> Result<CertifiedKey, TlsError> {
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
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| TlsError::Key {
        path: key.display().to_string(),
        message: e.to_string(),
    })?;
    certified(chain, key)
}

fn certified(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> Result<CertifiedKey, TlsError> {
    let ck = CertifiedKey::from_der(chain, key, &provider())
        .map_err(|e| TlsError::Mismatch(e.to_string()))?;
    Ok(ck)
}

/// A self-signed ECDSA P-256 certificate for local use and first start.
pub fn self_signed(names: &[&str]) -> Result<CertifiedKey, TlsError> {
    let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    let generated = rcgen::generate_simple_self_signed(names)
        .map_err(|e| TlsError::SelfSigned(e.to_string()))?;
    let key = PrivateKeyDer::Pkcs8(generated.signing_key.serialize_der().into());
    certified(vec![generated.cert.der().clone()], key)
}

/// The resolver rustls asks on every handshake.
#[derive(Debug)]
pub struct CertStore {
    current: ArcSwap<CertifiedKey>,
}

impl CertStore {
    pub fn new(initial: CertifiedKey) -> Arc<Self> {
        Arc::new(CertStore {
            current: ArcSwap::from_pointee(initial),
        })
    }

    pub fn replace(&self, next: CertifiedKey) {
        self.current.store(Arc::new(next));
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
