//! The real control plane the cluster suites run against (`scripts/sandbox.sh up`): etcd,
//! kube-apiserver, kube-controller-manager, kube-scheduler, kwok nodes and `trainplace
//! serve` as registered webhook. The sandboxes stop when the test binary exits
//! (SANDBOX_OWNER_PID). Without the control-plane binaries the tests fail and say to run
//! scripts/test-deps.sh; they never skip.
//!
//! One control plane per test run: the suites of `tests/cluster/` share [`shared`], each
//! test in namespaces of its own, deleted when its turn ends. A test that changes what
//! every namespace sees (webhook configurations, ValidatingAdmissionPolicies, the
//! sandbox's own trainplace process, nodes, an API server restart) takes
//! [`shared_exclusive`]: no other test runs on the control plane meanwhile, and the
//! sandbox is put back as `up` left it when the turn ends. A suite that cannot live in
//! the shared control plane at all starts its own with [`own`] and says why.
#![allow(dead_code)]

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use serde_json::Value;

pub mod corpus;
pub mod scale;

pub struct Sandbox {
    pub dir: PathBuf,
    pub kubeconfig: PathBuf,
    pub bin: PathBuf,
    pub env: BTreeMap<String, String>,
    /// Whether this is the run's shared control plane (tests on it hold a turn).
    is_shared: bool,
    /// As `up` left them: the webhook configurations (kind, object) and the node names.
    webhooks: Vec<(String, Value)>,
    nodes: BTreeSet<String>,
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

/// The turns on the shared control plane. Readers: tests that stay in their own
/// namespaces. The writer: a test that changes what every namespace sees, or one that
/// measures ([`alone`]).
static TURNS: RwLock<()> = RwLock::new(());

/// The run's control plane, for a test that stays in namespaces of its own
/// ([`Sandbox::namespace`]); they are deleted when the returned turn is dropped. Any
/// number of such tests run at once; none while an exclusive turn is held.
pub fn shared() -> Turn {
    let asked = Instant::now();
    let guard = TURNS.read().unwrap_or_else(PoisonError::into_inner);
    Turn::new(shared_sandbox(), Guard::Read(guard), asked)
}

/// The run's control plane to this test alone, for one that changes what every namespace
/// sees. Waits until the other tests' turns have ended.
/// When the turn is dropped (also when the test fails) the sandbox is put back as `up`
/// left it: its own trainplace process serving the default policy, the two webhook
/// configurations of manifests/base and no others, no ValidatingAdmissionPolicy, only
/// the fleet's nodes.
pub fn shared_exclusive() -> Turn {
    let asked = Instant::now();
    let guard = TURNS.write().unwrap_or_else(PoisonError::into_inner);
    Turn::new(shared_sandbox(), Guard::Write(guard), asked)
}

/// No test on the shared control plane runs while the returned guard is held: for a
/// test that measures what its own control plane costs (CPU, memory, latency) on a
/// machine the other suites would load.
pub fn alone() -> RwLockWriteGuard<'static, ()> {
    TURNS.write().unwrap_or_else(PoisonError::into_inner)
}

fn shared_sandbox() -> &'static Sandbox {
    SHARED.get_or_init(|| {
        let fleet = repo().join("tests/sandbox/fleet.yaml");
        let mut sb = Sandbox::up("shared", &[("SANDBOX_FLEET", fleet.to_str().unwrap())]);
        sb.is_shared = true;
        sb
    })
}

/// A control plane of its own for the suite `name`, started on first use with `extra`
/// environment for `scripts/sandbox.sh up` (e.g. SANDBOX_WEBHOOK=0, SANDBOX_FLEET). Only
/// for a suite that cannot share the run's control plane; the caller says why. Its tests
/// take no turns.
pub fn own(name: &str, extra: &[(&str, &str)]) -> &'static Sandbox {
    static OWN: Mutex<BTreeMap<String, &'static Sandbox>> = Mutex::new(BTreeMap::new());
    let mut own = OWN.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(sb) = own.get(name) {
        return sb;
    }
    let mut extra = extra.to_vec();
    let fleet = repo().join("tests/sandbox/fleet.yaml");
    if !extra.iter().any(|(k, _)| *k == "SANDBOX_FLEET") {
        extra.push(("SANDBOX_FLEET", fleet.to_str().unwrap()));
    }
    let sb: &'static Sandbox = Box::leak(Box::new(Sandbox::up(name, &extra)));
    own.insert(name.to_string(), sb);
    sb
}

/// Stops a control plane of its own ([`own`]) when dropped, also when the test fails:
/// for a suite of one test, so that its processes (a scale fleet's node heartbeats among
/// them) stop taking the machine's two cores from the suites that run after it. The
/// suite's name cannot be used again in the run.
pub struct StopWhenDone(pub &'static Sandbox);

impl Drop for StopWhenDone {
    fn drop(&mut self) {
        let down = down(&self.0.dir);
        if !down.as_ref().is_ok_and(|d| d.status.success()) {
            eprintln!(
                "scripts/sandbox.sh down for {}: {down:?}",
                self.0.dir.display()
            );
        }
    }
}

/// `scripts/sandbox.sh down` for the sandbox in `dir`.
fn down(dir: &Path) -> std::io::Result<std::process::Output> {
    Command::new(repo().join("scripts/sandbox.sh"))
        .arg("down")
        .env("SANDBOX_DIR", dir)
        .output()
}

enum Guard {
    Read(#[allow(dead_code)] RwLockReadGuard<'static, ()>),
    Write(#[allow(dead_code)] RwLockWriteGuard<'static, ()>),
}

thread_local! {
    /// The namespaces made during the turn this thread holds; None: no turn held.
    static TURN_NAMESPACES: RefCell<Option<Vec<String>>> = const { RefCell::new(None) };
}

/// A test's turn on the shared control plane: read its [`Sandbox`] with [`Turn::sb`].
/// Dropping it deletes the namespaces the test made and, for an exclusive turn, puts the
/// sandbox back as `up` left it.
pub struct Turn {
    sb: &'static Sandbox,
    /// When the test asked for the turn, and when it got it (turns.log).
    asked: Instant,
    got: Instant,
    /// Whether [`Turn::serve`] replaced the sandbox's trainplace process.
    served: std::cell::Cell<bool>,
    // Dropped after `Drop::drop` has cleaned up, so the next turn starts clean.
    guard: Guard,
}

impl Turn {
    fn new(sb: &'static Sandbox, guard: Guard, asked: Instant) -> Turn {
        TURN_NAMESPACES.with(|t| {
            let mut t = t.borrow_mut();
            assert!(t.is_none(), "a test holds one turn at a time");
            *t = Some(Vec::new());
        });
        Turn {
            sb,
            asked,
            got: Instant::now(),
            served: std::cell::Cell::new(false),
            guard,
        }
    }

    pub fn sb(&self) -> &'static Sandbox {
        self.sb
    }

    fn exclusive(&self) -> bool {
        matches!(self.guard, Guard::Write(_))
    }

    /// Replace the sandbox's own trainplace process (same ports, certificate and mark
    /// keys, so the webhook configurations stay as they are) by one serving
    /// `policy_dir` (None: the embedded policy) with `env` added: a suite that needs its
    /// own policy or settings. Exclusive turns only; the turn's end puts the original
    /// back.
    pub fn serve(&self, policy_dir: Option<&Path>, env: &[(&str, &str)]) {
        assert!(
            self.exclusive(),
            "only an exclusive turn replaces the sandbox's webhook"
        );
        let mut cmd = Command::new(repo().join("scripts/sandbox.sh"));
        cmd.args(["restart", "trainplace"])
            .env("SANDBOX_DIR", &self.sb.dir);
        if let Some(dir) = policy_dir {
            cmd.arg("--policy-dir").arg(dir);
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        self.served.set(true);
        let out = cmd
            .output()
            .expect("run scripts/sandbox.sh restart trainplace");
        assert!(
            out.status.success(),
            "scripts/sandbox.sh restart trainplace: {}",
            stderr(&out)
        );
        self.sb.wait_webhook_answers(false);
    }

    /// Take trainplace's webhook configurations away (as `SANDBOX_WEBHOOK=0` leaves the
    /// sandbox), until the API server no longer calls the webhook. Exclusive turns only;
    /// the turn's end puts them back.
    pub fn without_webhooks(&self) {
        assert!(
            self.exclusive(),
            "only an exclusive turn takes the webhooks away"
        );
        for (kind, object) in &self.sb.webhooks {
            let name = object["metadata"]["name"].as_str().unwrap();
            self.sb.ok(&["delete", kind, name, "--ignore-not-found"]);
        }
        wait_until(
            Duration::from_secs(30),
            "the webhooks no longer called",
            || {
                let out = self.sb.kubectl_stdin(
                    &["create", "--dry-run=server", "-o", "json", "-f", "-"],
                    Some(&probe_pod(1)),
                );
                out.status.success()
                    && serde_json::from_slice::<Value>(&out.stdout).is_ok_and(|p| !annotated(&p))
            },
        );
    }

    /// Put the sandbox back as `up` left it (see [`shared_exclusive`]).
    fn restore(&self) {
        let sb = self.sb;
        let pid = std::fs::read_to_string(sb.dir.join("pids/trainplace")).unwrap_or_default();
        let alive = Command::new("kill")
            .args(["-0", pid.trim()])
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if self.served.get() || !alive {
            let out = Command::new(repo().join("scripts/sandbox.sh"))
                .args(["restart", "trainplace"])
                .env("SANDBOX_DIR", &sb.dir)
                .output()
                .expect("run scripts/sandbox.sh restart trainplace");
            assert!(out.status.success(), "restore trainplace: {}", stderr(&out));
        }
        // The webhook configurations: `up`'s two as they were, no others.
        for kind in [
            "mutatingwebhookconfiguration",
            "validatingwebhookconfiguration",
        ] {
            let names = self.sb.ok(&["get", kind, "-o", "name"]);
            for name in names.lines().filter(|l| !l.is_empty()) {
                sb.ok(&["delete", name, "--ignore-not-found"]);
            }
        }
        for (_, object) in &sb.webhooks {
            sb.recreate(object.clone());
        }
        sb.ok(&[
            "delete",
            "validatingadmissionpolicies,validatingadmissionpolicybindings",
            "--all",
        ]);
        let nodes = sb.ok(&["get", "nodes", "-o", "name"]);
        for node in nodes.lines().filter_map(|l| l.strip_prefix("node/")) {
            if !sb.nodes.contains(node) {
                sb.ok(&["delete", "node", node, "--wait=false"]);
            }
        }
        sb.wait_webhook_answers(true);
    }
}

impl std::ops::Deref for Turn {
    type Target = Sandbox;
    fn deref(&self) -> &Sandbox {
        self.sb
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        let namespaces = TURN_NAMESPACES.with(|t| t.borrow_mut().take().unwrap_or_default());
        let ended = Instant::now();
        let cleanup = || {
            for ns in &namespaces {
                let _ = self
                    .sb
                    .kubectl(&["delete", "namespace", ns, "--wait=false"]);
            }
            if self.exclusive() {
                self.restore();
            }
        };
        if std::thread::panicking() {
            // The test has failed already; a second panic here would abort the run.
            if std::panic::catch_unwind(std::panic::AssertUnwindSafe(cleanup)).is_err() {
                eprintln!("sandbox: could not put the shared sandbox back after a failed test");
            }
        } else {
            cleanup();
        }
        // What each turn cost, for docs/contributing.md's figures: waiting for it, the
        // test, putting the sandbox back.
        let line = format!(
            "{} {} waited {:.1}s ran {:.1}s cleanup {:.1}s\n",
            if self.exclusive() {
                "exclusive"
            } else {
                "shared"
            },
            std::thread::current().name().unwrap_or("?"),
            (self.got - self.asked).as_secs_f64(),
            (ended - self.got).as_secs_f64(),
            ended.elapsed().as_secs_f64(),
        );
        use std::io::Write;
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.sb.dir.join("turns.log"))
        {
            let _ = f.write_all(line.as_bytes());
        }
    }
}

impl Sandbox {
    fn up(name: &str, extra: &[(&str, &str)]) -> Sandbox {
        let bin = control_plane_bin();
        let dir = repo().join("target/sandbox-tests").join(name);
        std::fs::create_dir_all(&dir).unwrap();
        // A sandbox left by an earlier run of this binary that was killed too hard for its
        // watchdog: stopped first, so this run starts clean.
        let down = down(&dir).expect("run scripts/sandbox.sh down");
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
        // For docs/contributing.md's figures.
        let _ = std::fs::write(
            dir.join("up-seconds"),
            format!("{:.1}\n", started.elapsed().as_secs_f64()),
        );
        let env = std::fs::read_to_string(dir.join("env"))
            .unwrap()
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let mut sb = Sandbox {
            kubeconfig: dir.join("admin.kubeconfig"),
            dir,
            bin,
            env,
            is_shared: false,
            webhooks: Vec::new(),
            nodes: BTreeSet::new(),
        };
        for kind in [
            "mutatingwebhookconfiguration",
            "validatingwebhookconfiguration",
        ] {
            for item in sb.json(&["get", kind])["items"].as_array().unwrap() {
                sb.webhooks.push((kind.to_string(), item.clone()));
            }
        }
        sb.nodes = sb.json(&["get", "nodes"])["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["metadata"]["name"].as_str().unwrap().to_string())
            .collect();
        sb
    }

    /// Until the sandbox's webhook answers through the API server: ready, and one of
    /// its webhooks refusing a one-GPU pod of a p5 job (every policy the suites serve
    /// refuses it). With `as_up`, also as `up` left it: the refusal is the validating
    /// webhook's (no ValidatingAdmissionPolicy answering first) and the mutating webhook
    /// marks a whole-node pod.
    fn wait_webhook_answers(&self, as_up: bool) {
        let probe = self.env["SANDBOX_PROBE_PORT"].clone();
        wait_until(Duration::from_secs(60), "trainplace /readyz", || {
            Command::new("curl")
                .args(["-sf", &format!("http://127.0.0.1:{probe}/readyz")])
                .output()
                .is_ok_and(|o| o.status.success())
        });
        let dry_run = |gpus: u32| {
            self.kubectl_stdin(
                &["create", "--dry-run=server", "-o", "json", "-f", "-"],
                Some(&probe_pod(gpus)),
            )
        };
        wait_until(
            Duration::from_secs(60),
            "the sandbox's webhooks answering through the API server",
            || {
                let refused = dry_run(1);
                let e = stderr(&refused);
                if refused.status.success()
                    || !(e.contains("admission webhook \"") && e.contains("trainplace.io\" denied"))
                {
                    return false;
                }
                if !as_up {
                    return true;
                }
                let whole = dry_run(8);
                e.contains("validate.trainplace.io")
                    && !e.contains("ValidatingAdmissionPolicy")
                    && whole.status.success()
                    && serde_json::from_slice::<Value>(&whole.stdout).is_ok_and(|p| annotated(&p))
            },
        );
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

    /// A fresh namespace for one test. On the shared control plane, the test must hold
    /// a turn ([`shared`], [`shared_exclusive`]); the namespace is deleted when it ends.
    pub fn namespace(&self, prefix: &str) -> String {
        static N: AtomicUsize = AtomicUsize::new(0);
        let ns = format!("{prefix}-{}", N.fetch_add(1, Ordering::SeqCst));
        let held = TURN_NAMESPACES.with(|t| {
            t.borrow_mut()
                .as_mut()
                .map(|namespaces| namespaces.push(ns.clone()))
                .is_some()
        });
        assert!(
            held || !self.is_shared,
            "a test on the shared sandbox holds a turn: sandbox::shared() or sandbox::shared_exclusive()"
        );
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
    /// An Indexed Job `name` of `pods` whole-node (8-GPU) p5 pods in `ns`, created and
    /// waited on for `wait` until every pod is bound; its pods.
    pub fn whole_node_job(&self, ns: &str, name: &str, pods: u32, wait: Duration) -> Vec<Value> {
        let job = serde_json::json!({"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"parallelism": pods, "completions": pods, "completionMode": "Indexed",
                "template": {"spec": {"restartPolicy": "Never",
                    "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"},
                    "containers": [{"name": "c", "image": "busybox",
                        "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}}});
        let out = self.apply(ns, &job.to_string());
        assert!(out.status.success(), "{}", stderr(&out));
        let selector = format!("batch.kubernetes.io/job-name={name}");
        wait_until(wait, &format!("{pods} pods of {name} bound"), || {
            let listed = self.pods(ns, &selector);
            listed.len() == pods as usize
                && listed.iter().all(|p| p["spec"]["nodeName"].is_string())
        });
        self.pods(ns, &selector)
    }

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

/// A pod of a p5 job with `gpus` GPUs in `default`, for probing the webhooks with a
/// server-side dry run.
fn probe_pod(gpus: u32) -> String {
    serde_json::json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("probe-{gpus}"), "namespace": "default",
            "labels": {"batch.kubernetes.io/job-name": "probe"}},
        "spec": {"nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"},
            "containers": [{"name": "c", "image": "busybox",
                "resources": {"limits": {"nvidia.com/gpu": gpus.to_string()}}}]}})
    .to_string()
}

/// Whether the mutating webhook marked `pod`.
fn annotated(pod: &Value) -> bool {
    pod["metadata"]["annotations"]
        .as_object()
        .is_some_and(|a| a.keys().any(|k| k.starts_with("trainplace.io/")))
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
