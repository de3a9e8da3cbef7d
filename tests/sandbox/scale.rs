//! A cluster grown and churned through the sandbox's real API server, and what it costs
//! trainplace: shared by `examples/sandbox_scale.rs` (the full-size measurement) and
//! `tests/cluster/scale.rs` (a small size in CI). kwok plays the nodes (annotated
//! `kwok.x-k8s.io/node: fake`); pods of training jobs are created through the API
//! server, so both webhooks review them and the inventory watches see them.
//!
//! Pods are whole-node 8-GPU JobSet pods created already bound (`spec.nodeName`, as a
//! pod the scheduler has placed) to a node in their job's zone; kwok does not check
//! capacity, so a node can hold more of them than it has GPUs. Churn pods go through
//! a pod's life: created unbound (a scheduler name nobody serves), bound through the
//! binding subresource (as the scheduler binds), finished (status phase Succeeded, as
//! the kubelet reports) and deleted; nodes are added and removed.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

pub const ZONES: [&str; 3] = ["us-east-1a", "us-east-1b", "us-east-1c"];
pub const NAMESPACES: usize = 20;
const JOBSET: &str = "jobset.sigs.k8s.io/jobset-name";

/// The sandbox the cluster grows in (its `env` file and admin kubeconfig).
pub struct Target {
    pub client: kube::Client,
    pub http: reqwest::Client,
    pub webhook: String,
    pub probe: String,
    pub dir: PathBuf,
}

impl Target {
    pub async fn new(dir: PathBuf, env: &std::collections::BTreeMap<String, String>) -> Self {
        let kubeconfig = kube::config::Kubeconfig::read_from(dir.join("admin.kubeconfig"))
            .expect("the sandbox's admin kubeconfig");
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .expect("a client config");
        let ca = std::fs::read(dir.join("pki/ca.crt")).expect("the sandbox CA");
        let http = reqwest::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(&ca).expect("CA PEM"))
            .build()
            .expect("an HTTP client");
        Target {
            client: kube::Client::try_from(config).expect("a client"),
            http,
            webhook: format!("https://127.0.0.1:{}/mutate", env["SANDBOX_WEBHOOK_PORT"]),
            probe: format!("http://127.0.0.1:{}/readyz", env["SANDBOX_PROBE_PORT"]),
            dir,
        }
    }

    /// VmRSS of a sandbox component (by its PID file), in MiB.
    pub fn rss(&self, component: &str) -> f64 {
        let pid =
            std::fs::read_to_string(self.dir.join("pids").join(component)).unwrap_or_default();
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", pid.trim())).unwrap_or_default();
        status
            .lines()
            .find(|l| l.starts_with("VmRSS:"))
            .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
            .map_or(0.0, |kib| kib / 1024.0)
    }

    /// The inventory's progress from trainplace's `/readyz` (`inventory.progress`).
    pub async fn progress(&self) -> Value {
        let r = self.http.get(&self.probe).send().await;
        let v: Value = match r {
            Ok(r) => r.json().await.unwrap_or_default(),
            Err(_) => Value::Null,
        };
        v["inventory"]["progress"].clone()
    }

    /// Wait until the published snapshot holds pod resourceVersion `rv`; the time from
    /// `sent` (Unix µs) to that publish, or `None` after `timeout`.
    pub async fn published(&self, rv: u64, sent: u64, timeout: Duration) -> Option<Duration> {
        let end = Instant::now() + timeout;
        while Instant::now() < end {
            let p = self.progress().await;
            if p["podResourceVersion"]
                .as_u64()
                .is_some_and(|have| have >= rv)
            {
                let at = p["publishedUnixMicros"].as_u64()?;
                return Some(Duration::from_micros(at.saturating_sub(sent)));
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        None
    }
}

pub fn unix_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_micros() as u64
}

fn rv(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> u64 {
    meta.resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Node `i`: a p5.48xlarge in zone `i % 3`, played by kwok.
pub fn node(name: &str, i: usize) -> Node {
    serde_json::from_value(json!({
        "metadata": {"name": name,
            "annotations": {"kwok.x-k8s.io/node": "fake"},
            "labels": {"node.kubernetes.io/instance-type": "p5.48xlarge",
                "topology.kubernetes.io/zone": ZONES[i % 3],
                "eks.amazonaws.com/nodegroup": format!("p5-{}", ZONES[i % 3]),
                "kubernetes.io/hostname": name, "type": "kwok"}},
        "status": {"capacity": {"cpu": "192", "memory": "2000Gi", "pods": "110",
            "nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "32"},
            "allocatable": {"cpu": "192", "memory": "2000Gi", "pods": "110",
            "nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "32"}}
    }))
    .expect("a node")
}

pub fn node_name(i: usize) -> String {
    format!("scale-{i}")
}

/// Pod `p` of job `j`, bound to `node` (or unbound with a scheduler nobody runs).
pub fn pod(name: &str, j: usize, node: Option<String>) -> Value {
    let mut spec = json!({"restartPolicy": "Never",
        "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"},
        "containers": [{"name": "trainer", "image": "public.ecr.aws/hpc-cloud/nccl-tests:latest",
            "resources": {"limits": {"nvidia.com/gpu": 8}, "requests": {"nvidia.com/gpu": 8, "cpu": "90"}}}]});
    match node {
        Some(n) => spec["nodeName"] = json!(n),
        None => spec["schedulerName"] = json!("scale-bench"),
    }
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace(j), "labels": {JOBSET: format!("job-{j}")}},
        "spec": spec})
}

pub fn namespace(j: usize) -> String {
    format!("scale-{}", j % NAMESPACES)
}

/// A node of job `j`'s zone among the first `nodes` nodes.
pub fn node_for(j: usize, p: usize, nodes: usize) -> String {
    let per_zone = (nodes / 3).max(1);
    node_name(((j * 97 + p) % per_zone) * 3 + j % 3)
}

/// Run `work(i)` for every `i` in `range` on `workers` concurrent tasks; the failures.
pub async fn each<F, Fut>(range: std::ops::Range<usize>, workers: usize, work: F) -> usize
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = bool> + Send,
{
    let (work, next, failed) = (
        Arc::new(work),
        Arc::new(AtomicUsize::new(range.start)),
        Arc::new(AtomicUsize::new(0)),
    );
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..workers {
        let (work, next, failed, end) = (work.clone(), next.clone(), failed.clone(), range.end);
        tasks.spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= end {
                    break;
                }
                if !work(i).await {
                    failed.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
    }
    while tasks.join_next().await.is_some() {}
    failed.load(Ordering::Relaxed)
}

/// The training namespaces, each with its default ServiceAccount.
pub async fn namespaces(t: &Target) {
    let api: Api<Namespace> = Api::all(t.client.clone());
    for i in 0..NAMESPACES {
        let ns =
            serde_json::from_value(json!({"metadata": {"name": format!("scale-{i}")}})).unwrap();
        let _ = api.create(&PostParams::default(), &ns).await;
    }
    for i in 0..NAMESPACES {
        let sa: Api<k8s_openapi::api::core::v1::ServiceAccount> =
            Api::namespaced(t.client.clone(), &format!("scale-{i}"));
        let end = Instant::now() + Duration::from_secs(60);
        while sa.get_opt("default").await.ok().flatten().is_none() {
            assert!(
                Instant::now() < end,
                "no default ServiceAccount in scale-{i}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// Nodes `from..to`, created; the failures.
pub async fn add_nodes(t: &Target, from: usize, to: usize) -> usize {
    let api: Api<Node> = Api::all(t.client.clone());
    each(from..to, 16, move |i| {
        let api = api.clone();
        async move {
            let n = node(&node_name(i), i);
            match api.create(&PostParams::default(), &n).await {
                Ok(_) => true,
                Err(kube::Error::Api(e)) => e.code == 409,
                Err(_) => false,
            }
        }
    })
    .await
}

/// Jobs `from..to` with `per_job` pods each, created bound to nodes among the first
/// `nodes`; the failures and the newest pod resourceVersion.
pub async fn add_jobs(
    t: &Target,
    (from, to): (usize, usize),
    per_job: usize,
    nodes: usize,
) -> (usize, u64) {
    let client = t.client.clone();
    let newest = Arc::new(AtomicUsize::new(0));
    let seen = newest.clone();
    let failed = each(from * per_job..to * per_job, 16, move |i| {
        let (client, newest) = (client.clone(), newest.clone());
        async move {
            let (j, p) = (i / per_job, i % per_job);
            let api: Api<Pod> = Api::namespaced(client, &namespace(j));
            let body: Pod = serde_json::from_value(pod(
                &format!("job-{j}-{p}"),
                j,
                Some(node_for(j, p, nodes)),
            ))
            .unwrap();
            match api.create(&PostParams::default(), &body).await {
                Ok(created) => {
                    newest.fetch_max(rv(&created.metadata) as usize, Ordering::Relaxed);
                    true
                }
                Err(kube::Error::Api(e)) => e.code == 409,
                Err(_) => false,
            }
        }
    })
    .await;
    (failed, seen.load(Ordering::Relaxed) as u64)
}

/// An AdmissionReview of a pod of job `j` for the webhook.
pub fn review(j: usize, i: usize) -> Value {
    let object = pod(&format!("review-{i}"), j, None);
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": format!("00000000-0000-0000-0000-{i:012}"),
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": namespace(j), "operation": "CREATE",
            "userInfo": {"username": "scale-bench", "groups": ["system:authenticated"]},
            "object": object, "dryRun": false}})
}

/// Reviews sent straight to the webhook at `rate`/s for `secs` (open loop, over
/// `connections` keep-alive connections); latencies from each send, sorted.
pub async fn reviews(t: &Target, rate: u64, secs: u64, jobs: usize) -> Vec<Duration> {
    let bodies: Arc<Vec<Vec<u8>>> = Arc::new(
        (0..64)
            .map(|i| serde_json::to_vec(&review(i * 7 % jobs.max(1), i)).unwrap())
            .collect(),
    );
    let mut tasks = tokio::task::JoinSet::new();
    let mut tick = tokio::time::interval(Duration::from_nanos(1_000_000_000 / rate.max(1)));
    for i in 0..(rate * secs) as usize {
        tick.tick().await;
        let (http, url, bodies) = (t.http.clone(), t.webhook.clone(), bodies.clone());
        tasks.spawn(async move {
            let start = Instant::now();
            let ok = http
                .post(&url)
                .header("content-type", "application/json")
                .body(bodies[i % bodies.len()].clone())
                .send()
                .await
                .is_ok_and(|r| r.status().is_success());
            ok.then(|| start.elapsed())
        });
    }
    let mut lat = Vec::new();
    while let Some(r) = tasks.join_next().await {
        lat.extend(r.ok().flatten());
    }
    lat.sort();
    lat
}

pub fn percentile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// What a churn run did.
#[derive(Debug, Default)]
pub struct Churned {
    pub ops: usize,
    pub failed: usize,
    /// A pod created -> the snapshot holding it (from the create's send to the publish).
    pub to_snapshot: Vec<Duration>,
}

/// Churn at `rate` operations/s until `stop`: pod lifecycles (create unbound, bind,
/// finish, delete) in jobs below `jobs`, and every 25th operation a node added or
/// removed (above `nodes`). Each create is timed to the snapshot that holds it.
pub async fn churn(
    t: Arc<Target>,
    rate: u64,
    (jobs, nodes): (usize, usize),
    stop: Arc<AtomicBool>,
    seed: u64,
) -> Churned {
    let mut out = Churned::default();
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut tick = tokio::time::interval(Duration::from_nanos(1_000_000_000 / rate.max(1)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let nodes_api: Api<Node> = Api::all(t.client.clone());
    let mut extra = 0usize;
    let mut k = 0usize;
    while !stop.load(Ordering::Relaxed) {
        tick.tick().await;
        k += 1;
        if k.is_multiple_of(25) {
            let i = nodes + 1_000_000 + extra;
            let ok = if k.is_multiple_of(50) && extra > 0 {
                extra -= 1;
                nodes_api
                    .delete(&node_name(i - 1), &DeleteParams::default())
                    .await
                    .is_ok()
            } else {
                extra += 1;
                nodes_api
                    .create(&PostParams::default(), &node(&node_name(i), i))
                    .await
                    .is_ok()
            };
            out.ops += 1;
            out.failed += usize::from(!ok);
            continue;
        }
        let j = rng.usize(..jobs.max(1));
        let name = format!("churn-{seed}-{k}");
        let api: Api<Pod> = Api::namespaced(t.client.clone(), &namespace(j));
        let body: Pod = serde_json::from_value(pod(&name, j, None)).unwrap();
        let ok = async {
            let sent = unix_micros();
            let created = api.create(&PostParams::default(), &body).await.ok()?;
            if let Some(d) = t
                .published(rv(&created.metadata), sent, Duration::from_secs(10))
                .await
            {
                out.to_snapshot.push(d);
            }
            let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node_for(j, k, nodes)}});
            api.create_subresource::<Value, Value>(
                "binding",
                &name,
                &PostParams::default(),
                &binding,
            )
            .await
            .ok()?;
            let status = json!({"status": {"phase": "Succeeded"}});
            api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
                .await
                .ok()?;
            api.delete(
                &name,
                &DeleteParams {
                    grace_period_seconds: Some(0),
                    ..Default::default()
                },
            )
            .await
            .ok()?;
            Some(())
        }
        .await
        .is_some();
        out.ops += 4;
        out.failed += usize::from(!ok);
    }
    out
}
