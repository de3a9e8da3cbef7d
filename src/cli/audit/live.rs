//! The live side of `trainplace audit`: the kinds it lists through the kubeconfig and
//! how it judges them in bounded memory. It reads the cluster twice: first the
//! inventory (namespaces, nodes, where every pod runs, Karpenter's Capacity Blocks,
//! Trainer's runtimes), keeping only the snapshot the webhook would keep; then every
//! workload kind, page by page, judging each page against that snapshot and keeping
//! only the verdicts. The pods are read the second time at the resource version of the
//! first read, so both describe one moment of the cluster.

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use serde_json::{Value, json};
use trainplace_engine::{JobIndex, Kind, Policy, Reservations, Snapshot, Verdict};

use super::AuditArgs;
use super::pages::{From, Progress, for_each_page};
use crate::cli::input::Document;
use crate::cli::judge::{Submitter, judge};

/// A kind a live audit lists: (group, version, kind, plural).
type ListedKind = (&'static str, &'static str, &'static str, &'static str);

/// The workload kinds a live audit judges.
const KINDS: [ListedKind; 16] = [
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
    ("kubeflow.org", "v1", "TFJob", "tfjobs"),
    ("kubeflow.org", "v1", "XGBoostJob", "xgboostjobs"),
    ("kubeflow.org", "v1", "JAXJob", "jaxjobs"),
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
];

/// Trainer's runtimes: read with the inventory (a TrainJob is judged with the runtime
/// it names), then judged themselves.
const RUNTIMES: [ListedKind; 2] = [
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
];

const NAMESPACES: ListedKind = ("", "v1", "Namespace", "namespaces");
const NODES: ListedKind = ("", "v1", "Node", "nodes");
const NODE_CLASSES: ListedKind = ("karpenter.k8s.aws", "v1", "EC2NodeClass", "ec2nodeclasses");

/// Kinds without a namespace: listed cluster-wide even with `--namespace`.
pub(super) const CLUSTER_SCOPED: [&str; 2] = ["Namespace", "ClusterTrainingRuntime"];

/// What a live audit found.
pub(super) struct Judged {
    /// The verdicts worth listing (workloads, and whatever is denied), without the
    /// objects they judged.
    pub verdicts: Vec<Verdict>,
    pub snapshot: Snapshot,
    /// Pods on Capacity Block nodes (for `--ending-within`) and on nodes with network
    /// layer labels (for `--network-spread`); empty without either.
    pub block_pods: Vec<Value>,
    pub notes: Vec<String>,
}

/// Judge the live cluster through the kubeconfig, with the Capacity Blocks of
/// `--reservations` (`blocks`) added to the inventory.
pub(super) async fn audit(
    args: &AuditArgs,
    policy: &Policy,
    now: jiff::Timestamp,
    blocks: Option<Reservations>,
) -> anyhow::Result<Judged> {
    let client = kube::Client::try_from(client_config(args).await?)?;
    let progress = Progress::new(KINDS.len() + RUNTIMES.len() + 4);
    let lists = Lists {
        client,
        args,
        progress,
    };
    let mut notes = Vec::new();
    let (mut snapshot, pods_at) = lists.inventory().await?;
    if let Some(blocks) = blocks {
        snapshot.reservations_mut().extend(&blocks);
    }
    let runtimes = lists.runtimes(&mut notes).await?;
    snapshot.add_runtimes(&runtimes);
    let submitter = Submitter {
        default_namespace: "default",
        namespace_labels: None,
        groups: &args.groups,
        inventory: Some(&snapshot),
        now: Some(now),
    };
    let mut judged = Judging {
        policy,
        submitter,
        keep_block_pods: args.ending_within.is_some(),
        keep_networked_pods: args.network_spread,
        verdicts: Vec::new(),
        block_pods: Vec::new(),
        listed: 0,
    };
    for runtime in runtimes {
        judged.one(runtime);
    }
    for kind in KINDS {
        lists
            .judge_kind(kind, &pods_at, &mut judged, &mut notes)
            .await?;
    }
    lists.progress.done();
    let (verdicts, block_pods) = (judged.verdicts, judged.block_pods);
    Ok(Judged {
        verdicts,
        snapshot,
        block_pods,
        notes,
    })
}

/// The list calls of one audit.
struct Lists<'a> {
    client: kube::Client,
    args: &'a AuditArgs,
    progress: Progress,
}

impl Lists<'_> {
    /// The API for `kind`: in `--namespace` when given and the kind has namespaces.
    fn api(&self, (group, version, kind, plural): ListedKind) -> (Api<DynamicObject>, String) {
        let ar =
            ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
        let api = match &self.args.namespace {
            Some(ns) if !CLUSTER_SCOPED.contains(&kind) && kind != "Node" => {
                Api::namespaced_with(self.client.clone(), ns, &ar)
            }
            _ => Api::all_with(self.client.clone(), &ar),
        };
        (api, ar.api_version)
    }

    /// Every object of `kind`, as JSON with its apiVersion and kind; `None` when the
    /// kind is not installed. For the small lists (namespaces, nodes, node classes,
    /// runtimes), not for pods or workloads.
    async fn values(&self, listed: ListedKind) -> anyhow::Result<Option<Vec<Value>>> {
        let (api, api_version) = self.api(listed);
        self.progress.step("reading", listed.3);
        let mut out = Vec::new();
        let read = for_each_page(&api, From::Newest, &self.progress, listed.3, |items| {
            for o in items {
                out.push(as_value(o, &api_version, listed.2)?);
            }
            Ok(())
        })
        .await;
        match read {
            Ok(_) => Ok(Some(out)),
            Err(e) if e.is_status(404) => Ok(None),
            Err(e) => Err(e.naming(listed.3)),
        }
    }

    /// Every node, as much of it as the snapshot reads (name, labels, allocatable): a
    /// large cluster's nodes are not kept whole.
    async fn nodes(&self) -> anyhow::Result<Vec<Value>> {
        let (api, _) = self.api(NODES);
        self.progress.step("reading", NODES.3);
        let mut out = Vec::new();
        for_each_page(&api, From::Newest, &self.progress, NODES.3, |items| {
            out.extend(items.into_iter().map(|n| {
                json!({
                    "metadata": {"name": n.metadata.name, "labels": n.metadata.labels},
                    "status": {"allocatable": n.data["status"]["allocatable"]},
                })
            }));
            Ok(())
        })
        .await
        .map_err(|e| e.naming(NODES.3))?;
        Ok(out)
    }

    /// The snapshot the webhook would keep of this cluster: namespaces, nodes, where
    /// each job's pods run, Karpenter's Capacity Blocks. Returns it with the resource
    /// version the pods were read at.
    async fn inventory(&self) -> anyhow::Result<(Snapshot, String)> {
        let namespaces = self.values(NAMESPACES).await?.unwrap_or_default();
        let nodes = self.nodes().await?;
        let mut jobs = JobIndex::default();
        let mut snapshot = Snapshot::build_indexed(&nodes, &mut jobs, &namespaces);
        drop((nodes, namespaces));
        let (pods, _) = self.api(KINDS[0]);
        self.progress.step("reading", "pods");
        let version = for_each_page(&pods, From::Newest, &self.progress, "pods", |items| {
            for pod in items {
                jobs.add(&serde_json::to_value(pod)?);
            }
            Ok(())
        })
        .await
        .map_err(|e| e.naming("pods"))?;
        snapshot = snapshot.with_job_changes(&mut jobs);
        // Karpenter's Capacity Blocks; a cluster without Karpenter has no such CRD.
        if let Some(classes) = self.values(NODE_CLASSES).await? {
            snapshot
                .reservations_mut()
                .add_ec2nodeclasses(&json!({ "items": classes }));
        }
        Ok((snapshot, version))
    }

    /// Trainer's runtimes.
    async fn runtimes(&self, notes: &mut Vec<String>) -> anyhow::Result<Vec<Value>> {
        let mut out = Vec::new();
        for listed in RUNTIMES {
            match self.values(listed).await? {
                Some(values) => out.extend(values),
                None => notes.push(not_installed(listed)),
            }
        }
        Ok(out)
    }

    /// Judge every object of `kind`, page by page. Pods are read at the resource
    /// version the inventory read them at (`pods_at`), or anew if the API server no
    /// longer keeps it.
    async fn judge_kind(
        &self,
        listed: ListedKind,
        pods_at: &str,
        judged: &mut Judging<'_>,
        notes: &mut Vec<String>,
    ) -> anyhow::Result<()> {
        let (api, api_version) = self.api(listed);
        let from = match listed.2 {
            "Pod" if !pods_at.is_empty() => From::Exactly(pods_at),
            _ => From::Newest,
        };
        let pages = std::cell::Cell::new(0);
        let mut page = |items: Vec<DynamicObject>| {
            pages.set(pages.get() + 1);
            // One object at a time: its JSON and its verdict's copy are dropped before
            // the next is read.
            for o in items {
                judged.one(as_value(o, &api_version, listed.2)?);
            }
            Ok(())
        };
        self.progress.step("judging", listed.3);
        let mut read = for_each_page(&api, from, &self.progress, listed.3, &mut page).await;
        // Only when nothing was judged yet: a page is never judged twice.
        let expired = read.as_ref().is_err_and(|e| e.is_status(410)) && pages.get() == 0;
        if matches!(from, From::Exactly(_)) && expired {
            notes.push(format!(
                "the API server no longer keeps resource version {pods_at}: pods were judged as they are now, against the inventory read before"
            ));
            read = for_each_page(&api, From::Newest, &self.progress, listed.3, &mut page).await;
        }
        match read {
            Ok(_) => Ok(()),
            Err(e) if e.is_status(404) => {
                notes.push(not_installed(listed));
                Ok(())
            }
            Err(e) => Err(e.naming(listed.3)),
        }
    }
}

/// The verdicts of a live audit, gathered one page at a time.
struct Judging<'a> {
    policy: &'a Policy,
    submitter: Submitter<'a>,
    keep_block_pods: bool,
    keep_networked_pods: bool,
    verdicts: Vec<Verdict>,
    block_pods: Vec<Value>,
    /// Objects judged so far, to number them.
    listed: usize,
}

impl Judging<'_> {
    /// Judge one object and keep what the report needs: the verdict on a workload or a
    /// denial, without the object; a pod on a Capacity Block node.
    fn one(&mut self, object: Value) {
        self.listed += 1;
        let doc = [Document {
            doc: self.listed,
            object,
        }];
        for v in judge(&doc, self.policy, &self.submitter) {
            if v.kind_class != Kind::Other || !v.allowed {
                self.verdicts.push(without_object(v));
            }
        }
        let [Document { object, .. }] = doc;
        if object["kind"] == "Pod"
            && self.submitter.inventory.is_some_and(|snapshot| {
                (self.keep_block_pods && on_block_node(&object, snapshot))
                    || (self.keep_networked_pods && on_networked_node(&object, snapshot))
            })
        {
            self.block_pods.push(object);
        }
    }
}

/// Whether the pod is bound to a node of a Capacity Block.
fn on_block_node(pod: &Value, snapshot: &Snapshot) -> bool {
    pod["spec"]["nodeName"]
        .as_str()
        .is_some_and(|n| snapshot.block_nodes().node(n).is_some())
}

/// Whether the pod is bound to a node that carries the network layer labels.
fn on_networked_node(pod: &Value, snapshot: &Snapshot) -> bool {
    pod["spec"]["nodeName"]
        .as_str()
        .is_some_and(|n| snapshot.node_network(n).is_some())
}

/// The verdict with only what a report names of its object (apiVersion and uid): an
/// audit of a large cluster keeps one verdict per object.
fn without_object(mut v: Verdict) -> Verdict {
    v.object = json!({
        "apiVersion": v.object["apiVersion"],
        "metadata": {"uid": v.object["metadata"]["uid"]},
    });
    v.patch = trainplace_engine::Patch::default();
    v
}

/// A listed object as JSON with its apiVersion and kind (a list's items carry neither).
fn as_value(o: DynamicObject, api_version: &str, kind: &str) -> anyhow::Result<Value> {
    let mut v = serde_json::to_value(o)?;
    v["apiVersion"] = json!(api_version);
    v["kind"] = json!(kind);
    Ok(v)
}

fn not_installed((group, _, kind, _): ListedKind) -> String {
    format!("{kind} ({group}) is not installed in this cluster: skipped")
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
