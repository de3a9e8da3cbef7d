//! The live inventory: watches of Nodes, Namespaces, the Pods of training jobs, and
//! the CRDs a snapshot reads (PyTorchJobs and PaddleJobs for scale reviews, Trainer
//! runtimes, DRA objects, Karpenter EC2NodeClasses for Capacity Blocks; blocks from a
//! describe-capacity-reservations file are laid over them). Each event is applied to
//! the [`Index`] as a bounded delta and wakes the publisher, which publishes a new
//! snapshot with the changes since the last one (at most one every
//! [`PUBLISH_SPACING`]): a node, namespace, pod or CRD change costs O(that change),
//! never a rebuild of the cluster (`index.rs`). The request path only loads the newest
//! snapshot (never waits on the API or on a publish). When the API is unreachable the
//! status says so and the last snapshot (or none: the embedded catalog) keeps serving.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use arc_swap::{ArcSwap, ArcSwapOption};
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Node};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use trainplace_engine::annotations::JOB_IDENTITY_LABELS;
use trainplace_engine::{Reservations, Snapshot};

use super::index::{Crd, Index, NODE_CLASSES, OBJECT_CRDS};
use super::pods::PodPlacement;
use super::progress::{Progress, ProgressView, Watched};
use super::slim::{slim_namespace, slim_node};
use super::{InventorySource, Status};

/// The least time between two publishes: a burst of events (a relist, a job's pods
/// starting together) is published as one snapshot.
pub const PUBLISH_SPACING: Duration = Duration::from_millis(10);

pub struct LiveInventory {
    current: ArcSwapOption<Snapshot>,
    status: ArcSwap<Status>,
    built: ArcSwapOption<Instant>,
    index: Mutex<Index>,
    /// Something changed since the last publish.
    wake: tokio::sync::Notify,
    /// Required watches whose first list has not completed yet.
    unlisted: AtomicUsize,
    progress: Progress,
}

impl InventorySource for LiveInventory {
    fn snapshot(&self) -> Option<Arc<Snapshot>> {
        self.current.load_full()
    }
    fn status(&self) -> Status {
        let s = (**self.status.load()).clone();
        match (s, self.built.load_full()) {
            (
                Status::Live {
                    nodes, gpu_types, ..
                },
                Some(at),
            ) => Status::Live {
                nodes,
                gpu_types,
                age_seconds: at.elapsed().as_secs(),
                progress: self.progress.view(),
            },
            (s, _) => s,
        }
    }
    fn set_described(&self, reservations: Arc<Reservations>) -> bool {
        lock(&self.index).set_described((*reservations).clone());
        self.wake.notify_one();
        true
    }
}

/// A poisoned lock (a panic while applying an event) still holds a usable index.
fn lock(index: &Mutex<Index>) -> MutexGuard<'_, Index> {
    index.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Whether a watch is required (its failure marks the inventory down) or of a CRD
/// that may not be installed (failures are only logged).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Need {
    Required,
    Optional,
}

/// Run a watch: each event is applied to the index by `apply` (under its lock),
/// recorded in the progress, and wakes the publisher. A required watch's error marks
/// the inventory down; its first completed list counts towards the first snapshot.
fn drive<K, F>(
    stream: impl futures_util::Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
    inv: Arc<LiveInventory>,
    (need, watched): (Need, Watched),
    apply: F,
) where
    K: kube::Resource + Send + 'static,
    F: Fn(&mut Index, &watcher::Event<K>) + Send + 'static,
{
    if need == Need::Required {
        inv.unlisted.fetch_add(1, Ordering::AcqRel);
    }
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        let mut listed = false;
        while let Some(event) = stream.next().await {
            let event = match event {
                Ok(event) => event,
                Err(error) if need == Need::Required => {
                    tracing::warn!(%error, "inventory watch failed; serving from the last snapshot or the embedded catalog");
                    inv.status.store(Arc::new(Status::Down {
                        error: error.to_string(),
                    }));
                    continue;
                }
                Err(error) => {
                    tracing::debug!(%error, "optional inventory watch failed (is the CRD installed?)");
                    continue;
                }
            };
            match &event {
                watcher::Event::Apply(o)
                | watcher::Event::Delete(o)
                | watcher::Event::InitApply(o) => inv
                    .progress
                    .saw(watched, o.meta().resource_version.as_deref()),
                watcher::Event::InitDone if need == Need::Required => {
                    inv.progress.relisted();
                    if !std::mem::replace(&mut listed, true) {
                        inv.unlisted.fetch_sub(1, Ordering::AcqRel);
                    }
                }
                _ => {}
            }
            apply(&mut lock(&inv.index), &event);
            // `Init` (before every list attempt, also while the API is unreachable)
            // changes nothing, so a dead API stays reported as down.
            if !matches!(event, watcher::Event::Init) {
                inv.wake.notify_one();
            }
        }
    });
}

/// A watch of a CRD that may not be installed: errors are only logged.
fn watch_optional(
    client: &Client,
    inv: &Arc<LiveInventory>,
    (api_version, kind, plural): (&str, &str, &str),
    crd: Crd,
) {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let api = Api::<DynamicObject>::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(&gvk, plural),
    );
    drive(
        watcher(api, watcher::Config::default()).default_backoff(),
        inv.clone(),
        (Need::Optional, Watched::Other),
        move |index, event| index.crd(crd, event),
    );
}

impl LiveInventory {
    /// Start watching. Returns at once; the snapshot appears after the first lists.
    pub fn start(client: Client) -> Arc<Self> {
        let inv = Arc::new(LiveInventory {
            current: ArcSwapOption::empty(),
            status: ArcSwap::from_pointee(Status::Syncing),
            built: ArcSwapOption::empty(),
            index: Mutex::new(Index::new()),
            wake: tokio::sync::Notify::new(),
            unlisted: AtomicUsize::new(0),
            progress: Progress::default(),
        });
        watch_all(&client, &inv);
        publish_changes(inv.clone());
        inv
    }
}

/// Start every watch, each applying its events to the index.
fn watch_all(client: &Client, inv: &Arc<LiveInventory>) {
    let config = watcher::Config::default();
    drive(
        watcher(Api::<Node>::all(client.clone()), config.clone())
            .default_backoff()
            .modify(slim_node),
        inv.clone(),
        (Need::Required, Watched::Nodes),
        |index, event| {
            index.node(event);
        },
    );
    drive(
        watcher(Api::<Namespace>::all(client.clone()), config.clone())
            .default_backoff()
            .modify(slim_namespace),
        inv.clone(),
        (Need::Required, Watched::Other),
        |index, event| {
            index.namespace(event);
        },
    );
    // Only pods of training jobs matter: one watch per job identity label
    // (`job-name` repeats `batch.kubernetes.io/job-name` on the same pods).
    for (watch, (k, _)) in JOB_IDENTITY_LABELS
        .iter()
        .filter(|(k, _)| *k != "job-name")
        .enumerate()
    {
        drive(
            watcher(
                Api::<PodPlacement>::all(client.clone()),
                config.clone().labels(k),
            )
            .default_backoff(),
            inv.clone(),
            (Need::Required, Watched::Pods),
            move |index, event| index.pod(watch, event),
        );
    }
    for (i, crd) in OBJECT_CRDS.into_iter().enumerate() {
        watch_optional(client, inv, crd, Crd::Object(i));
    }
    watch_optional(client, inv, NODE_CLASSES, Crd::NodeClass);
}

/// Whenever something changed: publish the changes since the last snapshot, once
/// every required watch has listed once. A publish costs O(the changes).
fn publish_changes(me: Arc<LiveInventory>) {
    tokio::spawn(async move {
        loop {
            me.wake.notified().await;
            if me.unlisted.load(Ordering::Acquire) > 0 {
                continue;
            }
            let started = Instant::now();
            let mark = me.progress.mark();
            let (snap, nodes) = {
                let mut index = lock(&me.index);
                (index.publish(), index.nodes())
            };
            let gpu_types = snap.types.len();
            me.current.store(Some(Arc::new(snap)));
            me.built.store(Some(Arc::new(Instant::now())));
            me.status.store(Arc::new(Status::Live {
                nodes,
                gpu_types,
                age_seconds: 0,
                progress: ProgressView::default(),
            }));
            me.progress.published(mark, started.elapsed());
            tokio::time::sleep(PUBLISH_SPACING).await;
        }
    });
}

/// The cluster's Nodes through the kubeconfig, as `kubectl get nodes -o json` prints
/// them (for `trainplace advise --from-cluster`).
pub fn nodes_json() -> anyhow::Result<String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let client = Client::try_default().await?;
        let nodes = Api::<Node>::all(client).list(&Default::default()).await?;
        Ok(serde_json::to_string(
            &serde_json::json!({"apiVersion": "v1", "kind": "List", "items": nodes.items}),
        )?)
    })
}
