//! The live side of `trainplace audit`: the kinds it lists through the kubeconfig, the
//! client it lists them with (in pages of [`PAGE`] objects), and its progress line.

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use serde_json::{Value, json};
use trainplace_engine::Snapshot;

use super::AuditArgs;
use crate::cli::input::Document;

/// The kinds a live audit lists: (group, version, kind, plural).
const KINDS: [(&str, &str, &str, &str); 16] = [
    ("", "v1", "Pod", "pods"),
    ("batch", "v1", "Job", "jobs"),
    ("jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets"),
    ("kubeflow.org", "v1", "PyTorchJob", "pytorchjobs"),
    ("kubeflow.org", "v2beta1", "MPIJob", "mpijobs"),
    ("trainer.kubeflow.org", "v1alpha1", "TrainJob", "trainjobs"),
    (
        "leaderworkerset.x-k8s.io",
        "v1",
        "LeaderWorkerSet",
        "leaderworkersets",
    ),
    ("kubeflow.org", "v1", "PaddleJob", "paddlejobs"),
    ("ray.io", "v1", "RayCluster", "rayclusters"),
    ("ray.io", "v1", "RayJob", "rayjobs"),
    ("ray.io", "v1", "RayService", "rayservices"),
    ("batch.volcano.sh", "v1alpha1", "Job", "jobs"),
    (
        "sagemaker.amazonaws.com",
        "v1",
        "HyperPodPyTorchJob",
        "hyperpodpytorchjobs",
    ),
    (
        "trainer.kubeflow.org",
        "v1alpha1",
        "TrainingRuntime",
        "trainingruntimes",
    ),
    (
        "trainer.kubeflow.org",
        "v1alpha1",
        "ClusterTrainingRuntime",
        "clustertrainingruntimes",
    ),
    ("", "v1", "Namespace", "namespaces"),
];

/// Kinds without a namespace: listed cluster-wide even with `--namespace`.
pub(super) const CLUSTER_SCOPED: [&str; 2] = ["Namespace", "ClusterTrainingRuntime"];

/// List the live objects (and the inventory) through the kubeconfig.
pub(super) async fn live(
    args: &AuditArgs,
) -> anyhow::Result<(Vec<Document>, Snapshot, Vec<String>)> {
    let client = kube::Client::try_from(client_config(args).await?)?;
    let progress = Progress::new(KINDS.len() + 2);
    let mut docs = Vec::new();
    let mut notes = Vec::new();
    let mut namespaces = Vec::new();
    for (group, version, kind, plural) in KINDS {
        let ar =
            ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
        let api: Api<DynamicObject> = match (&args.namespace, kind) {
            (Some(ns), k) if !CLUSTER_SCOPED.contains(&k) => {
                Api::namespaced_with(client.clone(), ns, &ar)
            }
            _ => Api::all_with(client.clone(), &ar),
        };
        progress.step(plural);
        match list_all(&api, &progress, plural).await {
            Ok(items) => {
                for o in items {
                    let mut v = serde_json::to_value(&o)?;
                    v["apiVersion"] = json!(ar.api_version);
                    v["kind"] = json!(kind);
                    if kind == "Namespace" {
                        namespaces.push(v);
                    } else {
                        docs.push(Document {
                            doc: docs.len() + 1,
                            object: v,
                        });
                    }
                }
            }
            Err(kube::Error::Api(e)) if e.code == 404 => notes.push(format!(
                "{kind} ({group}) is not installed in this cluster: skipped"
            )),
            Err(e) => return Err(anyhow::anyhow!("cannot list {plural}: {e}")),
        }
    }
    let nodes: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("", "v1", "Node"), "nodes"),
    );
    progress.step("nodes");
    let node_values: Vec<Value> = list_all(&nodes, &progress, "nodes")
        .await?
        .iter()
        .filter_map(|n| serde_json::to_value(n).ok())
        .collect();
    let pods: Vec<Value> = docs
        .iter()
        .filter(|d| d.object["kind"] == "Pod")
        .map(|d| d.object.clone())
        .collect();
    let mut snapshot = Snapshot::build(&node_values, &pods, &namespaces);
    // Karpenter's Capacity Blocks; a cluster without Karpenter has no such CRD.
    let classes: Api<DynamicObject> = Api::all_with(
        client,
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("karpenter.k8s.aws", "v1", "EC2NodeClass"),
            "ec2nodeclasses",
        ),
    );
    progress.step("ec2nodeclasses");
    let listed = list_all(&classes, &progress, "ec2nodeclasses").await;
    progress.done();
    match listed {
        Ok(items) => snapshot
            .reservations_mut()
            .add_ec2nodeclasses(&json!({ "items": serde_json::to_value(&items)? })),
        Err(kube::Error::Api(e)) if e.code == 404 => {}
        Err(e) => return Err(anyhow::anyhow!("cannot list ec2nodeclasses: {e}")),
    }
    // TrainJobs are judged with the runtimes they name.
    snapshot.add_runtimes(docs.iter().map(|d| &d.object));
    Ok((docs, snapshot, notes))
}

/// Objects per list call: the API server answers a large cluster's pods in pages, so
/// no single response (nor its time in the API server) grows with the cluster.
const PAGE: u32 = 500;

/// Every object `api` lists, page by page (`limit` and `continue`), the count so far
/// on the progress line.
async fn list_all(
    api: &Api<DynamicObject>,
    progress: &Progress,
    what: &str,
) -> Result<Vec<DynamicObject>, kube::Error> {
    let mut items = Vec::new();
    let mut params = ListParams::default().limit(PAGE);
    loop {
        let page = api.list(&params).await?;
        items.extend(page.items);
        progress.count(what, items.len());
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(items),
        }
    }
}

/// The client configuration: `--kubeconfig` and `--context` when given, else what
/// kubectl would use.
pub(super) async fn client_config(args: &AuditArgs) -> anyhow::Result<kube::Config> {
    let options = kube::config::KubeConfigOptions {
        context: args.context.clone(),
        ..Default::default()
    };
    Ok(match &args.kubeconfig {
        Some(path) => {
            let kubeconfig = kube::config::Kubeconfig::read_from(path)
                .map_err(|e| anyhow::anyhow!("--kubeconfig {}: {e}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &options).await?
        }
        None if args.context.is_some() => kube::Config::from_kubeconfig(&options).await?,
        None => kube::Config::infer().await?,
    })
}

/// Progress of a live audit on stderr, only when stderr is a terminal (a script's
/// stderr stays for errors): which list is being read, overwritten in place.
struct Progress {
    on: bool,
    total: usize,
    done: std::cell::Cell<usize>,
}

impl Progress {
    fn new(total: usize) -> Self {
        use std::io::IsTerminal;
        Progress {
            on: std::io::stderr().is_terminal(),
            total,
            done: std::cell::Cell::new(0),
        }
    }

    fn step(&self, what: &str) {
        self.done.set(self.done.get() + 1);
        if self.on {
            crate::cli::out::stderr(format_args!(
                "\r\x1b[2Kaudit: listing {what} ({}/{})",
                self.done.get(),
                self.total
            ));
        }
    }

    fn count(&self, what: &str, listed: usize) {
        if self.on {
            crate::cli::out::stderr(format_args!(
                "\r\x1b[2Kaudit: listing {what} ({}/{}): {listed}",
                self.done.get(),
                self.total
            ));
        }
    }

    fn done(&self) {
        if self.on {
            crate::cli::out::stderr(format_args!("\r\x1b[2K"));
        }
    }
}
