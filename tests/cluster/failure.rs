//! Failure modes in a real control plane, one test run in order (each step changes the
//! sandbox's webhook registration or replicas): kube-system left alone, /validate judging a
//! pod the mutating webhook never saw, the shipped failurePolicy with the webhook down,
//! and two replicas behind HAProxy restarted one at a time while pods are created.

use crate::sandbox;

use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use sandbox::{Sandbox, corpus, stderr, wait_until};
use serde_json::{Value, json};

fn gpu_pod(ns: &str, name: &str, gpus: u32, labels: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": {"nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"},
            "containers": [{"name": "c", "image": "busybox",
                "resources": {"limits": {"nvidia.com/gpu": gpus.to_string()}}}]}
    })
}

fn cpu_pod(ns: &str, name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A `trainplace serve` replica with the sandbox's certificate, mark keys and inventory.
struct Replica {
    child: Child,
    port: u16,
    probe: u16,
}

impl Replica {
    fn start(sb: &Sandbox, port: u16, probe: u16) -> Replica {
        let pki = sb.dir.join("pki");
        let child = Command::new(env!("CARGO_BIN_EXE_trainplace"))
            .args(["serve", "--addr", &format!("127.0.0.1:{port}")])
            .args(["--probe-addr", &format!("127.0.0.1:{probe}")])
            .arg("--tls-cert")
            .arg(pki.join("trainplace.crt"))
            .arg("--tls-key")
            .arg(pki.join("trainplace.key"))
            .arg("--mark-keys")
            .arg(pki.join("mark-keys"))
            .env("KUBECONFIG", sb.dir.join("trainplace.kubeconfig"))
            .env("TRAINPLACE_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(Self::log(sb, port)).unwrap())
            .spawn()
            .unwrap();
        let mut r = Replica { child, port, probe };
        r.wait_ready(sb);
        r
    }

    /// Where a replica's stderr goes.
    fn log(sb: &Sandbox, port: u16) -> std::path::PathBuf {
        sb.dir.join(format!("logs/failure-replica-{port}.log"))
    }

    fn ready(&self) -> bool {
        Command::new("curl")
            .args(["-sf", &format!("http://127.0.0.1:{}/readyz", self.probe)])
            .output()
            .is_ok_and(|o| o.status.success())
    }

    /// Until ready; a replica that exits or stays unready fails the test with its log.
    fn wait_ready(&mut self, sb: &Sandbox) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !self.ready() {
            let exited = self.child.try_wait().unwrap();
            if exited.is_some() || Instant::now() > deadline {
                let log = std::fs::read_to_string(Self::log(sb, self.port)).unwrap_or_default();
                panic!(
                    "replica on port {} (probe {}) not ready: {}; its log:\n{log}",
                    self.port,
                    self.probe,
                    exited.map_or("60 s passed".to_string(), |s| format!("exited, {s}")),
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// SIGTERM, as the kubelet stops a pod, and wait until the process has drained.
    fn stop(mut self) -> (u16, u16) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
        (self.port, self.probe)
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Point both webhook configurations at `port` on 127.0.0.1.
fn point_webhooks_at(sb: &Sandbox, port: u16) {
    for (kind, path) in [
        ("mutatingwebhookconfiguration", "/mutate"),
        ("validatingwebhookconfiguration", "/validate"),
    ] {
        sb.point_webhook(kind, port, path);
    }
}

fn haproxy(sb: &Sandbox, lb: u16, replicas: &[(u16, u16)]) -> Child {
    let mut cfg = format!(
        "global\n  maxconn 2000\ndefaults\n  mode tcp\n  timeout connect 1s\n  timeout client 60s\n  timeout server 60s\n  retries 3\n  option redispatch\nfrontend webhook\n  bind 127.0.0.1:{lb}\n  default_backend replicas\nbackend replicas\n  balance roundrobin\n  option httpchk GET /readyz\n"
    );
    for (i, (port, probe)) in replicas.iter().enumerate() {
        cfg.push_str(&format!(
            "  server r{i} 127.0.0.1:{port} check port {probe} inter 100 fall 1 rise 2\n"
        ));
    }
    let path = sb.dir.join("haproxy.cfg");
    std::fs::File::create(&path)
        .unwrap()
        .write_all(cfg.as_bytes())
        .unwrap();
    Command::new("haproxy")
        .arg("-f")
        .arg(&path)
        .arg("-db")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("haproxy (scripts/test-deps.sh installs it)")
}

#[test]
fn failure_modes_in_order() {
    // The webhook registration changes, the sandbox's trainplace stops, replicas come
    // and go: the control plane to this test alone, put back when it ends.
    let turn = sandbox::shared_exclusive();
    let sb = turn.sb();
    let ns = sb.namespace("failure");

    // kube-system is outside every webhook and policy: a 1-GPU pod of a job there is
    // created untouched.
    let sys = gpu_pod(
        "kube-system",
        "system-gpu",
        1,
        json!({"batch.kubernetes.io/job-name": "sys"}),
    );
    let created = corpus::dry_run(sb, &sys).expect("kube-system is never refused");
    let out = sb.kubectl_stdin(
        &["create", "--dry-run=server", "-o", "json", "-f", "-"],
        Some(&sys.to_string()),
    );
    let stored: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        stored["spec"].get("hostIPC").is_none(),
        "untouched: {created}"
    );
    assert!(stored["metadata"].get("annotations").is_none(), "untouched");

    // The mutating webhook removed: /validate judges the pod as it is.
    let mutating = sb.json(&["get", "mutatingwebhookconfiguration", "trainplace"]);
    sb.ok(&["delete", "mutatingwebhookconfiguration", "trainplace"]);
    let partial = gpu_pod(
        &ns,
        "w-0",
        1,
        json!({"batch.kubernetes.io/job-name": "bert"}),
    );
    let e = corpus::dry_run(sb, &partial).unwrap_err();
    assert!(
        e.contains("validate.trainplace.io") && e.contains("[partial-node]"),
        "{e}"
    );
    let whole_single = gpu_pod(&ns, "single", 8, json!({}));
    corpus::dry_run(sb, &whole_single).expect("a whole-node single pod passes /validate alone");
    sb.recreate(mutating);

    // The webhook down, with the shipped failurePolicy (mutate Ignore, validate Fail) and
    // timeouts: a GPU pod is refused (validate fails closed), a CPU pod never reaches the
    // webhook (matchConditions) and is created.
    let pid = std::fs::read_to_string(sb.dir.join("pids/trainplace")).unwrap();
    let _ = Command::new("kill").args(["-TERM", pid.trim()]).status();
    let probe = sb.env["SANDBOX_PROBE_PORT"].clone();
    wait_until(
        Duration::from_secs(30),
        "the sandbox's trainplace stopped",
        || {
            Command::new("curl")
                .args(["-s", &format!("http://127.0.0.1:{probe}/readyz")])
                .status()
                .is_ok_and(|s| !s.success())
        },
    );
    let started = Instant::now();
    let e = corpus::dry_run(sb, &gpu_pod(&ns, "down", 8, json!({}))).unwrap_err();
    assert!(
        e.contains("failed calling webhook") && e.contains("validate.trainplace.io"),
        "{e}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "refused within the webhook timeouts, not hung: {:?}",
        started.elapsed()
    );
    corpus::dry_run(sb, &cpu_pod(&ns, "cpu")).expect("a CPU pod does not depend on trainplace");

    // Two replicas sharing the mark keys behind HAProxy.
    let a = Replica::start(sb, free_port(), free_port());
    let b = Replica::start(sb, free_port(), free_port());
    let lb = free_port();
    let mut proxy = haproxy(sb, lb, &[(a.port, a.probe), (b.port, b.probe)]);
    point_webhooks_at(sb, lb);
    wait_until(
        Duration::from_secs(30),
        "the balancer passing reviews",
        || corpus::dry_run(sb, &gpu_pod(&ns, "lb", 8, json!({}))).is_ok(),
    );

    // A job admitted through replica A only; its pods judged by replica B only: the
    // shared mark keys make B trust A's mark.
    point_webhooks_at(sb, a.port);
    let job = json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "optin", "namespace": ns,
            "annotations": {"trainplace.io/allow-partial-node": "true"}},
        "spec": {"suspend": true, "parallelism": 2, "completions": 2, "completionMode": "Indexed",
            "template": {"spec": {"restartPolicy": "Never",
                "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"},
                "containers": [{"name": "c", "image": "busybox",
                    "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}
    });
    let out = sb.apply(&ns, &job.to_string());
    assert!(out.status.success(), "{}", stderr(&out));
    point_webhooks_at(sb, b.port);
    sb.ok(&[
        "-n",
        &ns,
        "patch",
        "job",
        "optin",
        "--type=merge",
        "-p",
        r#"{"spec":{"suspend":false}}"#,
    ]);
    wait_until(
        Duration::from_secs(60),
        "both pods created through replica B",
        || sb.pods(&ns, "batch.kubernetes.io/job-name=optin").len() == 2,
    );
    point_webhooks_at(sb, lb);

    // Pods created through the balancer while each replica is restarted in turn. Each
    // phase (both up, A restarted, B restarted) lasts until creates have gone through
    // in it, so every restart happens under load however slow the machine.
    let sb_ns = ns.clone();
    let created = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let creator = std::thread::spawn({
        let (created, stop) = (created.clone(), stop.clone());
        move || {
            let mut failed = Vec::new();
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                let pod = gpu_pod(&sb_ns, &format!("roll-{i}"), 8, json!({}));
                match corpus::dry_run(sb, &pod) {
                    Ok(_) => {
                        created.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => failed.push(e),
                }
                i += 1;
            }
            failed
        }
    });
    let more_creates = |what: &str| {
        let target = created.load(Ordering::Relaxed) + 5;
        wait_until(Duration::from_secs(120), what, || {
            created.load(Ordering::Relaxed) >= target
        });
    };
    more_creates("creates through both replicas");
    let (port, probe) = a.stop();
    let a = Replica::start(sb, port, probe);
    more_creates("creates after replica A's restart");
    let (port, probe) = b.stop();
    let b = Replica::start(sb, port, probe);
    more_creates("creates after replica B's restart");
    stop.store(true, Ordering::Relaxed);
    let failed = creator.join().unwrap();
    let ok = created.load(Ordering::Relaxed);
    assert!(
        failed.is_empty(),
        "{} of {} creates failed during the restarts: {:?}",
        failed.len(),
        ok + failed.len(),
        failed.first()
    );
    drop((a, b));
    let _ = proxy.kill();
    let _ = proxy.wait();
}
