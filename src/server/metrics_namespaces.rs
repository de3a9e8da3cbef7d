//! `--metrics-namespaces N`: reviews counted by namespace, opt-in and bounded. The first
//! N namespaces seen get a series each; any other is counted as `_other`, so a cluster
//! that creates namespaces freely cannot grow the metric without bound.

use std::collections::HashSet;
use std::sync::Mutex;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

/// A review's namespace (or `_other`) and verdict.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NamespaceLabels {
    pub namespace: String,
    pub verdict: &'static str,
}

/// The label of namespaces past the bound.
pub const OTHER: &str = "_other";

#[derive(Debug, Default)]
pub struct ByNamespace {
    pub family: Family<NamespaceLabels, Counter>,
    limit: std::sync::atomic::AtomicUsize,
    seen: Mutex<HashSet<String>>,
}

impl ByNamespace {
    /// Count by namespace for at most `limit` namespaces (0: off, the default).
    pub fn set_limit(&self, limit: usize) {
        self.limit
            .store(limit, std::sync::atomic::Ordering::Relaxed);
    }

    /// Count one review of `namespace` with `verdict`, when enabled.
    pub fn inc(&self, namespace: &str, verdict: &'static str) {
        let limit = self.limit.load(std::sync::atomic::Ordering::Relaxed);
        if limit == 0 {
            return;
        }
        let label = {
            let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
            if seen.contains(namespace) {
                namespace
            } else if seen.len() < limit {
                seen.insert(namespace.to_string());
                namespace
            } else {
                OTHER
            }
        };
        self.family
            .get_or_create(&NamespaceLabels {
                namespace: label.to_string(),
                verdict,
            })
            .inc();
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn off_by_default_and_bounded_when_on() {
        let m = super::super::metrics::Metrics::new();
        m.namespaces.inc("a", "denied");
        assert!(!m.encode().contains("namespace=\"a\""));
        m.namespaces.set_limit(2);
        for i in 0..50 {
            m.namespaces.inc(&format!("ns-{i}"), "denied");
        }
        m.namespaces.inc("ns-0", "allowed");
        let text = m.encode();
        let series = text
            .lines()
            .filter(|l| l.starts_with("trainplace_admission_namespace_reviews_total{"))
            .count();
        assert_eq!(series, 4, "{text}");
        assert!(text.contains(
            "trainplace_admission_namespace_reviews_total{namespace=\"_other\",verdict=\"denied\"} 48"
        ));
        assert!(text.contains(
            "trainplace_admission_namespace_reviews_total{namespace=\"ns-0\",verdict=\"allowed\"} 1"
        ));
    }
}
