//! trainplace's cost as a cluster grows and churns, through the sandbox's real API
//! server (etcd, kube-apiserver, controllers, scheduler, kwok), with trainplace
//! registered as its webhook and its inventory fed by real watches:
//!
//!     scripts/sandbox.sh up
//!     NODES=5000 PODS=100000 JOBS=1000 STEPS=10,50,100 ROUNDS=10 \
//!       cargo run --release --example sandbox_scale
//!     scripts/sandbox.sh down
//!
//! GROW=0 skips the creates (the cluster already has the size of the one step given).
//! PIN=1 runs trainplace and this load generator on the last CPU and every other
//! process on the others (`sandbox_scale/pin.rs`), so the control plane's share of the
//! churn does not land on the webhook's latency.
//!
//! The cluster grows to each STEPS percentage of NODES kwok GPU nodes (3 zones) and
//! PODS pods in JOBS jobs, created through the API server. At each size it reports the
//! RSS of trainplace, kube-apiserver and etcd, the creation rate, how long the webhook's
//! snapshot took to hold the last pod, then ROUNDS rounds: reviews sent straight to the
//! webhook at RATE/s for SECS seconds without churn and SECS seconds with churn (CHURN
//! pod lifecycles a second: created, bound, finished, deleted; a node added or removed
//! every 25 operations), in SLICES alternating slices of each so the machine's other
//! load falls on both alike, and the time from each churn pod's create to the snapshot
//! holding it. Finally (RESTART=1) it restarts kube-apiserver and reports how the
//! watches came back: relists, and the time until a new pod reached the snapshot.
//! The API server's pod-create latency with and without the webhook is
//! `examples/sandbox_pod_latency.rs`, run against the same grown cluster.

use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "../tests/sandbox/scale.rs"]
mod scale;

#[path = "sandbox_scale/pin.rs"]
mod pin;

#[path = "sandbox_scale/churner.rs"]
mod churner;

use scale::{Target, percentile};

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

async fn measure_round(
    t: &Arc<Target>,
    churner: &mut churner::Churner,
    (rate, secs, churn_rate): (u64, u64, u64),
    (jobs, nodes): (usize, usize),
    seed: u64,
) -> String {
    // Quiet and churning slices alternate, so what else loads the machine (the API
    // server, kwok, other work) falls on both alike; each side pools its slices.
    let slices = env("SLICES", 5) as u64;
    let slice_secs = (secs / slices).max(1);
    let (mut quiet, mut busy) = (Vec::new(), Vec::new());
    let webhook = webhook_pid(t);
    let (mut cpu_quiet, mut cpu_busy) = (Duration::ZERO, Duration::ZERO);
    let mut churned = scale::Churned::default();
    let before = t.progress().await;
    for slice in 0..slices {
        let cpu = pin::cpu_time(webhook);
        quiet.extend(scale::reviews(t, rate, slice_secs, jobs).await);
        cpu_quiet += pin::cpu_time(webhook).saturating_sub(cpu);
        let cpu = pin::cpu_time(webhook);
        churner
            .start(churn_rate, (jobs, nodes), seed * 100 + slice)
            .await;
        busy.extend(scale::reviews(t, rate, slice_secs, jobs).await);
        cpu_busy += pin::cpu_time(webhook).saturating_sub(cpu);
        let c = churner.stop().await;
        churned.ops += c.ops;
        churned.failed += c.failed;
        churned.to_snapshot.extend(c.to_snapshot);
    }
    let after = t.progress().await;
    quiet.sort();
    busy.sort();
    churned.to_snapshot.sort();
    let d = |k: &str| {
        after[k]
            .as_u64()
            .unwrap_or(0)
            .saturating_sub(before[k].as_u64().unwrap_or(0))
    };
    let (p99q, p99b) = (percentile(&quiet, 0.99), percentile(&busy, 0.99));
    format!(
        "reviews p99 {:.2} ms quiet ({} ok of {}), {:.2} ms churn ({} ok), ratio {:.2}; webhook CPU {:.0} ms quiet, {:.0} ms churn; churn {} ops ({} failed); create->snapshot p50 {:.1} ms p99 {:.1} ms (n={}); {} publishes, {:.0} µs each, {} events",
        ms(p99q),
        quiet.len(),
        rate * slice_secs * slices,
        ms(p99b),
        busy.len(),
        p99b.as_secs_f64() / p99q.as_secs_f64().max(1e-9),
        ms(cpu_quiet),
        ms(cpu_busy),
        churned.ops,
        churned.failed,
        ms(percentile(&churned.to_snapshot, 0.5)),
        ms(percentile(&churned.to_snapshot, 0.99)),
        churned.to_snapshot.len(),
        d("publishes"),
        d("publishMicros") as f64 / d("publishes").max(1) as f64,
        d("events"),
    )
}

/// trainplace's pid, from the sandbox's pid files.
fn webhook_pid(t: &Target) -> u32 {
    std::fs::read_to_string(t.dir.join("pids").join("trainplace"))
        .ok()
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or(0)
}

/// Restart kube-apiserver: how long until it answers, how the watches came back
/// (relists), and until a new pod reached the snapshot.
async fn restart(t: &Arc<Target>, jobs: usize, nodes: usize) {
    let before = t.progress().await;
    let started = Instant::now();
    let out = std::process::Command::new("scripts/sandbox.sh")
        .args(["restart", "kube-apiserver"])
        .env("SANDBOX_DIR", &t.dir)
        .output()
        .expect("scripts/sandbox.sh restart");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(t.client.clone(), &scale::namespace(0));
    let mut answered = None;
    let mut k = 0;
    loop {
        k += 1;
        let sent = scale::unix_micros();
        let body = serde_json::from_value(scale::pod(
            &format!("after-restart-{k}"),
            0,
            Some(scale::node_for(0, k, nodes)),
        ))
        .unwrap();
        if let Ok(p) = pods.create(&Default::default(), &body).await {
            answered.get_or_insert(started.elapsed());
            let rv = p
                .metadata
                .resource_version
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            if let Some(d) = t.published(rv, sent, Duration::from_secs(120)).await {
                let after = t.progress().await;
                println!(
                    "restart: kube-apiserver answered a create {:.1} s after the restart began; that pod reached the snapshot {:.0} ms after its create ({:.1} s after the restart); relists {} -> {}; {} jobs",
                    answered.unwrap_or_default().as_secs_f64(),
                    ms(d),
                    started.elapsed().as_secs_f64(),
                    before["relists"],
                    after["relists"],
                    jobs
                );
                return;
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "no pod reached the snapshot within 300 s of the restart"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::main]
async fn main() {
    let dir = std::path::PathBuf::from(
        std::env::var("SANDBOX_DIR").unwrap_or_else(|_| "target/sandbox".into()),
    );
    let sandbox_env = std::fs::read_to_string(dir.join("env"))
        .expect("scripts/sandbox.sh up first (no SANDBOX_DIR/env)")
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let t = Arc::new(Target::new(dir, &sandbox_env).await);
    if env("CHURN_CHILD", 0) == 1 {
        return churner::child(t).await;
    }
    let mut churner = churner::Churner::spawn();
    if env("PIN", 0) == 1 {
        pin::start(webhook_pid(&t));
    }
    let (nodes, pods, jobs) = (
        env("NODES", 5_000),
        env("PODS", 100_000),
        env("JOBS", 1_000),
    );
    let per_job = pods.div_ceil(jobs.max(1));
    let (rate, secs, churn) = (
        env("RATE", 200) as u64,
        env("SECS", 10) as u64,
        env("CHURN", 5) as u64,
    );
    let steps: Vec<usize> = std::env::var("STEPS")
        .unwrap_or_else(|_| "10,50,100".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    scale::namespaces(&t).await;
    let (mut have_nodes, mut have_jobs) = (0, 0);
    for (n, step) in steps.iter().enumerate() {
        let (want_nodes, want_jobs) = (nodes * step / 100, jobs * step / 100);
        // GROW=0: the cluster already has this size (the rounds run again).
        let grow = env("GROW", 1) == 1;
        let started = Instant::now();
        let failed_nodes = match grow {
            true => scale::add_nodes(&t, have_nodes, want_nodes).await,
            false => 0,
        };
        let nodes_took = started.elapsed();
        let started = Instant::now();
        let (failed_pods, newest) = match grow {
            true => scale::add_jobs(&t, (have_jobs, want_jobs), per_job, want_nodes).await,
            false => (0, 0),
        };
        let pods_took = started.elapsed();
        let created = (want_jobs - have_jobs) * per_job;
        let caught_up = t
            .published(newest, scale::unix_micros(), Duration::from_secs(600))
            .await;
        (have_nodes, have_jobs) = (want_nodes, want_jobs);
        println!(
            "{step}%: {want_nodes} nodes ({} created in {:.0} s, {failed_nodes} failed), {} pods in {want_jobs} jobs ({created} created in {:.0} s = {:.0}/s, {failed_pods} failed); snapshot held the last pod {} after the creates ended",
            want_nodes
                - (nodes * steps.get(n.wrapping_sub(1)).copied().unwrap_or(0) / 100)
                    .min(want_nodes),
            nodes_took.as_secs_f64(),
            want_jobs * per_job,
            pods_took.as_secs_f64(),
            created as f64 / pods_took.as_secs_f64().max(1e-3),
            caught_up.map_or("never (600 s)".to_string(), |d| format!("{:.0} ms", ms(d))),
        );
        let rss = |c: &str| t.rss(c);
        println!(
            "  RSS: trainplace {:.1} MiB, kube-apiserver {:.0} MiB, etcd {:.0} MiB, kwok {:.0} MiB",
            rss("trainplace"),
            rss("kube-apiserver"),
            rss("etcd"),
            rss("kwok")
        );
        let rounds = if n + 1 == steps.len() {
            env("ROUNDS", 10)
        } else {
            env("STEP_ROUNDS", 2)
        };
        for round in 0..rounds {
            let line = measure_round(
                &t,
                &mut churner,
                (rate, secs, churn),
                (want_jobs, want_nodes),
                (n * 100 + round) as u64,
            )
            .await;
            println!("  round {round}: {line}");
        }
        println!(
            "  RSS after the rounds: trainplace {:.1} MiB",
            rss("trainplace")
        );
    }
    if env("RESTART", 1) == 1 {
        restart(&t, have_jobs, have_nodes).await;
        println!("  RSS: trainplace {:.1} MiB", t.rss("trainplace"));
    }
    if env("PIN", 0) == 1 {
        pin::release();
    }
}
