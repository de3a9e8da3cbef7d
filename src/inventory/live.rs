//! The live inventory: `kube` reflectors (watch + cache) of Nodes, Namespaces, the
//! Pods of training jobs, PyTorchJobs and PaddleJobs (for scale reviews), Karpenter EC2NodeClasses
//! (Capacity Blocks; blocks from a describe-capacity-reservations file are laid over
//! them), Trainer runtimes (what TrainJobs inherit) and DRA ResourceClaimTemplates,
//! ResourceClaims and ComputeDomains. A ticker publishes a new snapshot at most once a
//! second when something changed: when only pods changed, the last snapshot with the
//! jobs whose pods moved (counted as the events arrived, `pods.rs`); otherwise one
//! rebuilt from the caches (any Node, Namespace or CRD change). The request path only
//! loads the newest snapshot (never waits on the API). When the API is unreachable the
//! status says so and the last snapshot (or none: the embedded catalog) keeps serving.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use arc_swap::{ArcSwap, ArcSwapOption};
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Node};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use serde::Serialize;
use serde::de::DeserializeOwned;
use trainplace_engine::annotations::JOB_IDENTITY_LABELS;
use trainplace_engine::{Reservations, Snapshot};

use super::pods::{PodIndex, PodPlacement};
use super::slim::{changes_cache, slim_namespace, slim_node};
use super::{InventorySource, Status};

pub struct LiveInventory {
    current: ArcSwapOption<Snapshot>,
    /// Blocks from the describe-capacity-reservations file, laid over every rebuild.
    described: ArcSwap<Reservations>,
    status: ArcSwap<Status>,
    /// Something besides training pods changed: the next snapshot is rebuilt.
    dirty: AtomicBool,
    /// Training pods changed: the next snapshot updates the jobs they belong to.
    pods_dirty: AtomicBool,
    built: ArcSwapOption<Instant>,
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
            },
            (s, _) => s,
        }
    }
    fn set_described(&self, reservations: Arc<Reservations>) -> bool {
        self.described.store(reservations);
        self.dirty.store(true, Ordering::Release);
        true
    }
}

/// Watch `api` into a store, marking the inventory dirty on every event that changes
/// what the store keeps (a Node's status update that only slimming sees, its
/// heartbeat conditions, does not) and recording watch errors (the watcher retries
/// with backoff by itself).
fn watch<K>(
    api: Api<K>,
    config: watcher::Config,
    slim: fn(&mut K),
    inv: Arc<LiveInventory>,
) -> Store<K>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + PartialEq
        + Send
        + Sync
        + 'static,
{
    let (reader, writer) = reflector::store();
    let cached = reader.clone();
    // Whether the object of the event in flight changes the store: decided before the
    // store takes it, marked dirty after (so a rebuild cannot miss it).
    let changes = Arc::new(AtomicBool::new(false));
    let seen = changes.clone();
    let marks = inv.clone();
    drive(
        watcher(api, config)
            .default_backoff()
            .modify(slim)
            .map(move |event| {
                if let Ok(watcher::Event::Apply(obj)) = &event {
                    seen.store(changes_cache(&cached, obj), Ordering::Relaxed);
                }
                event
            })
            .reflect(writer)
            .map(move |event| {
                if let Ok(watcher::Event::Apply(_)) = &event
                    && changes.swap(false, Ordering::Relaxed)
                {
                    marks.dirty.store(true, Ordering::Release);
                }
                event
            }),
        inv,
        Source::Cluster,
    );
    reader
}

/// What a watch delivers, for what its events mark dirty.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Source {
    /// Nodes and Namespaces: a watch failure marks the inventory down; an applied
    /// object marks the inventory dirty only when it changes the cache (`watch`).
    Cluster,
    /// Training pods: a watch failure marks the inventory down.
    Pods,
    /// A CRD that may not be installed: failures are only logged.
    Optional,
}

/// Run a reflector stream: an event that completes a state (the end of a (re)list, an
/// object changed or deleted) marks the inventory dirty. `Init`, which the watcher
/// emits before every list attempt (also while the API is unreachable), does not, so
/// a dead API stays reported as down. A watch error of a required source marks the
/// inventory down; an optional one (a CRD that may not be installed) is only logged.
fn drive<S, K>(stream: S, inv: Arc<LiveInventory>, source: Source)
where
    S: futures_util::Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
    K: Send,
{
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(event) = stream.next().await {
            match event {
                Ok(watcher::Event::Init | watcher::Event::InitApply(_)) => {}
                Ok(watcher::Event::Apply(_)) if source == Source::Cluster => {}
                Ok(_) if source == Source::Pods => inv.pods_dirty.store(true, Ordering::Release),
                Ok(_) => inv.dirty.store(true, Ordering::Release),
                Err(error) if source != Source::Optional => {
                    tracing::warn!(%error, "inventory watch failed; serving from the last snapshot or the embedded catalog");
                    inv.status.store(Arc::new(Status::Down {
                        error: error.to_string(),
                    }));
                }
                Err(error) => {
                    tracing::debug!(%error, "optional inventory watch failed (is the CRD installed?)")
                }
            }
        }
    });
}

/// A watch of a CRD that may not be installed (PyTorchJobs and PaddleJobs for `/scale`
/// reviews, Karpenter's EC2NodeClasses for Capacity Blocks): errors are only logged.
fn watch_optional(
    client: Client,
    inv: Arc<LiveInventory>,
    (group, version, kind, plural): (&str, &str, &str, &str),
) -> Store<DynamicObject> {
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let resource = ApiResource::from_gvk_with_plural(&gvk, plural);
    let api = Api::<DynamicObject>::all_with(client, &resource);
    let writer = reflector::store::Writer::new(resource);
    let reader = writer.as_reader();
    drive(
        watcher(api, watcher::Config::default())
            .default_backoff()
            .reflect(writer),
        inv,
        Source::Optional,
    );
    reader
}

fn values<K>(store: &Store<K>) -> Vec<serde_json::Value>
where
    K: kube::Resource + Clone + Serialize,
    K::DynamicType: std::hash::Hash + Eq + Clone,
{
    store
        .state()
        .iter()
        .filter_map(|o| serde_json::to_value(o.as_ref()).ok())
        .collect()
}

/// Watch training pods (as watch number `watch`) into the compact index shared by all
/// pod watches (see `pods.rs`).
fn watch_pods(
    api: Api<PodPlacement>,
    config: watcher::Config,
    (watch, index): (usize, Arc<Mutex<PodIndex>>),
    inv: Arc<LiveInventory>,
) {
    drive(
        watcher(api, config).default_backoff().map(move |event| {
            if let Ok(event) = &event {
                lock(&index).apply(watch, event);
            }
            event
        }),
        inv,
        Source::Pods,
    );
}

/// A poisoned lock (a panic while applying an event) still holds a usable index.
fn lock(index: &Mutex<PodIndex>) -> MutexGuard<'_, PodIndex> {
    index.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The watch caches a snapshot is built from.
pub struct Caches {
    pub nodes: Store<Node>,
    pub namespaces: Store<Namespace>,
    /// The training pods of every pod watch (one per job identity label).
    pub pods: Arc<Mutex<PodIndex>>,
    /// PyTorchJobs and PaddleJobs: what their `/scale` reviews scale.
    pub jobs: [Store<DynamicObject>; 2],
    pub node_classes: Store<DynamicObject>,
    /// TrainingRuntimes and ClusterTrainingRuntimes.
    pub runtimes: [Store<DynamicObject>; 2],
    /// ResourceClaimTemplates, ResourceClaims, ComputeDomains.
    pub dra: Vec<Store<DynamicObject>>,
}

impl Caches {
    /// A new snapshot of what the caches hold: typed objects are read in place (no
    /// JSON round trip), and where jobs run comes from the pod index's job counts,
    /// so the pods themselves are not walked (`examples/inventory_scale.rs`).
    pub fn snapshot(&self) -> Snapshot {
        let nodes = self.nodes.state();
        let namespaces = self.namespaces.state();
        let mut snap = Snapshot::build_indexed(
            nodes.iter().map(Arc::as_ref),
            lock(&self.pods).jobs_mut(),
            namespaces.iter().map(Arc::as_ref),
        );
        for store in &self.jobs {
            snap.add_scalable(&values(store));
        }
        for store in &self.dra {
            snap.add_claims(&values(store));
        }
        for store in &self.runtimes {
            snap.add_runtimes(&values(store));
        }
        snap.reservations_mut()
            .add_ec2nodeclasses(&serde_json::json!({"items": values(&self.node_classes)}));
        snap
    }

    /// `current` (the last snapshot from these caches) with the pod changes since it:
    /// costs O(the jobs whose zones changed), and shares everything else.
    pub fn publish(&self, current: &Snapshot) -> Snapshot {
        current.with_job_changes(lock(&self.pods).jobs_mut())
    }
}

impl LiveInventory {
    /// Start watching. Returns at once; the snapshot appears after the first lists.
    pub fn start(client: Client) -> Arc<Self> {
        let inv = Arc::new(LiveInventory {
            current: ArcSwapOption::empty(),
            described: ArcSwap::from_pointee(Reservations::default()),
            status: ArcSwap::from_pointee(Status::Syncing),
            dirty: AtomicBool::new(false),
            pods_dirty: AtomicBool::new(false),
            built: ArcSwapOption::empty(),
        });
        let caches = Arc::new(caches(&client, &inv));
        publish_changes(inv.clone(), caches);
        inv
    }
}

/// The watches the snapshot is built from, each feeding its cache and marking `inv`
/// dirty on a change that matters.
fn caches(client: &Client, inv: &Arc<LiveInventory>) -> Caches {
    let pods = Arc::new(Mutex::new(PodIndex::default()));
    Caches {
        nodes: watch(
            Api::<Node>::all(client.clone()),
            watcher::Config::default(),
            slim_node,
            inv.clone(),
        ),
        namespaces: watch(
            Api::<Namespace>::all(client.clone()),
            watcher::Config::default(),
            slim_namespace,
            inv.clone(),
        ),
        // Only pods of training jobs matter: one watch per job identity label
        // (`job-name` repeats `batch.kubernetes.io/job-name` on the same pods).
        pods: {
            for (watch, (k, _)) in JOB_IDENTITY_LABELS
                .iter()
                .filter(|(k, _)| *k != "job-name")
                .enumerate()
            {
                watch_pods(
                    Api::<PodPlacement>::all(client.clone()),
                    watcher::Config::default().labels(k),
                    (watch, pods.clone()),
                    inv.clone(),
                );
            }
            pods
        },
        jobs: [("PyTorchJob", "pytorchjobs"), ("PaddleJob", "paddlejobs")].map(|(kind, plural)| {
            watch_optional(
                client.clone(),
                inv.clone(),
                ("kubeflow.org", "v1", kind, plural),
            )
        }),
        node_classes: watch_optional(
            client.clone(),
            inv.clone(),
            ("karpenter.k8s.aws", "v1", "EC2NodeClass", "ec2nodeclasses"),
        ),
        runtimes: [
            ("TrainingRuntime", "trainingruntimes"),
            ("ClusterTrainingRuntime", "clustertrainingruntimes"),
        ]
        .map(|(kind, plural)| {
            watch_optional(
                client.clone(),
                inv.clone(),
                ("trainer.kubeflow.org", "v1alpha1", kind, plural),
            )
        }),
        // DRA objects pods' resourceClaims are counted through (resource.k8s.io/v1
        // from Kubernetes 1.34; NVIDIA's ComputeDomain CRD where its DRA driver runs).
        dra: [
            (
                "resource.k8s.io",
                "v1",
                "ResourceClaimTemplate",
                "resourceclaimtemplates",
            ),
            ("resource.k8s.io", "v1", "ResourceClaim", "resourceclaims"),
            (
                "resource.nvidia.com",
                "v1beta1",
                "ComputeDomain",
                "computedomains",
            ),
        ]
        .into_iter()
        .map(|gvk| watch_optional(client.clone(), inv.clone(), gvk))
        .collect(),
    }
}

/// Once a second: publish the pod changes over the last snapshot, or rebuild it when
/// the cluster changed (or a failed watch recovered).
fn publish_changes(me: Arc<LiveInventory>, caches: Arc<Caches>) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tick.tick().await;
            let cluster = me.dirty.swap(false, Ordering::AcqRel);
            let pods = me.pods_dirty.swap(false, Ordering::AcqRel);
            // A watch that failed and recovered: rebuilt, and reported live again.
            let live = matches!(**me.status.load(), Status::Live { .. });
            let snap = match me.current.load_full() {
                // Only pods changed: the jobs they belong to, over the last snapshot.
                Some(current) if pods && !cluster && live => caches.publish(&current),
                _ if cluster || pods => {
                    // A rebuild over a large cluster takes ms: off the async workers.
                    let build = caches.clone();
                    let Ok(mut snap) = tokio::task::spawn_blocking(move || build.snapshot()).await
                    else {
                        continue;
                    };
                    snap.reservations_mut().extend(&me.described.load());
                    me.status.store(Arc::new(Status::Live {
                        nodes: caches.nodes.state().len(),
                        gpu_types: snap.types.len(),
                        age_seconds: 0,
                    }));
                    snap
                }
                _ => continue,
            };
            me.current.store(Some(Arc::new(snap)));
            me.built.store(Some(Arc::new(Instant::now())));
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
