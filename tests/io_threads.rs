//! `trainplace serve` runs connections, TLS and HTTP on `--io-threads` async workers
//! (one by default, `0` for one per core) named `trainplace-io`; reviews run on their
//! own threads. Counted in /proc/PID/task/*/comm of a running server that has answered
//! a review over its real HTTPS socket.
#![cfg(target_os = "linux")]

mod common;

use std::time::Duration;

use common::{free_addrs, spawn_serve};
use serde_json::json;

/// Start `trainplace serve` with `extra` flags, wait until it answers a review on
/// /validate, and return the names of its threads.
async fn thread_names(extra: &[&str]) -> Vec<String> {
    let [addr, probe] = free_addrs::<2>();
    let server = spawn_serve(addr, probe, extra);
    let client = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let review = common::review_for(
        &json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "team-a"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}}),
        "u-1",
    );
    let url = format!("https://{addr}/validate");
    let status = common::first_answer(&client, &url, &review).await;
    assert!((200..300).contains(&status), "{status}");
    let tasks = format!("/proc/{}/task", server.0.id());
    std::fs::read_dir(&tasks)
        .expect("the server's threads")
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .map(|name| name.trim_end().to_string())
        .collect()
}

fn io_threads(names: &[String]) -> usize {
    names.iter().filter(|n| *n == "trainplace-io").count()
}

#[tokio::test]
async fn one_io_thread_by_default_one_per_core_with_zero_and_as_many_as_asked() {
    let cores = std::thread::available_parallelism().unwrap().get();
    let default = thread_names(&[]).await;
    assert_eq!(io_threads(&default), 1, "{default:?}");
    // The review ran on a review thread, not on an I/O thread.
    assert!(
        default.iter().any(|n| n.starts_with("trainplace-revi")),
        "{default:?}"
    );
    let per_core = thread_names(&["--io-threads", "0"]).await;
    assert_eq!(io_threads(&per_core), cores, "{per_core:?}");
    let three = thread_names(&["--io-threads", "3"]).await;
    assert_eq!(io_threads(&three), 3, "{three:?}");
}
