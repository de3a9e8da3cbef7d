//! Issue 11 measured 104 MB of RSS left after a burst of 2,000 connections, still there
//! when idle. Here a `trainplace serve` process with its default flags takes 2,000
//! connections at once over real TLS sockets, each posting the ~10 KB training pod to
//! `/mutate`, and its RSS must come back to within `KEPT_MIB` of what it was after its
//! first reviews, within 30 s. With one I/O thread per core (`--io-threads 0`, the
//! default before) each thread keeps some of what it freed: on two cores this test
//! failed with 24 MiB kept, and the `dist` build kept 16.9 MiB against 3.6 MiB with one
//! I/O thread (README "Performance").
#![cfg(target_os = "linux")]

mod common;

use std::time::{Duration, Instant};

use common::{first_answer, free_addrs, post_text, review_for, spawn_serve};
use serde_json::Value;

/// What the server may keep over its warm idle RSS, 30 s after the burst (this debug
/// build came back to within 4-8 MiB in a few seconds; the `dist` build keeps 3.6 MiB).
const KEPT_MIB: u64 = 10;
const CONNECTIONS: usize = 2_000;

fn rss_kib(pid: u32) -> u64 {
    common::rss_kib(pid).expect("VmRSS in /proc/PID/status")
}

/// The burst needs 2,000 sockets here and up to 512 (`--max-connections`) in the
/// server, which inherits this limit: raise the soft open-file limit to the hard one.
fn raise_open_file_limit() {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    limit.current = limit.maximum;
    setrlimit(Resource::Nofile, limit).expect("raise RLIMIT_NOFILE to its hard limit");
}

/// HTTP/1.1 only and no idle pool, so every request in
/// flight at once is a TLS connection of its own.
fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .http1_only()
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_comes_back_after_two_thousand_connections_at_once() {
    raise_open_file_limit();
    let [addr, probe] = free_addrs::<2>();
    let server = spawn_serve(addr, probe, &[]);
    let pid = server.0.id();
    let url = format!("https://{addr}/mutate");
    let pod: Value =
        serde_json::from_str(include_str!("fixtures/bench/training-pod-10k.json")).unwrap();
    let review = review_for(&pod, "burst");
    let client = client();

    // Warm: the first reviews page in the code they run; that is not what a burst keeps.
    assert_eq!(first_answer(&client, &url, &review).await, 200);
    for _ in 1..20 {
        let resp = client.post(&url).json(&review).send().await.unwrap();
        assert_eq!(resp.status(), 200);
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let warm = rss_kib(pid);

    let body = serde_json::to_vec(&review).unwrap();
    let mut burst = tokio::task::JoinSet::new();
    for _ in 0..CONNECTIONS {
        let (client, url, body) = (client.clone(), url.clone(), body.clone());
        burst.spawn(async move {
            match post_text(&client, &url, body).await {
                Ok(resp) => Some(resp.status().as_u16()),
                Err(_) => None,
            }
        });
    }
    let mut answered = [0usize; 3]; // 200, 503 (queue full), other or no answer
    while let Some(task) = burst.join_next().await {
        match task.unwrap() {
            Some(200) => answered[0] += 1,
            Some(503) => answered[1] += 1,
            _ => answered[2] += 1,
        }
    }
    let peak = rss_kib(pid);
    assert_eq!(
        answered[2], 0,
        "requests of the burst without an answer (200, 503, other): {answered:?}"
    );
    assert!(
        answered[0] > 0,
        "no review answered in the burst: {answered:?}"
    );

    let deadline = Instant::now() + Duration::from_secs(30);
    let mut now = peak;
    while now > warm + KEPT_MIB * 1024 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(250)).await;
        now = rss_kib(pid);
    }
    eprintln!(
        "burst of {CONNECTIONS}: {answered:?} (200, 503, other); RSS warm {warm} KiB, \
         after the burst {peak} KiB, then {now} KiB"
    );
    assert!(
        now <= warm + KEPT_MIB * 1024,
        "RSS {now} KiB 30 s after the burst, over {warm} KiB warm + {KEPT_MIB} MiB"
    );
    // And it still answers.
    let resp = client.post(&url).json(&review).send().await.unwrap();
    assert_eq!(resp.status(), 200);
}
