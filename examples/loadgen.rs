//! Load generator for `trainplace serve`: keep-alive TLS connections posting a
//! realistic AdmissionReview (the ~10 KB training pod), reporting requests/s and
//! latency percentiles.
//!
//! Closed loop (as fast as the server answers):
//!   cargo run --release --example loadgen -- --url https://127.0.0.1:8443/mutate --insecure -c 32 -d 10
//! Open loop at a fixed rate (latency measured from each request's scheduled start,
//! so a stall is not hidden by the generator waiting for it):
//!   cargo run --release --example loadgen -- --url https://127.0.0.1:8443/mutate --insecure -c 16 -d 10 --rate 2000

use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
use serde_json::Value;

/// The ~10 KB JobSet training pod's AdmissionReview, as the engine benchmarks send it.
#[path = "../crates/engine/benches/support/review.rs"]
mod review_body;

#[derive(Parser, Debug)]
struct Args {
    /// Webhook URL (https://host:port/mutate or /validate).
    #[arg(long)]
    url: String,
    /// Concurrent keep-alive connections.
    #[arg(short = 'c', long, default_value_t = 16)]
    connections: usize,
    /// Seconds to run.
    #[arg(short = 'd', long, default_value_t = 10)]
    duration: u64,
    /// Requests per second in total (open loop); without it, closed loop.
    #[arg(long)]
    rate: Option<f64>,
    /// Trust this CA (PEM) instead of --insecure.
    #[arg(long)]
    ca: Option<String>,
    /// Accept any server certificate (the server's in-memory self-signed one).
    #[arg(long)]
    insecure: bool,
    /// Generator threads (keep it below the core count so the server gets the rest).
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// The server's process id: report its CPU time per review and its RSS
    /// (from /proc, Linux).
    #[arg(long)]
    pid: Option<u32>,
    /// Post this AdmissionReview file instead of the built-in 10 KB training pod.
    #[arg(long)]
    body: Option<String>,
    /// Label printed at the start of the result line.
    #[arg(long, default_value = "")]
    label: String,
}

/// utime + stime of `pid` in seconds, and VmRSS in KiB.
fn proc_usage(pid: u32) -> Option<(f64, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the parenthesised command name; utime and stime are the 14th and
    // 15th fields of the line (proc(5)).
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let rss = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    // USER_HZ is 100 on Linux (sysconf(_SC_CLK_TCK)).
    Some((ticks / 100.0, rss))
}

fn body() -> Vec<u8> {
    let pod: Value = serde_json::from_str(review_body::POD).unwrap();
    review_body::encoded_review(&pod)
}

fn client(args: &Args) -> reqwest::Client {
    let mut b = reqwest::Client::builder()
        .http1_only()
        .pool_max_idle_per_host(1)
        .timeout(Duration::from_secs(10));
    if args.insecure {
        b = b.danger_accept_invalid_certs(true);
    }
    if let Some(ca) = &args.ca {
        let pem = std::fs::read(ca).expect("read --ca");
        b = b.add_root_certificate(reqwest::Certificate::from_pem(&pem).expect("PEM CA"));
    }
    b.build().unwrap()
}

fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[i] as f64 / 1000.0
}

fn main() {
    let args = Arc::new(Args::parse());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.threads)
        .enable_all()
        .build()
        .unwrap();
    let before = args.pid.and_then(proc_usage);
    rt.block_on(async move {
        let body = Arc::new(match &args.body {
            Some(path) => std::fs::read(path).expect("read --body"),
            None => body(),
        });
        let start = Instant::now() + Duration::from_millis(200);
        let end = start + Duration::from_secs(args.duration);
        let mut tasks = Vec::new();
        for worker in 0..args.connections {
            let args = args.clone();
            let body = body.clone();
            tasks.push(tokio::spawn(async move {
                let c = client(&args);
                let mut lat = Vec::new();
                let mut service = Vec::new();
                let mut errors = 0u64;
                let mut k = 0u64;
                loop {
                    let scheduled = match args.rate {
                        Some(rate) => {
                            let n = k * args.connections as u64 + worker as u64;
                            start + Duration::from_secs_f64(n as f64 / rate)
                        }
                        None => Instant::now().max(start),
                    };
                    if scheduled >= end {
                        break;
                    }
                    tokio::time::sleep_until(scheduled.into()).await;
                    let sent = Instant::now();
                    let ok = c
                        .post(&args.url)
                        .header("content-type", "application/json")
                        .body(body.as_ref().clone())
                        .send()
                        .await
                        .map(|r| r.status().is_success());
                    match ok {
                        Ok(true) => {
                            lat.push(scheduled.elapsed().as_micros() as u64);
                            service.push(sent.elapsed().as_micros() as u64);
                        }
                        _ => errors += 1,
                    }
                    k += 1;
                }
                (lat, service, errors)
            }));
        }
        let mut all = Vec::new();
        let mut sent = Vec::new();
        let mut errors = 0;
        for t in tasks {
            let (l, s, e) = t.await.unwrap();
            all.extend(l);
            sent.extend(s);
            errors += e;
        }
        all.sort_unstable();
        sent.sort_unstable();
        let secs = args.duration as f64;
        print!("{}", if args.label.is_empty() { String::new() } else { format!("{} ", args.label) });
        println!(
            "mode={} connections={} duration={}s requests={} errors={} rps={:.0} p50={:.3}ms p99={:.3}ms p99.9={:.3}ms max={:.3}ms",
            args.rate.map_or("closed".to_string(), |r| format!("open@{r}/s")),
            args.connections,
            args.duration,
            all.len(),
            errors,
            all.len() as f64 / secs,
            percentile(&all, 50.0),
            percentile(&all, 99.0),
            percentile(&all, 99.9),
            all.last().copied().unwrap_or(0) as f64 / 1000.0,
        );
        if let (Some(pid), Some((cpu0, _))) = (args.pid, before)
            && let Some((cpu1, rss)) = proc_usage(pid)
        {
            println!(
                "  server: cpu={:.2}s cpu/review={:.1}us rss_after={:.1}MiB",
                cpu1 - cpu0,
                (cpu1 - cpu0) * 1e6 / all.len().max(1) as f64,
                rss as f64 / 1024.0
            );
        }
        if args.rate.is_some() {
            // tokio timers fire with ~1 ms granularity, so the schedule-based numbers
            // above include the generator's own wake-up lateness; these start at the send.
            println!(
                "  from send: p50={:.3}ms p99={:.3}ms p99.9={:.3}ms max={:.3}ms",
                percentile(&sent, 50.0),
                percentile(&sent, 99.0),
                percentile(&sent, 99.9),
                sent.last().copied().unwrap_or(0) as f64 / 1000.0,
            );
        }
    });
}
