//! Churn from a child process: the same binary with CHURN_CHILD=1 runs the churn of
//! `scale::churn` between a `start` and a `stop` line on its stdin and answers each
//! `stop` with what it did, as one JSON line. With PIN=1 the child runs on the
//! control plane's CPUs, so the churn's own client work (encoding, TLS) does not land
//! on the CPU the webhook and the review load share.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

use super::scale::{self, Churned, Target};

/// The parent's handle on the churning child.
pub struct Churner {
    _child: Child,
    input: ChildStdin,
    output: Lines<BufReader<ChildStdout>>,
}

impl Churner {
    pub fn spawn() -> Churner {
        let mut child = tokio::process::Command::new(std::env::current_exe().unwrap())
            .env("CHURN_CHILD", "1")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("the churn child starts");
        let input = child.stdin.take().unwrap();
        let output = BufReader::new(child.stdout.take().unwrap()).lines();
        Churner {
            _child: child,
            input,
            output,
        }
    }

    /// Churn at `rate` operations a second in jobs below `jobs`, nodes above `nodes`.
    pub async fn start(&mut self, rate: u64, (jobs, nodes): (usize, usize), seed: u64) {
        let line = format!("start {rate} {jobs} {nodes} {seed}\n");
        self.input.write_all(line.as_bytes()).await.unwrap();
    }

    /// Stop and read what the churn did.
    pub async fn stop(&mut self) -> Churned {
        self.input.write_all(b"stop\n").await.unwrap();
        let line = self
            .output
            .next_line()
            .await
            .unwrap()
            .expect("a churn report");
        let v: Value = serde_json::from_str(&line).unwrap();
        let n = |k: &str| v[k].as_u64().unwrap_or(0) as usize;
        Churned {
            ops: n("ops"),
            failed: n("failed"),
            to_snapshot: v["toSnapshotMicros"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_u64)
                .map(Duration::from_micros)
                .collect(),
        }
    }
}

/// The child's side: churn between `start` and `stop` until stdin closes.
pub async fn child(t: Arc<Target>) {
    // stdin read on a thread of its own, handed over line by line.
    let (send, mut lines) = tokio::sync::mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lines().map_while(Result::ok) {
            if send.send(line).is_err() {
                return;
            }
        }
    });
    let mut running = None;
    while let Some(line) = lines.recv().await {
        let words: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .filter_map(|w| w.parse().ok())
            .collect();
        match (line.split_whitespace().next(), words.as_slice()) {
            (Some("start"), [rate, jobs, nodes, seed]) => {
                let stop = Arc::new(AtomicBool::new(false));
                let task = tokio::spawn(scale::churn(
                    t.clone(),
                    *rate,
                    (*jobs as usize, *nodes as usize),
                    stop.clone(),
                    *seed,
                ));
                running = Some((stop, task));
            }
            (Some("stop"), _) => {
                let Some((stop, task)) = running.take() else {
                    continue;
                };
                stop.store(true, Ordering::Relaxed);
                let c = task.await.expect("churn task");
                let micros: Vec<u64> = c.to_snapshot.iter().map(|d| d.as_micros() as u64).collect();
                println!(
                    "{}",
                    json!({"ops": c.ops, "failed": c.failed, "toSnapshotMicros": micros})
                );
            }
            _ => eprintln!("churn child: unknown line {line:?}"),
        }
    }
}
