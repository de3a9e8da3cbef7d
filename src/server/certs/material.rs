//! What the self-managed Secret holds, and its keys there:
//!   tls.crt, tls.key            the serving certificate every replica serves
//!   ca.crt                      every CA the webhook configurations trust (the caBundle)
//!   signing-ca.crt, signing-ca.key   the CA that signs serving certificates
//!   next-ca.crt, next-ca.key    during a CA rotation: the CA that signs next, already
//!                               trusted, not yet signing

use std::collections::BTreeMap;

use super::issue::{CertError, Pair, certs};

pub const TLS_CRT: &str = "tls.crt";
pub const TLS_KEY: &str = "tls.key";
pub const CA_BUNDLE: &str = "ca.crt";
const SIGNING_CRT: &str = "signing-ca.crt";
const SIGNING_KEY: &str = "signing-ca.key";
const NEXT_CRT: &str = "next-ca.crt";
const NEXT_KEY: &str = "next-ca.key";

/// The Secret's content, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Material {
    pub serving: Pair,
    pub signing: Pair,
    pub next: Option<Pair>,
    /// CAs that signed before `signing` and are still trusted (until they end), PEM each.
    pub retired: Vec<String>,
}

fn text(data: &BTreeMap<String, Vec<u8>>, key: &'static str) -> Result<String, CertError> {
    let bytes = data.get(key).ok_or(CertError::Missing(key))?;
    String::from_utf8(bytes.clone()).map_err(|_| CertError::NotText(key))
}

fn pair(
    data: &BTreeMap<String, Vec<u8>>,
    cert: &'static str,
    key: &'static str,
) -> Result<Pair, CertError> {
    Ok(Pair {
        cert: text(data, cert)?,
        key: text(data, key)?,
    })
}

/// One PEM block per certificate of a bundle.
fn split_pem(what: &'static str, bundle: &str) -> Result<Vec<String>, CertError> {
    Ok(certs(what, bundle)?
        .iter()
        .map(|der| pem_of(der.as_ref()))
        .collect())
}

fn pem_of(der: &[u8]) -> String {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = String::from("-----BEGIN CERTIFICATE-----\n");
    for line in b64.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(line).unwrap_or_default());
        out.push('\n');
    }
    out.push_str("-----END CERTIFICATE-----\n");
    out
}

/// The certificate of a PEM text, normalised (so texts that differ in whitespace compare
/// equal).
pub fn normalised(what: &'static str, pem: &str) -> Result<String, CertError> {
    Ok(pem_of(certs(what, pem)?[0].as_ref()))
}

impl Material {
    /// Read the Secret's data; any key missing or unreadable is an error (the caller
    /// starts over with a new CA).
    pub fn from_data(data: &BTreeMap<String, Vec<u8>>) -> Result<Material, CertError> {
        let signing = pair(data, SIGNING_CRT, SIGNING_KEY)?;
        let next = match (data.contains_key(NEXT_CRT), data.contains_key(NEXT_KEY)) {
            (false, false) => None,
            _ => Some(pair(data, NEXT_CRT, NEXT_KEY)?),
        };
        let own: Vec<String> = std::iter::once(&signing)
            .chain(next.as_ref())
            .map(|p| normalised(SIGNING_CRT, &p.cert))
            .collect::<Result<_, _>>()?;
        let retired = split_pem(CA_BUNDLE, &text(data, CA_BUNDLE)?)?
            .into_iter()
            .filter(|c| !own.contains(c))
            .collect();
        Ok(Material {
            serving: pair(data, TLS_CRT, TLS_KEY)?,
            signing,
            next,
            retired,
        })
    }

    /// Every trusted CA, PEM: the retired ones, the signing one, the next one.
    pub fn bundle(&self) -> String {
        let mut out: String = self.retired.concat();
        for p in std::iter::once(&self.signing).chain(self.next.as_ref()) {
            out.push_str(&normalised(SIGNING_CRT, &p.cert).unwrap_or_else(|_| p.cert.clone()));
        }
        out
    }

    pub fn to_data(&self) -> BTreeMap<String, Vec<u8>> {
        let mut data = BTreeMap::new();
        let mut put = |k: &str, v: &str| {
            data.insert(k.to_string(), v.as_bytes().to_vec());
        };
        put(TLS_CRT, &self.serving.cert);
        put(TLS_KEY, &self.serving.key);
        put(SIGNING_CRT, &self.signing.cert);
        put(SIGNING_KEY, &self.signing.key);
        if let Some(next) = &self.next {
            put(NEXT_CRT, &next.cert);
            put(NEXT_KEY, &next.key);
        }
        let bundle = self.bundle();
        put(CA_BUNDLE, &bundle);
        data
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::issue::{new_ca, new_serving};
    use super::*;

    #[test]
    fn the_secret_data_round_trips_and_the_bundle_lists_every_ca() {
        let old = new_ca(100, Duration::from_secs(600)).unwrap();
        let signing = new_ca(400, Duration::from_secs(600)).unwrap();
        let next = new_ca(800, Duration::from_secs(600)).unwrap();
        let serving = new_serving(&signing, &["a.b.svc".into()], 400, Duration::from_secs(60));
        let m = Material {
            serving: serving.unwrap(),
            signing,
            next: Some(next),
            retired: vec![normalised("old", &old.cert).unwrap()],
        };
        let data = m.to_data();
        let back = Material::from_data(&data).unwrap();
        assert_eq!(back, m);
        assert_eq!(certs("bundle", &m.bundle()).unwrap().len(), 3);
        let mut broken = data.clone();
        broken.remove(TLS_KEY);
        let e = Material::from_data(&broken).unwrap_err().to_string();
        assert_eq!(e, "tls.key: missing from the Secret");
    }
}
