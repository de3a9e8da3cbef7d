//! Inventory at cluster scale: a synthetic cluster of 5,000 GPU nodes and 100,000 pods
//! of 1,000 training jobs, fed through the live inventory's own caches (the watch's
//! decoding and slimming, the reflector store, the pod index with its job counts,
//! `Caches::snapshot` and `Caches::publish`), as a watch would deliver it.
//! Measures what one pod change costs the index, what publishing a snapshot with the
//! changes costs, a full rebuild (what a node or namespace change costs), the process's
//! memory, and the latency of reviews (a ~10 KB training pod judged against the
//! snapshot) without and with churn (one pod changed per ms, a quarter of them to
//! another zone, and the changes published once a second, as the server does).
//!
//!   cargo run --release --example inventory_scale
//!   NODES=5000 PODS=100000 JOBS=1000 SECS=10 cargo run --release --example inventory_scale
//!
//! Only the Kubernetes API server is missing: the objects are applied to the stores
//! with `Writer::apply_watcher_event`, which is what the reflector does with a watch.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use std::sync::Mutex;

use k8s_openapi::api::core::v1::{Namespace, Node};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::reflector::store::Writer;
use kube::runtime::watcher::Event;
use serde_json::{Value, json};
use trainplace::inventory::live::Caches;
use trainplace::inventory::pods::{PodIndex, PodPlacement};
use trainplace::inventory::slim::{slim_namespace, slim_node};
use trainplace_engine::{Endpoint, Policy, Snapshot, review};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The ~10 KB JobSet training pod and its AdmissionReview, as the engine benchmarks
/// send them.
#[path = "../crates/engine/benches/support/review.rs"]
mod review_body;
use review_body::{POD, review_json};
const ZONES: [&str; 3] = ["us-east-1a", "us-east-1b", "us-east-1c"];

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// VmRSS and VmHWM (peak) of this process, in MiB.
fn memory() -> (f64, f64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib = |key: &str| {
        status
            .lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (kib("VmRSS:") / 1024.0, kib("VmHWM:") / 1024.0)
}

/// A p5.48xlarge node as the API server sends it: labels, capacity, conditions and
/// the image list a GPU node accumulates.
fn node(i: usize) -> Node {
    let images: Vec<Value> = (0..40)
        .map(|k| {
            json!({"names": [format!("public.ecr.aws/example/image-{k}@sha256:{:064x}", k * 7919 + i),
                              format!("public.ecr.aws/example/image-{k}:v{k}")],
                   "sizeBytes": 1_000_000_000u64 + k as u64})
        })
        .collect();
    let v = json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": format!("ip-10-0-{}-{}.ec2.internal", i / 250, i % 250),
            "uid": format!("node-uid-{i}"), "resourceVersion": format!("{}", 1000 + i),
            "labels": {
                "node.kubernetes.io/instance-type": "p5.48xlarge",
                "topology.kubernetes.io/zone": ZONES[i % 3],
                "topology.kubernetes.io/region": "us-east-1",
                "eks.amazonaws.com/nodegroup": format!("p5-{}", ZONES[i % 3]),
                "eks.amazonaws.com/capacityType": "ON_DEMAND",
                "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux",
                "kubernetes.io/hostname": format!("ip-10-0-{}-{}", i / 250, i % 250),
                "nvidia.com/gpu.present": "true", "vpc.amazonaws.com/efa.present": "true"},
            "annotations": {"node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true"}},
        "spec": {"providerID": format!("aws:///{}/i-{i:017x}", ZONES[i % 3]),
            "taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]},
        "status": {
            "allocatable": {"cpu": "191450m", "memory": "2027323820Ki", "nvidia.com/gpu": "8",
                "vpc.amazonaws.com/efa": "32", "pods": "100", "hugepages-2Mi": "5192Mi"},
            "capacity": {"cpu": "192", "memory": "2047741932Ki", "nvidia.com/gpu": "8",
                "vpc.amazonaws.com/efa": "32", "pods": "100"},
            "conditions": [
                {"type": "Ready", "status": "True", "reason": "KubeletReady",
                 "message": "kubelet is posting ready status",
                 "lastHeartbeatTime": "2026-11-22T10:00:00Z", "lastTransitionTime": "2026-11-01T10:00:00Z"},
                {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory",
                 "message": "kubelet has sufficient memory available",
                 "lastHeartbeatTime": "2026-11-22T10:00:00Z", "lastTransitionTime": "2026-11-01T10:00:00Z"}],
            "images": images,
            "nodeInfo": {"architecture": "amd64", "bootID": "b", "containerRuntimeVersion": "containerd://1.7.27",
                "kernelVersion": "6.1.0", "kubeProxyVersion": "v1.33.0", "kubeletVersion": "v1.33.0",
                "machineID": "m", "operatingSystem": "linux", "osImage": "Amazon Linux 2023", "systemUUID": "s"}}
    });
    serde_json::from_value(v).expect("node")
}

/// The ~10 KB JobSet training pod as JSON text, with placeholders for what differs
/// from pod to pod.
fn pod_text(template: &Value) -> String {
    let mut v = template.clone();
    v["metadata"]["name"] = json!("@NAME@");
    v["metadata"]["namespace"] = json!("@NS@");
    v["metadata"]["uid"] = json!("@UID@");
    let labels = &mut v["metadata"]["labels"];
    labels["jobset.sigs.k8s.io/jobset-name"] = json!("@JOB@");
    labels["batch.kubernetes.io/job-name"] = json!("@JOB@-node-0");
    labels["batch.kubernetes.io/job-completion-index"] = json!("@INDEX@");
    v["spec"]["nodeName"] = json!("@NODE@");
    serde_json::to_string(&v).expect("pod text")
}

/// Pod `p` of job `j`, bound to a node in the job's zone moved on by `zone` (`shift`
/// moves it to another node of that zone), decoded from its JSON text as the watch
/// decodes it.
fn pod(
    text: &str,
    (j, p): (usize, usize),
    nodes: usize,
    (zone, shift): (usize, usize),
) -> PodPlacement {
    let job = format!("job-{j}");
    // Nodes of zone z are those with i % 3 == z; a job starts in one zone.
    let zone = (j + zone) % 3;
    let node = ((j * 97 + p + shift) % (nodes / 3).max(1)) * 3 + zone;
    let text = text
        .replace("@NAME@", &format!("{job}-node-0-{p}-abcde"))
        .replace("@NS@", &format!("team-{}", j % 20))
        .replace("@UID@", &format!("pod-{j}-{p}"))
        .replace("@JOB@", &job)
        .replace("@INDEX@", &p.to_string())
        .replace(
            "@NODE@",
            &format!("ip-10-0-{}-{}.ec2.internal", node / 250, node % 250),
        );
    serde_json::from_str(&text).expect("pod")
}

fn percentile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// Judge the training pod against the newest snapshot for `secs`, one review after
/// another; per-review latencies, sorted.
fn reviews(current: &ArcSwap<Snapshot>, policy: &Policy, body: &Value, secs: u64) -> Vec<Duration> {
    let mut lat = Vec::new();
    let end = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < end {
        let snap = current.load_full();
        let start = Instant::now();
        let r = review(body.clone(), Endpoint::Mutate, policy, Some(&snap), None);
        lat.push(start.elapsed());
        assert!(r.body.is_ok(), "review failed");
    }
    lat.sort();
    lat
}

/// Change `k`: a random pod rebound to another node, in a quarter of the changes in
/// another zone than its job started in.
fn change(
    rng: &mut fastrand::Rng,
    template: &str,
    (n_pods, per_job, n_nodes): (usize, usize, usize),
    k: usize,
) -> PodPlacement {
    let i = rng.usize(..n_pods.max(1));
    let zone = if rng.usize(..4) == 0 {
        1 + rng.usize(..2)
    } else {
        0
    };
    pod(template, (i / per_job, i % per_job), n_nodes, (zone, 1 + k))
}

/// A changed pod applied as the watch applies it: one event, the index locked for it.
fn apply_change(caches: &Caches, moved: PodPlacement) {
    caches
        .pods
        .lock()
        .expect("pod index")
        .apply(0, &Event::Apply(moved));
}

fn main() {
    let (n_nodes, n_pods, n_jobs, secs) = (
        env("NODES", 5_000),
        env("PODS", 100_000),
        env("JOBS", 1_000),
        env("SECS", 10) as u64,
    );
    let (rss0, _) = memory();
    let store_of = |g: &str, v: &str, k: &str, plural: &str| {
        Writer::<DynamicObject>::new(ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(g, v, k),
            plural,
        ))
    };
    let mut node_w = Writer::<Node>::default();
    let mut pods = PodIndex::default();
    let mut ns_w = Writer::<Namespace>::default();
    let jobs_w = store_of("kubeflow.org", "v1", "PyTorchJob", "pytorchjobs");
    let classes_w = store_of("karpenter.k8s.aws", "v1", "EC2NodeClass", "ec2nodeclasses");

    // What the watch delivers goes through the watch's slimming step, then the store.
    let t = Instant::now();
    for i in 0..n_nodes {
        let mut n = node(i);
        slim_node(&mut n);
        node_w.apply_watcher_event(&Event::Apply(n));
    }
    for i in 0..20 {
        let mut ns: Namespace = serde_json::from_value(json!({"metadata": {
            "name": format!("team-{i}"), "labels": {"kubernetes.io/metadata.name": format!("team-{i}"),
            "pod-security.kubernetes.io/enforce": "privileged"}}}))
        .expect("namespace");
        slim_namespace(&mut ns);
        ns_w.apply_watcher_event(&Event::Apply(ns));
    }
    let template: Value = serde_json::from_str(POD).expect("pod fixture");
    let text = pod_text(&template);
    let per_job = n_pods.div_ceil(n_jobs);
    // The initial list, as the watch delivers it: one relist, applied at its end.
    pods.apply(0, &Event::Init);
    for i in 0..n_pods {
        let p = pod(&text, (i / per_job, i % per_job), n_nodes, (0, 0));
        pods.apply(0, &Event::InitApply(p));
    }
    let t_list = Instant::now();
    pods.apply(0, &Event::InitDone);
    let list_done = t_list.elapsed();
    let load = t.elapsed();
    let caches = Caches {
        nodes: node_w.as_reader(),
        namespaces: ns_w.as_reader(),
        pods: Arc::new(Mutex::new(pods)),
        jobs: [
            jobs_w.as_reader(),
            store_of("kubeflow.org", "v1", "PaddleJob", "paddlejobs").as_reader(),
        ],
        node_classes: classes_w.as_reader(),
        runtimes: [
            store_of(
                "trainer.kubeflow.org",
                "v1alpha1",
                "TrainingRuntime",
                "trainingruntimes",
            )
            .as_reader(),
            store_of(
                "trainer.kubeflow.org",
                "v1alpha1",
                "ClusterTrainingRuntime",
                "clustertrainingruntimes",
            )
            .as_reader(),
        ],
        dra: Vec::new(),
    };
    let (rss_loaded, _) = memory();

    // A full rebuild from the caches: what a node or namespace change costs (the job
    // counts are read, the pods are not).
    let mut rebuilds = Vec::new();
    let mut snap = caches.snapshot();
    for _ in 0..20 {
        let t = Instant::now();
        snap = caches.snapshot();
        rebuilds.push(t.elapsed());
    }
    rebuilds.sort();
    let jobs_seen = (0..n_jobs)
        .filter(|j| {
            snap.sibling_zones(
                &format!("team-{}", j % 20),
                "jobset.sigs.k8s.io/jobset-name",
                &format!("job-{j}"),
            )
            .is_some_and(|z| z.len() == 1)
        })
        .count();
    assert_eq!(jobs_seen, n_jobs, "every job is seen in exactly one zone");
    let (rss_built, _) = memory();

    // Per-change cost: decoded changes applied to the index one event at a time (the
    // lock taken per event, as the watch does), then published.
    let mut rng = fastrand::Rng::with_seed(0x9E37_79B9_7F4A_7C15);
    let sizes = (n_pods, per_job, n_nodes);
    let batch: Vec<PodPlacement> = (0..20_000)
        .map(|k| change(&mut rng, &text, sizes, k))
        .collect();
    let t = Instant::now();
    for moved in &batch {
        apply_change(&caches, moved.clone());
    }
    let apply_each = t.elapsed() / batch.len() as u32;
    let t = Instant::now();
    snap = caches.publish(&snap);
    let publish_20k = t.elapsed();
    // One second of churn (1,000 changes), published: as the server does once a second.
    let mut publish_1k = Vec::new();
    for round in 0..10 {
        for k in 0..1_000 {
            apply_change(
                &caches,
                change(&mut rng, &text, sizes, 20_000 + round * 1_000 + k),
            );
        }
        let t = Instant::now();
        snap = caches.publish(&snap);
        publish_1k.push(t.elapsed());
    }
    publish_1k.sort();
    let changes = batch.len();
    drop(batch);
    let (rss_changed, _) = memory();

    let policy = Policy::embedded();
    let body = review_json(&template, "team-1");
    let current = Arc::new(ArcSwap::from_pointee(snap));
    let quiet = reviews(&current, &policy, &body, secs);

    // Churn: one pod changed per ms (decoded from its JSON text and applied to the
    // index, as the watch does), the changes published once a second, while the same
    // reviews run. First the decoding alone (what watching 1,000 pod changes a second
    // costs whatever the inventory does with them), then with the index and publishes.
    let caches = Arc::new(caches);
    let churn = |apply: bool, seed: u64| {
        let stop = Arc::new(AtomicBool::new(false));
        let churn = {
            let (stop, caches, text) = (stop.clone(), caches.clone(), text.clone());
            std::thread::spawn(move || {
                let (mut changed, mut rng) = (0usize, fastrand::Rng::with_seed(seed));
                while !stop.load(Ordering::Relaxed) {
                    let moved = change(&mut rng, &text, sizes, 40_000 + changed);
                    if apply {
                        apply_change(&caches, moved);
                    }
                    changed += 1;
                    std::thread::sleep(Duration::from_millis(1));
                }
                changed
            })
        };
        let publisher = {
            let (stop, caches, current) = (stop.clone(), caches.clone(), current.clone());
            std::thread::spawn(move || {
                let mut times = Vec::new();
                while apply && !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_secs(1));
                    let t = Instant::now();
                    let next = caches.publish(&current.load());
                    current.store(Arc::new(next));
                    times.push(t.elapsed());
                }
                times
            })
        };
        let busy = reviews(&current, &policy, &body, secs);
        stop.store(true, Ordering::Relaxed);
        let changed = churn.join().expect("churn thread");
        let mut publishes = publisher.join().expect("publish thread");
        publishes.sort();
        (busy, changed, publishes)
    };
    let (decoding, decoded, _) = churn(false, 7);
    let (busy, changed, churn_publishes) = churn(true, 11);
    let (rss_end, hwm) = memory();
    // For comparison: a snapshot built from every pod (the files source's path, and
    // what the server did on every pod change before the job index).
    let mut from_pods = Vec::new();
    for _ in 0..5 {
        let index = caches.pods.lock().expect("pod index");
        let nodes = caches.nodes.state();
        let namespaces = caches.namespaces.state();
        let t = Instant::now();
        let s = Snapshot::build_from(
            nodes.iter().map(Arc::as_ref),
            index.placements(),
            namespaces.iter().map(Arc::as_ref),
        );
        from_pods.push(t.elapsed());
        drop(s);
    }
    from_pods.sort();

    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    println!(
        "cluster: {n_nodes} nodes, {n_pods} pods in {n_jobs} jobs (loaded into the caches in {:.1} s; the initial list's end, counting every pod into the job index, {:.1} ms)",
        load.as_secs_f64(),
        ms(list_done)
    );
    println!(
        "pod change applied to the index: {:.2} µs each (mean of {} decoded changes, a quarter to another zone)",
        us(apply_each),
        changes
    );
    println!(
        "publish: after 1,000 changes median {:.0} µs, max {:.0} µs (10 rounds); after 20,000 changes {:.0} µs; under churn median {:.0} µs, max {:.0} µs ({} publishes)",
        us(percentile(&publish_1k, 0.5)),
        us(publish_1k[publish_1k.len() - 1]),
        us(publish_20k),
        us(percentile(&churn_publishes, 0.5)),
        us(churn_publishes.last().copied().unwrap_or_default()),
        churn_publishes.len()
    );
    println!(
        "full rebuild from the caches (a node or namespace change): min {:.1} ms, median {:.1} ms, max {:.1} ms (20 rebuilds)",
        ms(rebuilds[0]),
        ms(percentile(&rebuilds, 0.5)),
        ms(rebuilds[rebuilds.len() - 1])
    );
    println!(
        "snapshot from every pod (files path; the server's old rebuild; after the RSS above): median {:.1} ms (5 builds)",
        ms(percentile(&from_pods, 0.5))
    );
    println!(
        "RSS: start {rss0:.1} MiB, caches loaded {rss_loaded:.1} MiB, snapshot built {rss_built:.1} MiB, after 30,000 changes {rss_changed:.1} MiB, end {rss_end:.1} MiB, peak {hwm:.1} MiB"
    );
    let line = |name: &str, l: &[Duration]| {
        println!(
            "reviews {name}: {} in {secs} s, p50 {:.1} µs, p99 {:.1} µs, max {:.1} µs",
            l.len(),
            us(percentile(l, 0.5)),
            us(percentile(l, 0.99)),
            us(l[l.len() - 1])
        )
    };
    line("without churn", &quiet);
    line(
        &format!("with churn decoded only ({decoded} pod changes)"),
        &decoding,
    );
    line(&format!("with churn ({changed} pod changes)"), &busy);
    let p99 = |l: &[Duration]| us(percentile(l, 0.99));
    println!(
        "p99 with churn / without: {:.2} (with the decoding alone: {:.2})",
        p99(&busy) / p99(&quiet),
        p99(&decoding) / p99(&quiet)
    );
}
