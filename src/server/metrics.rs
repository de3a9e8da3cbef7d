//! Prometheus metrics. Every label comes from a bounded set (endpoint, kind class,
//! operation, verdict, rule, mode, outcome, and the account's Capacity Block ids), never
//! from object names or messages.

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

/// `--metrics-namespaces N`: reviews by namespace, for the first N namespaces seen
/// (the rest are `_other`).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NamespaceLabels {
    pub namespace: String,
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
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("trainplace");
        let reviews = Family::<ReviewLabels, Counter>::default();
        let findings = Family::<FindingLabels, Counter>::default();
        // 25 µs .. ~0.8 s: the engine runs in tens of microseconds, so sub-millisecond
        // buckets are where the signal is.
        let latency = Family::<EndpointLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.000_025, 2.0, 16))
        });
        let policy_reloads = Family::<OutcomeLabels, Counter>::default();
        let cert_reloads = Family::<OutcomeLabels, Counter>::default();
        let self_signed = Gauge::default();
        let http_errors = Family::<ReviewLabels, Counter>::default();
        let inventory_up = Gauge::default();
        let inventory_age = Gauge::default();
        let saturated = Counter::default();
        let connections = Gauge::default();
        let deadlines = Family::<StageLabels, Counter>::default();
        let cert_days_left = Gauge::default();
        let block_seconds_left = Family::<ReservationLabels, Gauge>::default();
        let reservations_reloads = Family::<OutcomeLabels, Counter>::default();
        let mark_key_reloads = Family::<OutcomeLabels, Counter>::default();
        let cert_expiry = Gauge::default();
        let events = Family::<EventLabels, Counter>::default();
        let namespaces = super::metrics_namespaces::ByNamespace::default();
        // Series that alerts compare are there from the start, at 0.
        for family in [
            &policy_reloads,
            &cert_reloads,
            &reservations_reloads,
            &mark_key_reloads,
        ] {
            for outcome in ["success", "failure"] {
                let _ = family.get_or_create(&OutcomeLabels { outcome });
            }
        }
        for outcome in ["published", "failed", "rate_limited", "queue_full"] {
            let _ = events.get_or_create(&EventLabels { outcome });
        }
        let build = Family::<BuildLabels, Gauge>::default();
        build
            .get_or_create(&BuildLabels {
                version: env!("CARGO_PKG_VERSION"),
            })
            .set(1);
        registry.register("build_info", "trainplace's version (always 1)", build);
        registry.register(
            "mark_key_reloads",
            "Admission-mark key directory reloads",
            mark_key_reloads.clone(),
        );
        registry.register(
            "certificate_expiry_timestamp_seconds",
            "The serving certificate's notAfter, unix seconds",
            cert_expiry.clone(),
        );
        registry.register(
            "events",
            "Kubernetes Events for denials and warnings, by outcome (published, failed, rate_limited, queue_full)",
            events.clone(),
        );
        registry.register(
            "admission_namespace_reviews",
            "AdmissionReviews answered by namespace (--metrics-namespaces; the namespaces past the bound are _other)",
            namespaces.family.clone(),
        );
        registry.register(
            "capacity_block_seconds_remaining",
            "Seconds until the Capacity Block ends (Karpenter drains and EKS managed node groups scale to 0 40 minutes before; EC2 terminates from 30 minutes before)",
            block_seconds_left.clone(),
        );
        registry.register(
            "reservations_reloads",
            "Loads of the describe-capacity-reservations file",
            reservations_reloads.clone(),
        );
        registry.register(
            "reviews_saturated",
            "Reviews answered 503 because every review slot and queue place was taken",
            saturated.clone(),
        );
        registry.register(
            "connections_open",
            "Open HTTPS connections",
            connections.clone(),
        );
        registry.register(
            "connection_deadlines",
            "HTTPS connections closed by a deadline, by stage",
            deadlines.clone(),
        );
        registry.register(
            "certificate_expiry_days",
            "Whole days until the serving certificate expires",
            cert_days_left.clone(),
        );
        registry.register(
            "inventory_up",
            "1 when cluster inventory is live; 0 = embedded catalog only",
            inventory_up.clone(),
        );
        registry.register(
            "inventory_snapshot_age_seconds",
            "Seconds since the inventory snapshot was rebuilt (-1: none)",
            inventory_age.clone(),
        );
        registry.register(
            "admission_reviews",
            "AdmissionReviews answered",
            reviews.clone(),
        );
        registry.register(
            "admission_findings",
            "Findings by endpoint, kind, rule, mode and the review's verdict",
            findings.clone(),
        );
        registry.register(
            "admission_review_duration_seconds",
            "Time to answer one AdmissionReview, parse to serialised response",
            latency.clone(),
        );
        registry.register(
            "policy_reloads",
            "Policy directory reloads",
            policy_reloads.clone(),
        );
        registry.register(
            "certificate_reloads",
            "Serving certificate reloads",
            cert_reloads.clone(),
        );
        registry.register(
            "certificate_self_signed",
            "1 when serving an in-memory self-signed certificate",
            self_signed.clone(),
        );
        registry.register(
            "http_rejections",
            "Requests rejected before review (bad JSON, too large, wrong type)",
            http_errors.clone(),
        );
        Metrics {
            registry,
            reviews,
            findings,
            latency,
            policy_reloads,
            cert_reloads,
            self_signed,
            http_errors,
            inventory_up,
            inventory_age,
            saturated,
            connections,
            deadlines,
            cert_days_left,
            block_seconds_left,
            reservations_reloads,
            mark_key_reloads,
            cert_expiry,
            events,
            namespaces,
        }
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
