//! Making and reading the self-managed CA and serving certificates (ECDSA P-256, rcgen).
//! Pure: the caller passes the time.

use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum CertError {
    #[error("cannot make a certificate: {0}")]
    Generate(String),
    #[error("{what}: not a PEM certificate: {message}")]
    Pem { what: &'static str, message: String },
    #[error("{what}: cannot parse the certificate: {message}")]
    Parse { what: &'static str, message: String },
    #[error("{0}: missing from the Secret")]
    Missing(&'static str),
    #[error("{0}: not UTF-8 text")]
    NotText(&'static str),
}

/// A certificate and its private key, both PEM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pair {
    pub cert: String,
    pub key: String,
}

/// When a certificate is valid, unix seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub not_before: i64,
    pub not_after: i64,
}

impl Window {
    /// Two thirds into the window: when a certificate is renewed.
    pub fn renew_at(&self) -> i64 {
        self.not_before + (self.not_after - self.not_before) * 2 / 3
    }

    pub fn valid_at(&self, now: i64) -> bool {
        self.not_before <= now && now < self.not_after
    }
}

/// How far notBefore is set back for clocks that run behind this one: five minutes, or a
/// twentieth of a short lifetime.
fn backdate(life: Duration) -> i64 {
    (life.as_secs() / 20).min(300) as i64
}

fn time(unix: i64) -> Result<time::OffsetDateTime, CertError> {
    time::OffsetDateTime::from_unix_timestamp(unix).map_err(|e| CertError::Generate(e.to_string()))
}

fn gen_err(e: rcgen::Error) -> CertError {
    CertError::Generate(e.to_string())
}

/// A new self-signed CA valid from `now` for `life`.
pub fn new_ca(now: i64, life: Duration) -> Result<Pair, CertError> {
    let key = KeyPair::generate().map_err(gen_err)?;
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    // Unique per CA, so the two CAs of an overlap are told apart in the bundle and logs.
    dn.push(DnType::CommonName, format!("trainplace-webhook-ca-{now}"));
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    params.not_before = time(now - backdate(life))?;
    params.not_after = time(now + life.as_secs() as i64)?;
    let cert = params.self_signed(&key).map_err(gen_err)?;
    Ok(Pair {
        cert: cert.pem(),
        key: key.serialize_pem(),
    })
}

/// A serving certificate for `names` signed by `ca`, valid from `now` for `life` but
/// never past the CA's own end.
pub fn new_serving(
    ca: &Pair,
    names: &[String],
    now: i64,
    life: Duration,
) -> Result<Pair, CertError> {
    let ca_key = KeyPair::from_pem(&ca.key).map_err(gen_err)?;
    let ca_end = window("signing CA", &ca.cert)?.not_after;
    let issuer = Issuer::from_ca_cert_pem(&ca.cert, ca_key).map_err(gen_err)?;
    let key = KeyPair::generate().map_err(gen_err)?;
    let mut params = CertificateParams::new(names.to_vec()).map_err(gen_err)?;
    let mut dn = DistinguishedName::new();
    if let Some(first) = names.first() {
        dn.push(DnType::CommonName, first.clone());
    }
    params.distinguished_name = dn;
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    params.not_before = time(now - backdate(life))?;
    params.not_after = time((now + life.as_secs() as i64).min(ca_end))?;
    let cert = params.signed_by(&key, &issuer).map_err(gen_err)?;
    Ok(Pair {
        cert: cert.pem(),
        key: key.serialize_pem(),
    })
}

/// The certificates of a PEM bundle, DER.
pub fn certs(what: &'static str, pem: &str) -> Result<Vec<CertificateDer<'static>>, CertError> {
    let certs = CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| CertError::Pem {
            what,
            message: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(CertError::Pem {
            what,
            message: "no certificate".to_string(),
        });
    }
    Ok(certs)
}

/// The validity window of a DER certificate.
pub fn der_window(what: &'static str, der: &CertificateDer<'_>) -> Result<Window, CertError> {
    use x509_parser::prelude::{FromDer, X509Certificate};
    let (_, cert) = X509Certificate::from_der(der.as_ref()).map_err(|e| CertError::Parse {
        what,
        message: e.to_string(),
    })?;
    let v = cert.validity();
    Ok(Window {
        not_before: v.not_before.timestamp(),
        not_after: v.not_after.timestamp(),
    })
}

/// The validity window of the first certificate of a PEM text.
pub fn window(what: &'static str, pem: &str) -> Result<Window, CertError> {
    der_window(what, &certs(what, pem)?[0])
}

/// The DNS names and IP addresses a certificate is for.
pub fn names(der: &CertificateDer<'_>) -> Vec<String> {
    use x509_parser::prelude::{FromDer, GeneralName, X509Certificate};
    let Ok((_, cert)) = X509Certificate::from_der(der.as_ref()) else {
        return Vec::new();
    };
    let Ok(Some(san)) = cert.subject_alternative_name() else {
        return Vec::new();
    };
    san.value
        .general_names
        .iter()
        .filter_map(|n| match n {
            GeneralName::DNSName(d) => Some(d.to_string()),
            GeneralName::IPAddress(b) => match b.len() {
                4 => <[u8; 4]>::try_from(*b)
                    .ok()
                    .map(|a| std::net::IpAddr::from(a).to_string()),
                16 => <[u8; 16]>::try_from(*b)
                    .ok()
                    .map(|a| std::net::IpAddr::from(a).to_string()),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// Whether `ca` signed `leaf`.
pub fn issued_by(leaf: &CertificateDer<'_>, ca: &CertificateDer<'_>) -> bool {
    use x509_parser::prelude::{FromDer, X509Certificate};
    match (
        X509Certificate::from_der(leaf.as_ref()),
        X509Certificate::from_der(ca.as_ref()),
    ) {
        (Ok((_, l)), Ok((_, c))) => {
            l.issuer() == c.subject() && l.verify_signature(Some(c.public_key())).is_ok()
        }
        _ => false,
    }
}

/// Whether a pair's key is the one its certificate names.
pub fn key_matches(pair: &Pair) -> bool {
    use rcgen::PublicKeyData;
    use x509_parser::prelude::{FromDer, X509Certificate};
    let (Ok(key), Ok(certs)) = (KeyPair::from_pem(&pair.key), certs("", &pair.cert)) else {
        return false;
    };
    X509Certificate::from_der(certs[0].as_ref())
        .is_ok_and(|(_, c)| c.public_key().subject_public_key.data.as_ref() == key.der_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_serving_certificate_names_the_service_and_ends_with_its_ca() {
        let ca = new_ca(1_000_000, Duration::from_secs(60)).unwrap();
        let ca_window = window("ca", &ca.cert).unwrap();
        assert_eq!(ca_window.not_before, 1_000_000 - 3);
        assert_eq!(ca_window.not_after, 1_000_060);
        let names_in = vec!["svc.ns.svc".to_string(), "127.0.0.1".to_string()];
        let leaf = new_serving(&ca, &names_in, 1_000_050, Duration::from_secs(30)).unwrap();
        let w = window("leaf", &leaf.cert).unwrap();
        assert_eq!(w.not_after, 1_000_060, "capped at the CA's end");
        let der = &certs("leaf", &leaf.cert).unwrap()[0];
        use x509_parser::prelude::{FromDer, X509Certificate};
        let (_, x) = X509Certificate::from_der(der.as_ref()).unwrap();
        let ca_der = &certs("ca", &ca.cert).unwrap()[0];
        let (_, c) = X509Certificate::from_der(ca_der.as_ref()).unwrap();
        assert_eq!(x.issuer(), c.subject());
        x.verify_signature(Some(c.public_key())).unwrap();
        assert_eq!(names(der), names_in);
        assert!(!x.is_ca() && c.is_ca());
        assert!(key_matches(&leaf) && key_matches(&ca));
        let swapped = Pair {
            cert: leaf.cert.clone(),
            key: ca.key.clone(),
        };
        assert!(!key_matches(&swapped));
    }

    #[test]
    fn renewal_is_two_thirds_into_the_window() {
        let w = Window {
            not_before: 0,
            not_after: 90,
        };
        assert_eq!(w.renew_at(), 60);
        assert!(w.valid_at(0) && w.valid_at(89) && !w.valid_at(90));
    }

    #[test]
    fn garbage_is_refused_with_what_it_was() {
        let e = window("tls.crt", "not pem").unwrap_err();
        assert!(
            e.to_string().starts_with("tls.crt: not a PEM certificate"),
            "{e}"
        );
    }
}
