//! Shared state of the server: the current policy (hot-swapped), metrics, readiness.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use arc_swap::{ArcSwap, ArcSwapOption};
use trainplace_engine::Limits;
use trainplace_engine::{MarkKeys, Policy};

use super::metrics::Metrics;
use super::pool::{DEFAULT_LARGE_REVIEW_BYTES, Lanes};
use super::tls::CertStore;
use crate::inventory::{InventorySource, NoCluster};

#[derive(Clone)]
pub struct AppState {
    pub policy: Arc<ArcSwap<Policy>>,
    pub metrics: Arc<Metrics>,
    pub inventory: Arc<dyn InventorySource>,
    pub ready: Arc<AtomicBool>,
    /// False while a self-managed certificate is missing or ended (readiness needs both).
    pub certificate_ready: Arc<AtomicBool>,
    /// What /readyz reports about where policy and certificate came from.
    pub detail: Arc<ArcSwap<Detail>>,
    /// Where reviews run (fixed sets of review threads, bounded; large reviews in
    /// their own lane).
    pub pool: Arc<Lanes>,
    /// Per-review size limits.
    pub limits: Limits,
    /// The serving certificate (for its expiry on /metrics).
    pub cert: Option<Arc<CertStore>>,
    /// Keys for admission marks (hot-swapped on rotation).
    pub marks: Arc<ArcSwapOption<MarkKeys>>,
    /// Reads the keys again when a review carries a mark of an unknown key id.
    pub mark_refresh: super::mark_refresh::MarkRefresh,
    /// Where reviews hand their Events (off unless started with a cluster client).
    pub events: super::events::Events,
}

#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Detail {
    pub policy: String,
    pub certificate: String,
    /// Why the policy directory's current content was rejected; the last good policy
    /// still serves. `None` once a reload succeeds.
    #[serde(rename = "policyError", skip_serializing_if = "Option::is_none")]
    pub policy_error: Option<String>,
    /// The describe-capacity-reservations file, when one is given.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reservations: String,
    /// Why that file's current content was rejected; the last good blocks still count.
    #[serde(rename = "reservationsError", skip_serializing_if = "Option::is_none")]
    pub reservations_error: Option<String>,
    /// `--register-webhooks`: registered, or why not (yet).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub webhooks: String,
}

impl AppState {
    pub fn new(policy: Policy) -> Self {
        let metrics = Arc::new(Metrics::new());
        AppState {
            policy: Arc::new(ArcSwap::from_pointee(policy)),
            events: super::events::Events::off(metrics.clone()),
            metrics,
            inventory: Arc::new(NoCluster),
            ready: Arc::new(AtomicBool::new(false)),
            certificate_ready: Arc::new(AtomicBool::new(true)),
            detail: Arc::new(ArcSwap::from_pointee(Detail::default())),
            pool: Arc::new(Lanes::new(0, 64, DEFAULT_LARGE_REVIEW_BYTES)),
            limits: Limits::default(),
            cert: None,
            marks: Arc::new(ArcSwapOption::empty()),
            mark_refresh: super::mark_refresh::MarkRefresh::default(),
        }
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire) && self.certificate_ready.load(Ordering::Acquire)
    }

    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Release);
    }
}
