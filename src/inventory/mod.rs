//! Cluster inventory sources. The engine reads an immutable `Snapshot`; a source
//! provides the newest one without blocking: a live watch of the Kubernetes API
//! (`kube` reflectors) or `kubectl get -o json` files. When the API is unreachable the
//! webhook serves from the embedded catalog and says so in `/readyz` and a metric.

pub mod files;
pub mod index;
pub mod live;
pub mod pods;
pub mod progress;
pub mod reservations_file;
pub mod slim;

use std::sync::Arc;

use serde::Serialize;
use trainplace_engine::{Reservations, Snapshot};

/// Where the inventory stands, for `/readyz` and metrics.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum Status {
    /// No cluster connection configured.
    Disabled,
    /// Watching; the first full list has not arrived yet.
    Syncing,
    /// Serving live data.
    Live {
        nodes: usize,
        gpu_types: usize,
        age_seconds: u64,
        /// How far the watches and the published snapshot have got.
        progress: progress::ProgressView,
    },
    /// The API cannot be reached; decisions use the embedded catalog.
    Down { error: String },
    /// Loaded from files.
    Static { gpu_types: usize },
}

/// Something that can hand the engine a snapshot without blocking.
pub trait InventorySource: Send + Sync {
    fn snapshot(&self) -> Option<Arc<Snapshot>>;
    fn status(&self) -> Status;
    /// Capacity Blocks from a describe-capacity-reservations file, to lay over what the
    /// source itself knows (EC2NodeClass statuses) in every snapshot from now on.
    /// Returns false when the source has no snapshot to put them in.
    fn set_described(&self, _reservations: Arc<Reservations>) -> bool {
        false
    }
}

/// No cluster: the embedded catalog only.
pub struct NoCluster;

impl InventorySource for NoCluster {
    fn snapshot(&self) -> Option<Arc<Snapshot>> {
        None
    }
    fn status(&self) -> Status {
        Status::Disabled
    }
}
