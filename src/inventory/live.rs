//! The live inventory: `kube` reflectors (watch + cache) of Nodes, Namespaces, the
//! Pods of training jobs, PyTorchJobs (for scale reviews), Karpenter EC2NodeClasses
//! (Capacity Blocks) and DRA ResourceClaimTemplates, ResourceClaims and ComputeDomains. A ticker rebuilds the snapshot at most once a second when
//! something changed; the request path only loads the newest snapshot (never waits on
//! the API). When the API is unreachable the status says so and the last snapshot (or
//! none: the embedded catalog) keeps serving.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use arc_swap::{ArcSwap, ArcSwapOption};
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use serde::Serialize;
use serde::de::DeserializeOwned;
use trainplace_engine::Snapshot;
use trainplace_engine::annotations::JOB_IDENTITY_LABELS;

use super::{InventorySource, Status};

pub struct LiveInventory {
    current: ArcSwapOption<Snapshot>,
    status: ArcSwap<Status>,
    dirty: AtomicBool,
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
}

/// Watch `api` into a store, marking the inventory dirty on every event and recording
/// watch errors (the watcher retries with backoff by itself).
fn watch<K>(api: Api<K>, config: watcher::Config, inv: Arc<LiveInventory>) -> Store<K>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let (reader, writer) = reflector::store();
    drive(
        watcher(api, config).default_backoff().reflect(writer),
        inv,
        true,
    );
    reader
}

/// Run a reflector stream: an event that completes a state (the end of a (re)list, an
/// object changed or deleted) marks the inventory dirty. `Init`, which the watcher
/// emits before every list attempt (also while the API is unreachable), does not, so
/// a dead API stays reported as down. A watch error of a `required` source marks the
/// inventory down; an optional one (a CRD that may not be installed) is only logged.
fn drive<S, K>(stream: S, inv: Arc<LiveInventory>, required: bool)
where
    S: futures_util::Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
    K: Send,
{
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(event) = stream.next().await {
            match event {
                Ok(watcher::Event::Init | watcher::Event::InitApply(_)) => {}
                Ok(_) => inv.dirty.store(true, Ordering::Release),
                Err(error) if required => {
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

/// A watch of a CRD that may not be installed (PyTorchJobs for `pytorchjobs/scale`
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
        false,
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

impl LiveInventory {
    /// Start watching. Returns at once; the snapshot appears after the first lists.
    pub fn start(client: Client) -> Arc<Self> {
        let inv = Arc::new(LiveInventory {
            current: ArcSwapOption::empty(),
            status: ArcSwap::from_pointee(Status::Syncing),
            dirty: AtomicBool::new(false),
            built: ArcSwapOption::empty(),
        });
        let nodes = watch(
            Api::<Node>::all(client.clone()),
            watcher::Config::default(),
            inv.clone(),
        );
        let namespaces = watch(
            Api::<Namespace>::all(client.clone()),
            watcher::Config::default(),
            inv.clone(),
        );
        // Only pods of training jobs matter: one watch per job identity label.
        let pods: Vec<Store<Pod>> = JOB_IDENTITY_LABELS
            .iter()
            .filter(|(k, _)| k.contains('/'))
            .map(|(k, _)| {
                watch(
                    Api::<Pod>::all(client.clone()),
                    watcher::Config::default().labels(k),
                    inv.clone(),
                )
            })
            .collect();
        let jobs = watch_optional(
            client.clone(),
            inv.clone(),
            ("kubeflow.org", "v1", "PyTorchJob", "pytorchjobs"),
        );
        let node_classes = watch_optional(
            client.clone(),
            inv.clone(),
            ("karpenter.k8s.aws", "v1", "EC2NodeClass", "ec2nodeclasses"),
        );
        // DRA objects pods' resourceClaims are counted through (resource.k8s.io/v1 from
        // Kubernetes 1.34; NVIDIA's ComputeDomain CRD where its DRA driver runs).
        let dra: Vec<Store<DynamicObject>> = [
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
        .collect();
        let me = inv.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                tick.tick().await;
                if !me.dirty.swap(false, Ordering::AcqRel) {
                    continue;
                }
                let node_values = values(&nodes);
                let pod_values: Vec<_> = pods.iter().flat_map(values).collect();
                let ns_values = values(&namespaces);
                let mut snap = Snapshot::build(&node_values, &pod_values, &ns_values);
                snap.add_scalable(&values(&jobs));
                for store in &dra {
                    snap.add_claims(&values(store));
                }
                snap.reservations_mut()
                    .add_ec2nodeclasses(&serde_json::json!({"items": values(&node_classes)}));
                me.status.store(Arc::new(Status::Live {
                    nodes: node_values.len(),
                    gpu_types: snap.types.len(),
                    age_seconds: 0,
                }));
                me.current.store(Some(Arc::new(snap)));
                me.built.store(Some(Arc::new(Instant::now())));
            }
        });
        inv
    }
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
