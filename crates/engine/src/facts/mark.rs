//! The admission mark: proof that trainplace itself admitted the template a pod was
//! made from, so the pod is not judged a second time without the submitter's identity.
//!
//! When it admits a workload, trainplace writes `trainplace.io/admitted` on each judged
//! pod template (never on one the verdict refuses: a mark means "this content, of this
//! job size, was judged and admitted"): an HMAC-SHA256, under a key only the webhook holds, over the namespace,
//! the job's identity label, the kind of controller that will own the pods, the number
//! of pods the job was judged to have, and a digest of the fields the layout rules
//! judge. The pod count is written in the mark (`v2.<key id>.<pods>.<mac>`): a pod
//! whose own launcher says its job is larger was not what was admitted. At pod admission the mark is checked
//! against the pod's own namespace, label, owner and fields: a copied, edited or
//! invented mark does not verify, and such a pod is judged like any other.
//!
//! Threat model and what stays possible: docs/security.md.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use base64_simd::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::read::podspec::PodView;

/// Written on admitted templates; copied by controllers onto their pods.
pub const ADMITTED: &str = "trainplace.io/admitted";
const VERSION: &str = "v2";

/// The webhook's signing keys: the first signs, every one verifies (two during a
/// rotation). Key ids are names, never secret.
#[derive(Clone)]
pub struct MarkKeys {
    keys: Vec<(String, Vec<u8>)>,
    /// Marks on trusted controllers' objects that verified with none of the keys (the
    /// caller's count: a forged or copied mark, or another replica's key).
    failures: Arc<AtomicU64>,
}

impl std::fmt::Debug for MarkKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ids: Vec<&str> = self.keys.iter().map(|(id, _)| id.as_str()).collect();
        f.debug_struct("MarkKeys").field("ids", &ids).finish()
    }
}

impl MarkKeys {
    /// The shortest key that signs or verifies.
    pub const MIN_BYTES: usize = 32;

    /// `current` signs; `previous` keys still verify. `None` when there is no key or a
    /// key is shorter than [`Self::MIN_BYTES`].
    pub fn new(current: (String, Vec<u8>), previous: Vec<(String, Vec<u8>)>) -> Option<Self> {
        let keys: Vec<_> = std::iter::once(current).chain(previous).collect();
        keys.iter()
            .all(|(id, k)| k.len() >= Self::MIN_BYTES && !id.is_empty() && !id.contains('.'))
            .then_some(MarkKeys {
                keys,
                failures: Arc::default(),
            })
    }

    /// Count the marks that fail to verify in `counter` (kept across key reloads by the
    /// caller, which exports it).
    pub fn counting_failures_in(mut self, counter: Arc<AtomicU64>) -> Self {
        self.failures = counter;
        self
    }

    /// Marks that failed to verify so far (in the counter given, if any).
    pub fn failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }

    /// The counter failures are counted in, to carry over to reloaded keys.
    pub fn failure_counter(&self) -> Arc<AtomicU64> {
        self.failures.clone()
    }

    pub(crate) fn note_failure(&self) {
        self.failures.fetch_add(1, Ordering::Relaxed);
    }

    /// The id of the key that signs.
    /// Whether a key of this id verifies here.
    pub fn knows(&self, id: &str) -> bool {
        self.keys.iter().any(|(k, _)| k == id)
    }

    pub fn current_id(&self) -> &str {
        &self.keys[0].0
    }

    fn mac(key: &[u8], message: &[u8]) -> impl AsRef<[u8]> {
        let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
        mac.update(message);
        mac.finalize().into_bytes()
    }

    /// The mark for a template: `v2.<key id>.<pods>.<HMAC>`.
    pub(crate) fn sign(&self, claim: &Claim<'_>) -> String {
        let (id, key) = &self.keys[0];
        format!(
            "{VERSION}.{id}.{}.{}",
            claim.pods,
            URL_SAFE_NO_PAD.encode_to_string(Self::mac(key, &claim.message()))
        )
    }

    /// Whether `mark` was made by one of our keys for exactly this claim, with the pod
    /// count the mark states (the claim's own `pods` is ignored); that count when so.
    pub(crate) fn verify(&self, mark: &str, claim: &Claim<'_>) -> Option<u32> {
        let mut parts = mark.splitn(4, '.');
        let (Some(VERSION), Some(id), Some(pods), Some(given)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return None;
        };
        let pods: u32 = pods.parse().ok()?;
        let Some((_, key)) = self.keys.iter().find(|(k, _)| k == id) else {
            UNKNOWN_KEY.with(|u| *u.borrow_mut() = Some(id.to_string()));
            return None;
        };
        let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
        mac.update(&Claim { pods, ..*claim }.message());
        let bytes = URL_SAFE_NO_PAD.decode_to_vec(given).ok()?;
        mac.verify_slice(&bytes).is_ok().then_some(pods)
    }
}

thread_local! {
    /// The key id of the last mark this thread met that none of its keys knows.
    static UNKNOWN_KEY: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// The key id of a mark that named a key none of the keys knows, met on this thread
/// since the last call (a review runs on one thread): another replica may have signed
/// with a key this one has not read yet. Taking it clears it.
pub fn take_unknown_key_id() -> Option<String> {
    UNKNOWN_KEY.with(|u| u.borrow_mut().take())
}

/// What a mark vouches for.
#[derive(Clone, Copy)]
pub(crate) struct Claim<'a> {
    /// Pods in the job as judged at admission (0: several, count unknown).
    pub pods: u32,
    pub namespace: &'a str,
    /// The job's identity label as the pods carry it.
    pub identity: (&'a str, &'a str),
    /// The kind of the controller that owns the pods (Job, PyTorchJob, StatefulSet...).
    pub owner_kind: &'a str,
    /// Digest of the judged fields of the template or pod.
    pub digest: [u8; 32],
}

impl Claim<'_> {
    fn message(&self) -> Vec<u8> {
        let mut m = Vec::new();
        for part in [
            VERSION,
            self.namespace,
            self.identity.0,
            self.identity.1,
            self.owner_kind,
            &self.pods.to_string(),
        ] {
            m.extend_from_slice(part.as_bytes());
            m.push(0);
        }
        m.extend_from_slice(&self.digest);
        m
    }
}

/// The fields the layout rules judge, as a pod made from the template carries them:
/// per app container its name and device counts; the pod's scheduling constraints
/// (node selector, affinity, spread), host networking and IPC, DNS policy, and the
/// opt-in annotations. Tolerations and env are left out: admission plugins and
/// operators add to them on every pod.
pub(crate) fn digest(view: &PodView<'_>) -> [u8; 32] {
    let mut h = Sha256::new();
    let mut put = |label: &str, v: Option<&Value>| {
        h.update(label.as_bytes());
        h.update([0]);
        canonical(v.unwrap_or(&Value::Null), &mut h);
        h.update([0]);
    };
    for c in &view.containers {
        let devices = serde_json::json!([c.name, c.accelerators, c.efa]);
        put("container", Some(&devices));
    }
    let spec = view.pod.get("spec");
    for key in [
        "nodeSelector",
        "affinity",
        "topologySpreadConstraints",
        "hostNetwork",
        "hostIPC",
    ] {
        put(key, spec.and_then(|s| s.get(key)));
    }
    // Pods are defaulted to ClusterFirst; a CRD's template may leave it out. The MPI
    // Operator writes ClusterFirstWithHostNet on a host-network template it copies
    // (`mpi_job_controller.go`), the policy the pod needs to resolve cluster names
    // there: the same cluster DNS, so it digests as ClusterFirst.
    let dns = match spec
        .and_then(|s| s.get("dnsPolicy"))
        .and_then(Value::as_str)
    {
        None | Some("ClusterFirstWithHostNet") => Value::String("ClusterFirst".into()),
        Some(other) => Value::String(other.into()),
    };
    put("dnsPolicy", Some(&dns));
    // What the pod's DRA claims give, as counted when signing and when verifying: a
    // claim template replaced after admission (deleted and created again with fewer
    // devices) changes it. Pods with no claims digest as before.
    if view.claims > 0 {
        let d = &view.devices;
        let count = |c: Option<crate::read::devices::Count>| match c {
            None => Value::Null,
            Some(crate::read::devices::Count::All) => Value::String("All".into()),
            Some(crate::read::devices::Count::Exact(n)) => Value::from(n),
        };
        let devices = serde_json::json!({
            "accelerators": d.accelerators.as_ref().map(|a| serde_json::json!([a.resource, count(Some(a.count)), a.shared])),
            "efa": count(d.efa),
            "unresolved": d.unresolved,
        });
        put("claims", Some(&devices));
    }
    for key in crate::read::annotations::OPT_INS {
        put(
            key,
            view.annotation(key)
                .map(|v| Value::String(v.into()))
                .as_ref(),
        );
    }
    h.finalize().into()
}

/// JSON with object keys sorted, so the same object digests the same whatever order
/// its writer used.
fn canonical(v: &Value, h: &mut Sha256) {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            h.update(b"{");
            for k in keys {
                h.update(serde_json::to_string(k).unwrap_or_default().as_bytes());
                h.update(b":");
                canonical(&m[k], h);
                h.update(b",");
            }
            h.update(b"}");
        }
        Value::Array(a) => {
            h.update(b"[");
            for x in a {
                canonical(x, h);
                h.update(b",");
            }
            h.update(b"]");
        }
        other => h.update(other.to_string().as_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_of_a_key_none_knows_is_reported_once() {
        let keys = MarkKeys::new(("old".into(), vec![1u8; 32]), Vec::new()).unwrap();
        let claim = Claim {
            pods: 4,
            namespace: "ml",
            identity: ("batch.kubernetes.io/job-name", "j"),
            owner_kind: "Job",
            digest: [0u8; 32],
        };
        take_unknown_key_id();
        assert_eq!(keys.verify(&keys.sign(&claim), &claim), Some(4));
        assert_eq!(take_unknown_key_id(), None, "a known key is no news");
        assert_eq!(keys.verify("v2.new.4.AAAA", &claim), None);
        assert_eq!(take_unknown_key_id().as_deref(), Some("new"));
        assert_eq!(take_unknown_key_id(), None, "taking it clears it");
    }
}
