//! Inventory at cluster scale, in process: a synthetic cluster of 5,000 GPU nodes and
//! 100,000 pods of 1,000 training jobs, fed through the live inventory's own index
//! (the watch's decoding and slimming, `Index` with its node, pod and job indexes,
//! `Index::publish`), as a watch would deliver it. Measures what one pod change costs
//! the index, what publishing the changes costs, what a node added, moved to another
//! zone or removed costs to publish, a snapshot built from scratch (the files source's
//! path) for comparison, the process's memory, and the latency of reviews (a ~10 KB
//! training pod judged against the snapshot) without and with churn (one pod changed
//! per ms, a quarter of them to another zone, a node added or removed every 100 ms,
//! published every 10 ms as the server does), in ROUNDS pairs of runs.
//!
//!   cargo run --release --example inventory_scale
//!   NODES=5000 PODS=100000 JOBS=1000 SECS=5 ROUNDS=10 cargo run --release --example inventory_scale
//!
//! Only the Kubernetes API server is missing: `examples/sandbox_scale.rs` measures the
//! same through a real one.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use k8s_openapi::api::core::v1::{Namespace, Node};
use kube::runtime::watcher::Event;
use serde_json::{Value, json};
use trainplace::inventory::index::Index;
use trainplace::inventory::pods::PodPlacement;
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
    let node = node_of((j, p), nodes, (zone, shift));
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

/// The node pod `p` of job `j` is bound to: nodes of zone z are those with i % 3 == z;
/// a job starts in one zone.
fn node_of((j, p): (usize, usize), nodes: usize, (zone, shift): (usize, usize)) -> usize {
    ((j * 97 + p + shift) % (nodes / 3).max(1)) * 3 + (j + zone) % 3
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

/// Node `i` as the watch keeps it, in zone `zone` (`None`: its own, `i % 3`).
fn slim(i: usize, zone: Option<usize>) -> Node {
    let mut n = node(i);
    if let Some(z) = zone {
        let labels = n.metadata.labels.as_mut().expect("labels");
        labels.insert("topology.kubernetes.io/zone".into(), ZONES[z % 3].into());
    }
    slim_node(&mut n);
    n
}

/// Median and max of `f` timed `n` times, in µs.
fn timed(n: usize, mut f: impl FnMut()) -> (f64, f64) {
    let mut t: Vec<Duration> = (0..n)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed()
        })
        .collect();
    t.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    (us(percentile(&t, 0.5)), us(t[t.len() - 1]))
}

/// One round of churn while reviews run: pods changed (one per ms), a node added or
/// removed every 100 ms, published every 10 ms. Returns the reviews' latencies.
fn churn(
    index: &Arc<Mutex<Index>>,
    current: &Arc<ArcSwap<Snapshot>>,
    (text, sizes, seed): (&str, (usize, usize, usize), u64),
    review_for: impl FnOnce() -> Vec<Duration>,
) -> (Vec<Duration>, usize) {
    let stop = Arc::new(AtomicBool::new(false));
    let changer = {
        let (stop, index, text) = (stop.clone(), index.clone(), text.to_string());
        std::thread::spawn(move || {
            let (mut changed, mut rng) = (0usize, fastrand::Rng::with_seed(seed));
            while !stop.load(Ordering::Relaxed) {
                let moved = change(&mut rng, &text, sizes, 40_000 + changed);
                index.lock().expect("index").pod(0, &Event::Apply(moved));
                if changed % 100 == 0 {
                    let i = sizes.2 + rng.usize(..50);
                    let mut index = index.lock().expect("index");
                    match rng.bool() {
                        true => index.node(&Event::Apply(slim(i, None))),
                        false => index.node(&Event::Delete(slim(i, None))),
                    };
                }
                changed += 1;
                std::thread::sleep(Duration::from_millis(1));
            }
            changed
        })
    };
    let publisher = {
        let (stop, index, current) = (stop.clone(), index.clone(), current.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(10));
                let next = index.lock().expect("index").publish();
                current.store(Arc::new(next));
            }
        })
    };
    let busy = review_for();
    stop.store(true, Ordering::Relaxed);
    let changed = changer.join().expect("churn thread");
    publisher.join().expect("publish thread");
    (busy, changed)
}

fn main() {
    let (n_nodes, n_pods, n_jobs) = (
        env("NODES", 5_000),
        env("PODS", 100_000),
        env("JOBS", 1_000),
    );
    let (secs, rounds) = (env("SECS", 5) as u64, env("ROUNDS", 3));
    let (rss0, _) = memory();
    let mut index = Index::new();
    // What the watch delivers goes through the watch's slimming step, then the index.
    let t = Instant::now();
    index.node(&Event::Init);
    for i in 0..n_nodes {
        index.node(&Event::InitApply(slim(i, None)));
    }
    index.node(&Event::InitDone);
    for i in 0..20 {
        let mut ns: Namespace = serde_json::from_value(json!({"metadata": {
            "name": format!("team-{i}"), "labels": {"kubernetes.io/metadata.name": format!("team-{i}"),
            "pod-security.kubernetes.io/enforce": "privileged"}}}))
        .expect("namespace");
        slim_namespace(&mut ns);
        index.namespace(&Event::Apply(ns));
    }
    let template: Value = serde_json::from_str(POD).expect("pod fixture");
    let text = pod_text(&template);
    let per_job = n_pods.div_ceil(n_jobs);
    // The initial list, as the watch delivers it: one relist, applied at its end.
    index.pod(0, &Event::Init);
    for i in 0..n_pods {
        let p = pod(&text, (i / per_job, i % per_job), n_nodes, (0, 0));
        index.pod(0, &Event::InitApply(p));
    }
    let t_list = Instant::now();
    index.pod(0, &Event::InitDone);
    let list_done = t_list.elapsed();
    let mut snap = index.publish();
    let load = t.elapsed();
    let (rss_loaded, _) = memory();
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

    // Per-change cost: decoded changes applied one event at a time, then published.
    let mut rng = fastrand::Rng::with_seed(0x9E37_79B9_7F4A_7C15);
    let sizes = (n_pods, per_job, n_nodes);
    let batch: Vec<PodPlacement> = (0..20_000)
        .map(|k| change(&mut rng, &text, sizes, k))
        .collect();
    let t = Instant::now();
    for moved in batch {
        index.pod(0, &Event::Apply(moved));
    }
    let apply_each = t.elapsed() / 20_000;
    let t = Instant::now();
    snap = index.publish();
    let publish_20k = t.elapsed();
    let mut k = 20_000;
    let mut publish_1k = Vec::new();
    for _ in 0..10 {
        for _ in 0..1_000 {
            k += 1;
            index.pod(0, &Event::Apply(change(&mut rng, &text, sizes, k)));
        }
        publish_1k.push(timed(1, || snap = index.publish()).0);
    }
    publish_1k.sort_by(f64::total_cmp);
    let publish_1k = (publish_1k[5], publish_1k[9]);
    // A node change, applied and published: what a full rebuild used to cost.
    let (mut i, mut z) = (0, 0);
    let node_move = timed(200, || {
        (i, z) = ((i + 37) % n_nodes, z + 1);
        index.node(&Event::Apply(slim(i, Some(z))));
        snap = index.publish();
    });
    let node_add = timed(200, || {
        i += 1;
        index.node(&Event::Apply(slim(n_nodes + i, None)));
        snap = index.publish();
    });
    let node_remove = timed(200, || {
        index.node(&Event::Delete(slim(n_nodes + i, None)));
        i -= 1;
        snap = index.publish();
    });
    let (rss_changed, _) = memory();
    let policy = Policy::embedded();
    let body = review_json(&template, "team-1");
    let current = Arc::new(ArcSwap::from_pointee(snap));
    let index = Arc::new(Mutex::new(index));
    let mut ratios = Vec::new();
    let mut lines = Vec::new();
    for round in 0..rounds {
        let quiet = reviews(&current, &policy, &body, secs);
        let (busy, changed) = churn(&index, &current, (&text, sizes, round as u64), || {
            reviews(&current, &policy, &body, secs)
        });
        let p99 = |l: &[Duration]| percentile(l, 0.99).as_secs_f64() * 1e6;
        ratios.push(p99(&busy) / p99(&quiet));
        lines.push(format!(
            "round {round}: p99 without churn {:.1} µs ({} reviews), with churn {:.1} µs ({} reviews, {changed} pod changes), ratio {:.2}",
            p99(&quiet), quiet.len(), p99(&busy), busy.len(), ratios[round]
        ));
    }
    let (rss_end, hwm) = memory();
    let from_scratch = timed(3, || {
        let nodes: Vec<Node> = (0..n_nodes).map(|i| slim(i, None)).collect();
        let pods: Vec<Value> = (0..n_pods.min(100_000))
            .map(|i| {
                let (j, p) = (i / per_job, i % per_job);
                let n = node_of((j, p), n_nodes, (0, 0));
                json!({"metadata": {"namespace": format!("team-{}", j % 20),
                        "labels": {"jobset.sigs.k8s.io/jobset-name": format!("job-{j}")}},
                       "spec": {"nodeName": format!("ip-10-0-{}-{}.ec2.internal", n / 250, n % 250)}})
            })
            .collect();
        let none: [Value; 0] = [];
        std::hint::black_box(Snapshot::build_from(&nodes, &pods, &none));
    });

    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "cluster: {n_nodes} nodes, {n_pods} pods in {n_jobs} jobs (loaded in {:.1} s; the initial pod list's end {:.1} ms)",
        load.as_secs_f64(),
        ms(list_done)
    );
    println!(
        "pod change applied to the index: {:.2} µs each (mean of 20,000)",
        apply_each.as_secs_f64() * 1e6
    );
    println!(
        "publish: after 1,000 pod changes median {:.0} µs, max {:.0} µs; after 20,000 {:.0} µs",
        publish_1k.0,
        publish_1k.1,
        publish_20k.as_secs_f64() * 1e6
    );
    for (what, (median, max)) in [
        ("moved to another zone", node_move),
        ("added", node_add),
        ("removed", node_remove),
    ] {
        println!(
            "a node {what}, applied and published: median {median:.0} µs, max {max:.0} µs (200)"
        );
    }
    println!(
        "snapshot built from scratch (files path): median {:.1} ms (3)",
        from_scratch.0 / 1e3
    );
    println!(
        "RSS: start {rss0:.1} MiB, loaded {rss_loaded:.1} MiB, after the changes {rss_changed:.1} MiB, end {rss_end:.1} MiB, peak {hwm:.1} MiB"
    );
    for l in &lines {
        println!("{l}");
    }
    let within = ratios.iter().filter(|r| **r <= 1.2).count();
    println!("review p99 with churn / without: {within} of {rounds} rounds at most 1.2x");
}
