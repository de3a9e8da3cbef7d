//! Pod-creation latency through the sandbox's real API server, with trainplace's webhooks
//! registered and without them (`scripts/sandbox.sh up` first):
//!
//!     eval "$(scripts/sandbox.sh up | tail -1)"
//!     cargo run --release --example sandbox_pod_latency -- [SECONDS_PER_RUN [BASELINE_PORT]]
//!
//! With BASELINE_PORT, a third configuration: the same two webhook configurations pointed
//! at a do-nothing webhook on 127.0.0.1:BASELINE_PORT (examples/baseline.rs with the
//! sandbox's certificate), which tells what any webhook costs the API server from what
//! trainplace adds to it.
//!
//! At 20 and 100 creates/s it sends one 8-GPU training pod per tick (the pod the webhook
//! lays out), each create `dryRun=All`: the API server decodes, defaults, runs every
//! admission plugin and validation exactly as for a real create and skips the etcd write,
//! so thousands of pods do not pile up on the 2-core machine and skew later runs. It then
//! removes the two webhook configurations, measures the same, and puts them back. Prints
//! p50/p99 per rate and configuration and the p99 added by the webhooks.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, PostParams};
use kube::core::DynamicObject;
use kube::discovery::ApiResource;
use serde_json::json;

const NAMESPACE: &str = "latency-bench";

fn pod(i: u64) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("bench-{i}"), "namespace": NAMESPACE,
            "labels": {"batch.kubernetes.io/job-name": "bench"}},
        "spec": {"nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"},
            "containers": [{"name": "trainer", "image": "busybox",
                "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}
    }))
    .expect("a valid pod")
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

async fn run(
    pods: &Api<Pod>,
    rate: u64,
    seconds: u64,
) -> anyhow::Result<(Duration, Duration, usize)> {
    let mut tick = tokio::time::interval(Duration::from_nanos(1_000_000_000 / rate));
    let mut tasks = Vec::new();
    for i in 0..rate * seconds {
        tick.tick().await;
        let pods = pods.clone();
        tasks.push(tokio::spawn(async move {
            let params = PostParams {
                dry_run: true,
                ..Default::default()
            };
            let start = Instant::now();
            let result = pods.create(&params, &pod(i)).await;
            (start.elapsed(), result.is_ok())
        }));
    }
    let mut latencies = Vec::new();
    let mut failed = 0;
    for t in tasks {
        let (d, ok) = t.await?;
        if ok {
            latencies.push(d);
        } else {
            failed += 1;
        }
    }
    latencies.sort();
    anyhow::ensure!(!latencies.is_empty(), "every create failed");
    Ok((
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99),
        failed,
    ))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let seconds: u64 = std::env::args().nth(1).map_or(Ok(20), |s| s.parse())?;
    let client = kube::Client::try_default().await?;
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let _ = namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": NAMESPACE}}))?,
        )
        .await;
    tokio::time::sleep(Duration::from_secs(2)).await; // its default ServiceAccount
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let kinds = [
        (
            "MutatingWebhookConfiguration",
            "mutatingwebhookconfigurations",
        ),
        (
            "ValidatingWebhookConfiguration",
            "validatingwebhookconfigurations",
        ),
    ];
    let apis: Vec<Api<DynamicObject>> = kinds
        .iter()
        .map(|(kind, plural)| {
            let gvk = kube::core::GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", kind);
            Api::all_with(
                client.clone(),
                &ApiResource::from_gvk_with_plural(&gvk, plural),
            )
        })
        .collect();
    let mut saved = Vec::new();
    for api in &apis {
        saved.push(api.get("trainplace").await?);
    }
    let baseline: Option<u16> = std::env::args().nth(2).map(|s| s.parse()).transpose()?;
    let mut configs = vec!["trainplace"];
    if baseline.is_some() {
        configs.push("do-nothing");
    }
    configs.push("none");
    let mut rows = Vec::new();
    for config in configs {
        match (config, baseline) {
            ("do-nothing", Some(port)) => {
                for (api, saved) in apis.iter().zip(&saved) {
                    let mut obj = saved.clone();
                    for w in obj.data["webhooks"].as_array_mut().into_iter().flatten() {
                        let url = w["clientConfig"]["url"]
                            .as_str()
                            .unwrap_or_default()
                            .to_string();
                        let path = url.rsplit_once('/').map_or("", |(_, p)| p).to_string();
                        w["clientConfig"]["url"] =
                            json!(format!("https://127.0.0.1:{port}/{path}"));
                    }
                    api.replace("trainplace", &PostParams::default(), &obj)
                        .await?;
                }
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
            ("none", _) => {
                for api in &apis {
                    api.delete("trainplace", &DeleteParams::default()).await?;
                }
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
            _ => {}
        }
        for rate in [20, 100] {
            run(&pods, rate, 2).await?; // warm the connections
            let (p50, p99, failed) = run(&pods, rate, seconds).await?;
            eprintln!("webhooks {config}: {rate}/s p50 {p50:?} p99 {p99:?} failed {failed}");
            rows.push((config, rate, p50, p99, failed));
        }
    }
    for (api, mut obj) in apis.iter().zip(saved) {
        obj.metadata.resource_version = None;
        obj.metadata.uid = None;
        obj.metadata.managed_fields = None;
        obj.metadata.creation_timestamp = None;
        api.create(&PostParams::default(), &obj).await?;
    }
    println!("| rate | webhooks | p50 | p99 | failed |\n|---|---|---|---|---|");
    for (config, rate, p50, p99, failed) in &rows {
        println!(
            "| {rate}/s | {config} | {:.2} ms | {:.2} ms | {failed} |",
            p50.as_secs_f64() * 1e3,
            p99.as_secs_f64() * 1e3
        );
    }
    for rate in [20, 100] {
        let p99 = |c: &str| {
            rows.iter()
                .find(|r| r.0 == c && r.1 == rate)
                .map(|r| r.3.as_secs_f64() * 1e3)
        };
        if let (Some(on), Some(off)) = (p99("trainplace"), p99("none")) {
            println!(
                "{rate}/s: p99 added by trainplace's webhooks {:.2} ms ({:.2}x)",
                on - off,
                on / off
            );
        }
        if let (Some(on), Some(nothing)) = (p99("trainplace"), p99("do-nothing")) {
            println!(
                "{rate}/s: trainplace against a do-nothing webhook: {:+.2} ms p99",
                on - nothing
            );
        }
    }
    Ok(())
}
