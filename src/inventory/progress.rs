//! How far the live inventory has got: the newest resourceVersion its watches delivered
//! and the one the published snapshot holds, when that snapshot was published, how
//! long publishing took, and how many (re)lists completed. Exported as debug metrics,
//! so a benchmark can time an API write to the snapshot that holds it, and see a
//! watch relist after an API server restart.
//!
//! resourceVersions are opaque to clients (<https://kubernetes.io/docs/reference/using-api/api-concepts/#resource-versions>);
//! with one etcd they are its revision, which grows across every kind. These figures
//! compare them as numbers for measurement only; no decision reads them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;

/// What a watch delivers, for the resourceVersions tracked per kind: within one
/// watch events arrive in resourceVersion order, across watches they need not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Watched {
    Nodes = 0,
    Pods = 1,
    Other = 2,
}

#[derive(Debug, Default)]
pub struct Progress {
    seen: [AtomicU64; 3],
    published: [AtomicU64; 3],
    published_unix_micros: AtomicU64,
    relists: AtomicU64,
    publishes: AtomicU64,
    publish_micros: AtomicU64,
    events: AtomicU64,
}

/// What [`Progress`] holds at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProgressView {
    /// The newest resourceVersion any watch delivered.
    pub seen_resource_version: u64,
    /// The newest resourceVersion the published snapshot holds: of any kind, of the
    /// Node watch, of the Pod watches.
    pub resource_version: u64,
    pub node_resource_version: u64,
    pub pod_resource_version: u64,
    /// When that snapshot was published (microseconds since the Unix epoch).
    pub published_unix_micros: u64,
    /// Completed lists and relists of the required watches.
    pub relists: u64,
    pub publishes: u64,
    /// Time spent publishing, in total (microseconds).
    pub publish_micros: u64,
    /// Watch events applied to the inventory.
    pub events: u64,
}

impl Progress {
    /// An object with this resourceVersion was applied to the inventory.
    pub fn saw(&self, watched: Watched, resource_version: Option<&str>) {
        self.events.fetch_add(1, Ordering::Relaxed);
        if let Some(rv) = resource_version.and_then(|v| v.parse().ok()) {
            self.seen[watched as usize].fetch_max(rv, Ordering::AcqRel);
        }
    }

    pub fn relisted(&self) {
        self.relists.fetch_add(1, Ordering::Relaxed);
    }

    /// What the snapshot about to be built includes: read before it is built.
    pub fn mark(&self) -> [u64; 3] {
        self.seen.each_ref().map(|s| s.load(Ordering::Acquire))
    }

    /// A snapshot holding everything up to `mark` was published after `took`.
    pub fn published(&self, mark: [u64; 3], took: Duration) {
        for (p, m) in self.published.iter().zip(mark) {
            p.fetch_max(m, Ordering::AcqRel);
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        self.published_unix_micros
            .store(now.as_micros() as u64, Ordering::Release);
        self.publishes.fetch_add(1, Ordering::Relaxed);
        self.publish_micros
            .fetch_add(took.as_micros() as u64, Ordering::Relaxed);
    }

    pub fn view(&self) -> ProgressView {
        let published = self.published.each_ref().map(|p| p.load(Ordering::Acquire));
        ProgressView {
            seen_resource_version: self.mark().into_iter().max().unwrap_or(0),
            resource_version: published.into_iter().max().unwrap_or(0),
            node_resource_version: published[Watched::Nodes as usize],
            pod_resource_version: published[Watched::Pods as usize],
            published_unix_micros: self.published_unix_micros.load(Ordering::Acquire),
            relists: self.relists.load(Ordering::Relaxed),
            publishes: self.publishes.load(Ordering::Relaxed),
            publish_micros: self.publish_micros.load(Ordering::Relaxed),
            events: self.events.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_holds_what_was_seen_before_it_was_built() {
        let p = Progress::default();
        p.saw(Watched::Pods, Some("10"));
        p.saw(Watched::Nodes, Some("7"));
        p.saw(Watched::Other, Some("not a number"));
        let mark = p.mark();
        p.saw(Watched::Pods, Some("12"));
        p.published(mark, Duration::from_micros(30));
        let v = p.view();
        assert_eq!(v.seen_resource_version, 12);
        assert_eq!(v.resource_version, 10);
        assert_eq!((v.node_resource_version, v.pod_resource_version), (7, 10));
        assert_eq!(v.events, 4);
        assert_eq!(v.publishes, 1);
        assert!(v.published_unix_micros > 1_700_000_000_000_000);
    }
}
