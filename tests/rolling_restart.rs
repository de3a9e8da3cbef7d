//! Rolling restart with zero failed reviews: two `trainplace serve` processes behind a
//! client that round-robins between them (HTTP/1 and HTTP/2 connections, as API
//! servers use both), each SIGTERMed and restarted in turn under load.
//!
//! A connection that is refused or reset before the request was sent (the process is
//! gone or its listener closed) is tried on the other instance, as a Service's
//! endpoint would no longer route there; any request that was sent and not answered
//! with 200 is a failure.
//!
//! Each phase (both up, one terminated, the restarted one back) lasts until the load
//! has had answers in it, not for a fixed time, so a slow machine runs the same test
//! more slowly. CI runs a short version (400 reviews/s, one restart each). The full run:
//!   TRAINPLACE_ROLLING_RPS=1000 TRAINPLACE_ROLLING_ROUNDS=5 \
//!     cargo test --release --test rolling_restart -- --nocapture

mod common;

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::*;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

struct Instance {
    addr: std::net::SocketAddr,
    probe: std::net::SocketAddr,
    child: Option<ServeProcess>,
}

impl Instance {
    fn start(&mut self, cert: &std::path::Path, key: &std::path::Path) {
        let child = Command::new(env!("CARGO_BIN_EXE_trainplace"))
            .args(["serve", "--inventory", "off", "--shutdown-grace", "10s"])
            .arg("--addr")
            .arg(self.addr.to_string())
            .arg("--probe-addr")
            .arg(self.probe.to_string())
            .arg("--tls-cert")
            .arg(cert)
            .arg("--tls-key")
            .arg(key)
            .env("TRAINPLACE_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("trainplace serve starts");
        self.child = Some(ServeProcess(child));
    }

    async fn wait_ready(&self) {
        ready(self.probe).await;
    }

    async fn terminate(&mut self) {
        let mut child = self.child.take().expect("running");
        let status = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        let exit = tokio::task::spawn_blocking(move || child.wait())
            .await
            .unwrap()
            .unwrap();
        assert!(exit.success(), "serve exited with {exit}");
    }
}

#[derive(Default)]
struct Tally {
    /// Reviews answered with 200, by instance.
    ok_by: [AtomicU64; 2],
    failed: AtomicU64,
    rerouted: AtomicU64,
}

impl Tally {
    /// Wait until instance `which` has answered `more` reviews beyond what it has now:
    /// the restart sequence moves on events of the load itself, so every phase (both
    /// up, one down, the restarted one back) runs under load however slow the machine.
    /// 60 s only bounds an instance that stopped answering.
    async fn answered(&self, which: usize, more: u64, phase: &str) {
        let target = self.ok_by[which].load(Ordering::Relaxed) + more;
        let started = Instant::now();
        while self.ok_by[which].load(Ordering::Relaxed) < target {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "instance {which} answered no {more} reviews {phase}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_restart_drops_no_review() {
    let rps = env_or("TRAINPLACE_ROLLING_RPS", 400);
    let rounds = env_or("TRAINPLACE_ROLLING_ROUNDS", 1);
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new("rolling-ca");
    let (cert, key) = pki.write_leaf(dir.path());
    let [a, pa, b, pb] = free_addrs::<4>();
    let mut instances = [
        Instance {
            addr: a,
            probe: pa,
            child: None,
        },
        Instance {
            addr: b,
            probe: pb,
            child: None,
        },
    ];
    for i in &mut instances {
        i.start(&cert, &key);
    }
    for i in &instances {
        i.wait_ready().await;
    }

    let body =
        serde_json::to_vec(&review_for(&fixture_object("full-node-p5-jobset"), "r")).unwrap();
    let urls: Arc<[String; 2]> =
        Arc::new([a, b].map(|x| format!("https://localhost:{}/validate", x.port())));
    let tally = Arc::new(Tally::default());
    let stop = Arc::new(AtomicBool::new(false));
    let next = Arc::new(AtomicUsize::new(0));
    let workers = 16u64;
    let interval = Duration::from_secs_f64(workers as f64 / rps as f64);
    let mut load = Vec::new();
    for w in 0..workers {
        let client = if w % 2 == 0 {
            client(&pki.ca_pem)
        } else {
            let mut cfg = client_config(&pki.ca_pem);
            cfg.alpn_protocols = vec![b"h2".to_vec()];
            reqwest::Client::builder()
                .use_preconfigured_tls(cfg)
                .timeout(Duration::from_secs(10))
                .build()
                .unwrap()
        };
        let (urls, tally, stop, next, body) = (
            urls.clone(),
            tally.clone(),
            stop.clone(),
            next.clone(),
            body.clone(),
        );
        load.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval(interval);
            while !stop.load(Ordering::Relaxed) {
                tick.tick().await;
                let first = next.fetch_add(1, Ordering::Relaxed) % 2;
                for attempt in 0..2 {
                    let url = &urls[(first + attempt) % 2];
                    let sent = client
                        .post(url)
                        .header("content-type", "application/json")
                        .body(body.clone())
                        .send()
                        .await;
                    let r = match sent {
                        Ok(resp) => {
                            let status = resp.status();
                            resp.bytes().await.map(|b| (status, b))
                        }
                        Err(e) => Err(e),
                    };
                    match r {
                        Ok((status, _)) if status == 200 => {
                            tally.ok_by[(first + attempt) % 2].fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) if e.is_connect() && attempt == 0 => {
                            tally.rerouted.fetch_add(1, Ordering::Relaxed);
                            continue;
                        }
                        other => {
                            eprintln!("failed review via {url}: {other:?}");
                            tally.failed.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    break;
                }
            }
        }));
    }

    let started = Instant::now();
    for which in 0..2 {
        tally.answered(which, 50, "before the restarts").await;
    }
    for _ in 0..rounds {
        for (which, instance) in instances.iter_mut().enumerate() {
            instance.terminate().await;
            tally
                .answered(1 - which, 50, "while the other was down")
                .await;
            instance.start(&cert, &key);
            instance.wait_ready().await;
            tally.answered(which, 50, "after its restart").await;
        }
    }
    stop.store(true, Ordering::Relaxed);
    for l in load {
        l.await.unwrap();
    }
    let secs = started.elapsed().as_secs_f64();
    let (ok, failed, rerouted) = (
        tally
            .ok_by
            .iter()
            .map(|n| n.load(Ordering::Relaxed))
            .sum::<u64>(),
        tally.failed.load(Ordering::Relaxed),
        tally.rerouted.load(Ordering::Relaxed),
    );
    eprintln!(
        "rolling restart: {rounds} round(s) over {secs:.1}s at {rps}/s target: {ok} answered ({:.0}/s), {failed} failed, {rerouted} connects rerouted",
        ok as f64 / secs
    );
    assert_eq!(
        failed, 0,
        "{failed} reviews failed during the rolling restart"
    );
}
