//! `trainplace_mark_verification_failures_total`: admission marks on trusted controllers'
//! objects that verified with none of the keys (a forged or copied mark, or a replica
//! with another key). The engine counts into one atomic that every loaded key set shares
//! (`MarkKeys::counting_failures_in`), so the count survives key reloads; it is read at
//! each scrape.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;

#[derive(Debug, Default, Clone)]
pub struct MarkFailures(pub Arc<AtomicU64>);

impl Collector for MarkFailures {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let counter = ConstCounter::new(self.0.load(Ordering::Relaxed));
        let metric = encoder.encode_descriptor(
            "mark_verification_failures",
            "Admission marks on trusted controllers' objects that no key verified (forged, copied, or signed by a replica with another key); those objects were judged again",
            None,
            counter.metric_type(),
        )?;
        counter.encode(metric)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_at_each_scrape() {
        let m = super::super::Metrics::new();
        let series = "trainplace_mark_verification_failures_total";
        assert!(
            m.encode().contains(&format!("{series} 0")),
            "{}",
            m.encode()
        );
        m.mark_failures.0.fetch_add(3, Ordering::Relaxed);
        assert!(m.encode().contains(&format!("{series} 3")));
    }
}
