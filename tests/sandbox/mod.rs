//! One real control plane per test binary (`scripts/sandbox.sh up`): etcd, kube-apiserver,
//! kube-controller-manager, kube-scheduler, kwok nodes and `trainplace serve` as registered
//! webhook. Each test takes a namespace of its own. The sandbox stops when the test binary
//! exits (SANDBOX_OWNER_PID). Without the control-plane binaries the tests fail and say to
//! run scripts/test-deps.sh; they never skip.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

pub mod corpus;
pub mod scale;

pub struct Sandbox {
    pub dir: PathBuf,
    pub kubeconfig: PathBuf,
    pub bin: PathBuf,
    pub env: BTreeMap<String, String>,
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The control-plane binaries, or a failure that says how to get them.
fn control_plane_bin() -> PathBuf {
    let out = Command::new(repo().join("scripts/control-plane.sh"))
        .arg("path")
        .output()
        .expect("run scripts/control-plane.sh path");
    let bin = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
    for b in [
        "etcd",
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
        "kubectl",
        "kwok",
    ] {
        assert!(
            bin.join(b).is_file(),
            "the control plane is not built ({} missing): run scripts/test-deps.sh, which builds it from source once",
            bin.join(b).display()
        );
    }
    bin
}

static SHARED: OnceLock<Sandbox> = OnceLock::new();

/// The binary's sandbox, started on first use with `extra` environment (e.g.
/// SANDBOX_WEBHOOK=0).
pub fn shared_with(name: &str, extra: &[(&str, &str)]) -> &'static Sandbox {
    SHARED.get_or_init(|| Sandbox::up(name, extra))
}

pub fn shared(name: &str) -> &'static Sandbox {
    shared_with(name, &[])
}

impl Sandbox {
    fn up(name: &str, extra: &[(&str, &str)]) -> Sandbox {
        let bin = control_plane_bin();
        let dir = repo().join("target/sandbox-tests").join(name);
        std::fs::create_dir_all(&dir).unwrap();
        // A sandbox left by an earlier run of this binary that was killed too hard for its
        // watchdog: stopped first, so this run starts clean.
        let down = Command::new(repo().join("scripts/sandbox.sh"))
            .arg("down")
            .env("SANDBOX_DIR", &dir)
            .output()
            .expect("run scripts/sandbox.sh down");
        assert!(
            down.status.success(),
            "{}",
            String::from_utf8_lossy(&down.stderr)
        );
        let started = Instant::now();
        let mut cmd = Command::new(repo().join("scripts/sandbox.sh"));
        cmd.arg("up")
            .env("SANDBOX_DIR", &dir)
            .env("SANDBOX_OWNER_PID", std::process::id().to_string())
            .env("SANDBOX_FLEET", repo().join("tests/sandbox/fleet.yaml"))
            .env("TRAINPLACE_BIN", env!("CARGO_BIN_EXE_trainplace"));
        for (k, v) in extra {
            cmd.env(k, v);
        }
        let out = cmd.output().expect("run scripts/sandbox.sh up");
        assert!(
            out.status.success(),
            "scripts/sandbox.sh up failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8(out.stdout).unwrap();
        assert!(
            stdout
                .lines()
                .last()
                .is_some_and(|l| l.starts_with("export KUBECONFIG=")),
            "up's last line is the export: {stdout}"
        );
        eprintln!("sandbox {name} up in {:?}", started.elapsed());
        let env = std::fs::read_to_string(dir.join("env"))
            .unwrap()
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Sandbox {
            kubeconfig: dir.join("admin.kubeconfig"),
            dir,
            bin,
            env,
        }
    }

    /// The real kubectl (the one built with the control plane), as the sandbox admin.
    pub fn kubectl(&self, args: &[&str]) -> Output {
        self.kubectl_stdin(args, None)
    }

    pub fn kubectl_stdin(&self, args: &[&str], stdin: Option<&str>) -> Output {
        use std::io::Write;
        let mut child = Command::new(self.bin.join("kubectl"))
            .args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut input = child.stdin.take().unwrap();
        input.write_all(stdin.unwrap_or("").as_bytes()).unwrap();
        drop(input);
        child.wait_with_output().unwrap()
    }

    /// kubectl that must succeed; its stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// `kubectl apply -f -` of `manifest` (YAML or JSON) in namespace `ns`.
    pub fn apply(&self, ns: &str, manifest: &str) -> Output {
        self.kubectl_stdin(&["apply", "-n", ns, "-f", "-"], Some(manifest))
    }

    /// Create again an object read earlier with `json` (after deleting it): the fields
    /// the API server sets on its copy are dropped first.
    pub fn recreate(&self, mut object: Value) {
        if let Some(meta) = object["metadata"].as_object_mut() {
            for k in [
                "resourceVersion",
                "uid",
                "creationTimestamp",
                "generation",
                "managedFields",
            ] {
                meta.remove(k);
            }
        }
        let out = self.kubectl_stdin(&["create", "-f", "-"], Some(&object.to_string()));
        assert!(out.status.success(), "recreate: {}", stderr(&out));
    }

    /// Point the `trainplace` webhook configuration of `kind` at `path` on
    /// 127.0.0.1:`port`.
    pub fn point_webhook(&self, kind: &str, port: u16, path: &str) {
        let patch = serde_json::json!([{"op": "replace", "path": "/webhooks/0/clientConfig/url",
            "value": format!("https://127.0.0.1:{port}{path}")}]);
        self.ok(&[
            "patch",
            kind,
            "trainplace",
            "--type=json",
            "-p",
            &patch.to_string(),
        ]);
    }

    pub fn json(&self, args: &[&str]) -> Value {
        let mut a = args.to_vec();
        a.extend(["-o", "json"]);
        serde_json::from_str(&self.ok(&a)).unwrap()
    }

    /// A fresh namespace for one test.
    pub fn namespace(&self, prefix: &str) -> String {
        static N: AtomicUsize = AtomicUsize::new(0);
        let ns = format!("{prefix}-{}", N.fetch_add(1, Ordering::SeqCst));
        self.ok(&["create", "namespace", &ns]);
        // Pods need the namespace's default ServiceAccount (the ServiceAccount admission
        // plugin); the service account controller makes it.
        wait_until(
            Duration::from_secs(30),
            "the default ServiceAccount",
            || {
                self.kubectl(&["-n", &ns, "get", "serviceaccount", "default"])
                    .status
                    .success()
            },
        );
        ns
    }

    /// The pods in `ns` with label selector `selector`.
    pub fn pods(&self, ns: &str, selector: &str) -> Vec<Value> {
        self.json(&["-n", ns, "get", "pods", "-l", selector])["items"]
            .as_array()
            .unwrap()
            .clone()
    }

    /// A node's labels.
    pub fn node_labels(&self, node: &str) -> Value {
        self.json(&["get", "node", node])["metadata"]["labels"].clone()
    }
}

/// Polls `check` every 100 ms until it holds, or fails naming `what`.
pub fn wait_until(timeout: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !check() {
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}
