//! Prometheus metrics. Every label comes from a bounded set (endpoint, kind class,
//! operation, verdict, rule, mode, outcome, and the account's Capacity Block ids), never
//! from object names or messages.

mod marks;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReviewLabels {
    pub endpoint: &'static str,
    pub kind: &'static str,
    pub operation: &'static str,
    /// allowed | patched | denied | warned | invalid | bad_object
    pub verdict: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FindingLabels {
    pub endpoint: &'static str,
    pub kind: &'static str,
    pub rule: &'static str,
    pub mode: &'static str,
    /// The review's verdict, as in `ReviewLabels`.
    pub verdict: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EventLabels {
    /// published | failed | rate_limited | queue_full
    pub outcome: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BuildLabels {
    pub version: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EndpointLabels {
    pub endpoint: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    /// success | failure
    pub outcome: &'static str,
}

/// One Capacity Block: bounded by the blocks the account holds (a few, each days long).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReservationLabels {
    pub reservation: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StageLabels {
    /// first_byte | tls_handshake | header_read | idle | drain
    pub stage: &'static str,
}

pub struct Metrics {
    pub registry: Registry,
    pub reviews: Family<ReviewLabels, Counter>,
    pub findings: Family<FindingLabels, Counter>,
    pub latency: Family<EndpointLabels, Histogram>,
    pub policy_reloads: Family<OutcomeLabels, Counter>,
    pub cert_reloads: Family<OutcomeLabels, Counter>,
    /// 1 when the serving certificate is self-signed (no --tls-cert given).
    pub self_signed: Gauge,
    pub http_errors: Family<ReviewLabels, Counter>,
    /// 1 when cluster inventory data is live (or loaded from files).
    pub inventory_up: Gauge,
    /// 1 unless started with `--inventory off` (so an alert on inventory_up can tell a
    /// broken watch from none asked for).
    pub inventory_enabled: Gauge,
    /// 1 once this replica registered the webhook configurations (`--register-webhooks`).
    pub webhooks_registered: Gauge,
    /// Seconds since the watched objects last changed (the snapshot is rebuilt on
    /// change only); -1 when there is none.
    pub inventory_age: Gauge,
    /// Reviews refused because the review pool and its queue were full.
    pub saturated: Counter,
    /// Open HTTPS connections.
    pub connections: Gauge,
    /// Connections ended by a deadline, by the stage they were in.
    pub deadlines: Family<StageLabels, Counter>,
    /// Days until the serving certificate expires (negative: expired).
    pub cert_days_left: Gauge,
    /// Seconds until each Capacity Block in the inventory ends (set at scrape time
    /// from the current snapshot, so a block that left it leaves the metric too).
    pub block_seconds_left: Family<ReservationLabels, Gauge>,
    /// Loads of the describe-capacity-reservations file.
    pub reservations_reloads: Family<OutcomeLabels, Counter>,
    /// Admission-mark key directory reloads.
    pub mark_key_reloads: Family<OutcomeLabels, Counter>,
    /// The serving certificate's notAfter (unix seconds).
    pub cert_expiry: Gauge,
    /// Events offered by reviews, by what became of them (src/server/events.rs).
    pub events: Family<EventLabels, Counter>,
    /// Reviews by namespace (empty unless `--metrics-namespaces` is above 0).
    pub namespaces: super::metrics_namespaces::ByNamespace,
    /// Marks that failed to verify; given to every key set loaded.
    pub mark_failures: marks::MarkFailures,
}

impl Metrics {
    pub fn new() -> Self {
        let metrics = Metrics {
            registry: Registry::default(),
            reviews: Family::default(),
            findings: Family::default(),
            // 25 µs .. ~0.8 s: the engine runs in tens of microseconds, so
            // sub-millisecond buckets are where the signal is.
            latency: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(0.000_025, 2.0, 16))
            }),
            policy_reloads: Family::default(),
            cert_reloads: Family::default(),
            self_signed: Gauge::default(),
            http_errors: Family::default(),
            inventory_up: Gauge::default(),
            inventory_enabled: Gauge::default(),
            webhooks_registered: Gauge::default(),
            inventory_age: Gauge::default(),
            saturated: Counter::default(),
            connections: Gauge::default(),
            deadlines: Family::default(),
            cert_days_left: Gauge::default(),
            block_seconds_left: Family::default(),
            reservations_reloads: Family::default(),
            mark_key_reloads: Family::default(),
            cert_expiry: Gauge::default(),
            events: Family::default(),
            namespaces: super::metrics_namespaces::ByNamespace::default(),
            mark_failures: marks::MarkFailures::default(),
        };
        metrics.start_at_zero();
        let mut registry = Registry::with_prefix("trainplace");
        let build = Family::<BuildLabels, Gauge>::default();
        build
            .get_or_create(&BuildLabels {
                version: env!("CARGO_PKG_VERSION"),
            })
            .set(1);
        registry.register("build_info", "trainplace's version (always 1)", build);
        registry.register_collector(Box::new(metrics.mark_failures.clone()));
        metrics.register_reviews(&mut registry);
        metrics.register_operations(&mut registry);
        Metrics {
            registry,
            ..metrics
        }
    }

    /// Series that alerts compare are there from the start, at 0.
    fn start_at_zero(&self) {
        for family in [
            &self.policy_reloads,
            &self.cert_reloads,
            &self.reservations_reloads,
            &self.mark_key_reloads,
        ] {
            for outcome in ["success", "failure"] {
                let _ = family.get_or_create(&OutcomeLabels { outcome });
            }
        }
        for outcome in ["published", "failed", "rate_limited", "queue_full"] {
            let _ = self.events.get_or_create(&EventLabels { outcome });
        }
    }

    /// What the reviews and their connections count.
    fn register_reviews(&self, registry: &mut Registry) {
        registry.register(
            "admission_reviews",
            "AdmissionReviews answered",
            self.reviews.clone(),
        );
        registry.register(
            "admission_findings",
            "Findings by endpoint, kind, rule, mode and the review's verdict",
            self.findings.clone(),
        );
        registry.register(
            "admission_review_duration_seconds",
            "Time to answer one AdmissionReview, parse to serialised response",
            self.latency.clone(),
        );
        registry.register(
            "http_rejections",
            "Requests rejected before review (bad JSON, too large, wrong type)",
            self.http_errors.clone(),
        );
        registry.register(
            "reviews_saturated",
            "Reviews answered 503 because every review slot and queue place was taken",
            self.saturated.clone(),
        );
        registry.register("admission_namespace_reviews", "AdmissionReviews answered by namespace (--metrics-namespaces; the namespaces past the bound are _other)", self.namespaces.family.clone());
        registry.register("events", "Kubernetes Events for denials and warnings, by outcome (published, failed, rate_limited, queue_full)", self.events.clone());
        registry.register(
            "connections_open",
            "Open HTTPS connections",
            self.connections.clone(),
        );
        registry.register(
            "connection_deadlines",
            "HTTPS connections closed by a deadline, by stage",
            self.deadlines.clone(),
        );
    }

    /// Reloads, the certificate, the inventory and its Capacity Blocks.
    fn register_operations(&self, registry: &mut Registry) {
        registry.register(
            "policy_reloads",
            "Policy directory reloads",
            self.policy_reloads.clone(),
        );
        registry.register(
            "certificate_reloads",
            "Serving certificate reloads",
            self.cert_reloads.clone(),
        );
        registry.register(
            "reservations_reloads",
            "Loads of the describe-capacity-reservations file",
            self.reservations_reloads.clone(),
        );
        registry.register(
            "mark_key_reloads",
            "Admission-mark key directory reloads",
            self.mark_key_reloads.clone(),
        );
        registry.register(
            "certificate_self_signed",
            "1 when serving an in-memory self-signed certificate",
            self.self_signed.clone(),
        );
        registry.register(
            "certificate_expiry_days",
            "Whole days until the serving certificate expires",
            self.cert_days_left.clone(),
        );
        registry.register(
            "certificate_expiry_timestamp_seconds",
            "The serving certificate's notAfter, unix seconds",
            self.cert_expiry.clone(),
        );
        registry.register(
            "inventory_up",
            "1 when cluster inventory is live; 0 = embedded catalog only",
            self.inventory_up.clone(),
        );
        registry.register(
            "inventory_enabled",
            "1 unless started with --inventory off (inventory_up is 0 then by design)",
            self.inventory_enabled.clone(),
        );
        registry.register(
            "webhooks_registered",
            "1 once this replica registered the webhook configurations (--register-webhooks)",
            self.webhooks_registered.clone(),
        );
        registry.register(
            "inventory_snapshot_age_seconds",
            "Seconds since the inventory snapshot was rebuilt (-1: none)",
            self.inventory_age.clone(),
        );
        registry.register("capacity_block_seconds_remaining", "Seconds until the Capacity Block ends (Karpenter drains and EKS managed node groups scale to 0 40 minutes before; EC2 terminates from 30 minutes before)", self.block_seconds_left.clone());
    }

    /// The serving certificate's expiry as of `now` (unix seconds): its notAfter and the
    /// whole days left. Whatever serves a certificate (a file reload, the self-managed
    /// Secret) ends in the CertStore, which /metrics reads at each scrape.
    pub fn set_certificate(&self, not_after: i64, now: i64) {
        self.cert_expiry.set(not_after);
        self.cert_days_left
            .set(super::tls::days_left(not_after, now));
    }

    /// Set the Capacity Block gauges to the blocks of `snapshot` as of `now`, and drop
    /// the series of blocks that are gone.
    pub fn set_blocks(&self, snapshot: Option<&trainplace_engine::Snapshot>, now: jiff::Timestamp) {
        self.block_seconds_left.clear();
        for r in snapshot.iter().flat_map(|s| s.reservations().iter()) {
            self.block_seconds_left
                .get_or_create(&ReservationLabels {
                    reservation: r.id.clone(),
                })
                .set(r.end.duration_since(now).as_secs());
        }
    }

    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use trainplace_engine::{Reservations, Snapshot};

    use super::*;

    fn blocks(ids: &[(&str, &str)]) -> Snapshot {
        let mut r = Reservations::default();
        let items: Vec<_> = ids
            .iter()
            .map(|(id, end)| {
                json!({"CapacityReservationId": id, "InstanceType": "p5.48xlarge",
                "AvailabilityZone": "us-east-1a", "State": "active", "EndDate": end,
                "ReservationType": "capacity-block"})
            })
            .collect();
        r.add_describe_output(&json!({ "CapacityReservations": items }));
        Snapshot::blocks_only(r)
    }

    #[test]
    fn one_series_per_block_and_a_block_that_left_leaves_the_metric() {
        let m = Metrics::new();
        let now: jiff::Timestamp = "2026-11-23T09:00:00Z".parse().unwrap();
        m.set_blocks(
            Some(&blocks(&[
                ("cr-1", "2026-11-23T11:30:00Z"),
                ("cr-2", "2026-11-24T09:00:00Z"),
            ])),
            now,
        );
        let text = m.encode();
        assert!(
            text.contains("trainplace_capacity_block_seconds_remaining{reservation=\"cr-1\"} 9000"),
            "{text}"
        );
        assert!(
            text.contains(
                "trainplace_capacity_block_seconds_remaining{reservation=\"cr-2\"} 86400"
            )
        );
        m.set_blocks(Some(&blocks(&[("cr-2", "2026-11-24T09:00:00Z")])), now);
        let text = m.encode();
        assert!(!text.contains("reservation=\"cr-1\""), "{text}");
        m.set_blocks(None, now);
        assert!(!m.encode().contains("reservation=\"cr-2\""));
    }
}
