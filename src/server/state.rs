//! Shared state of the server: the current policy (hot-swapped), metrics, readiness.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use arc_swap::ArcSwap;
use trainplace_engine::Policy;
use trainplace_engine::admission::{NamespaceLabels, NoNamespaceLabels};

use super::metrics::Metrics;

#[derive(Clone)]
pub struct AppState {
    pub policy: Arc<ArcSwap<Policy>>,
    pub metrics: Arc<Metrics>,
    pub namespaces: Arc<dyn NamespaceLabels + Send + Sync>,
    pub ready: Arc<AtomicBool>,
    /// What /readyz reports about where policy and certificate came from.
    pub detail: Arc<ArcSwap<Detail>>,
}

#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Detail {
    pub policy: String,
    pub certificate: String,
    pub namespace_labels: String,
}

impl AppState {
    pub fn new(policy: Policy) -> Self {
        AppState {
            policy: Arc::new(ArcSwap::from_pointee(policy)),
            metrics: Arc::new(Metrics::new()),
            namespaces: Arc::new(NoNamespaceLabels),
            ready: Arc::new(AtomicBool::new(false)),
            detail: Arc::new(ArcSwap::from_pointee(Detail {
                namespace_labels: "unavailable: no cluster connection in this build; label-selected policy overrides do not apply".into(),
                ..Detail::default()
            })),
        }
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Release);
    }
}
