//! Self-managed certificates in a real control plane: two `trainplace serve` replicas with
//! the chart's self-managed settings and RBAC (and nothing more) share one Secret,
//! keep both webhook configurations' caBundle current and rotate a 15-second CA while pods
//! are created through the API server, the mutating webhook on one replica and the
//! validating webhook on the other. Not one create fails, the caBundle moves to a new CA
//! and both replicas end up serving a certificate from it.

use crate::common;
use crate::sandbox;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use base64::Engine;
use sandbox::{Sandbox, stderr, wait_until};
use serde_json::{Value, json};

const SA: &str = "system:serviceaccount:trainplace:trainplace";

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `helm template trainplace charts/trainplace -n trainplace` of one template, with
/// `args`: the release whose ServiceAccount the sandbox's trainplace client certificate is.
fn chart(template: &str, args: &[&str]) -> String {
    let helm = Command::new(common::root().join("scripts/helm.sh"))
        .arg("path")
        .output()
        .expect("run scripts/helm.sh path");
    let helm = PathBuf::from(String::from_utf8(helm.stdout).unwrap().trim());
    assert!(
        helm.is_file(),
        "helm is not built ({}): run scripts/test-deps.sh",
        helm.display()
    );
    let home = common::root().join("target/sandbox-tests/certs-helm");
    let out = Command::new(helm)
        .args(["template", "trainplace"])
        .arg(common::root().join("charts/trainplace"))
        .args(["-n", "trainplace", "--show-only", template])
        .args(args)
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_DATA_HOME", home.join("data"))
        .env("KUBECONFIG", home.join("no-such-kubeconfig"))
        .output()
        .unwrap();
    assert!(out.status.success(), "helm template: {}", stderr(&out));
    String::from_utf8(out.stdout).unwrap()
}

/// The chart's Deployment's environment for `trainplace serve` with 15-second CAs and
/// 6-second serving certificates; the paths inside the pod left out.
fn chart_env() -> Vec<(String, String)> {
    let yaml = chart(
        "templates/deployment.yaml",
        &[
            "--set",
            "certificates.selfManaged.caLifetime=15s",
            "--set",
            "certificates.selfManaged.certLifetime=6s",
            // The sandbox registered the configurations (as kustomize does): the
            // replicas keep their caBundle (tests/helm_chart.rs has the server
            // registering them itself).
            "--set",
            "webhooks.registeredBy=chart",
        ],
    );
    let deploy: Value = serde_yaml_ng::from_str(&yaml).unwrap();
    let env: Vec<(String, String)> = deploy["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let v = e["value"].as_str().unwrap_or_default();
            (e["name"].as_str().unwrap().to_string(), v.to_string())
        })
        .filter(|(k, _)| !["TRAINPLACE_POLICY_DIR", "TRAINPLACE_MARK_KEYS"].contains(&k.as_str()))
        .collect();
    assert!(
        env.iter()
            .any(|(k, v)| k == "TRAINPLACE_SELF_MANAGED_CERTS" && v == "true"),
        "{env:?}"
    );
    env
}

fn can_i(sb: &Sandbox, verb: &str, what: &str, ns: Option<&str>) -> bool {
    let mut args = vec!["auth", "can-i", verb, what, "--as", SA];
    if let Some(ns) = ns {
        args.extend(["-n", ns]);
    }
    sb.kubectl(&args).stdout.starts_with(b"yes")
}

struct Replica {
    child: Child,
    port: u16,
    probe: u16,
}

impl Replica {
    fn start(sb: &Sandbox, name: &str, extra: &[&str]) -> Replica {
        let (port, probe) = (free_port(), free_port());
        let log = std::fs::File::create(sb.dir.join(format!("{name}.log"))).unwrap();
        // The chart's settings; flags for what differs outside a pod (the API server
        // calls the replicas by URL on 127.0.0.1).
        let child = Command::new(env!("CARGO_BIN_EXE_trainplace"))
            .envs(chart_env())
            .args(["serve", "--addr", &format!("127.0.0.1:{port}")])
            .args(["--probe-addr", &format!("127.0.0.1:{probe}")])
            .args(["--cert-extra-names", "127.0.0.1"])
            .arg("--mark-keys")
            .arg(sb.dir.join("pki/mark-keys"))
            .args(extra)
            .env("KUBECONFIG", sb.dir.join("trainplace.kubeconfig"))
            .env("TRAINPLACE_LOG", "info")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        Replica { child, port, probe }
    }

    /// /readyz's status code and body.
    fn readyz(&self) -> (String, String) {
        let out = Command::new("curl")
            .args(["-s", "-w", "\n%{http_code}"])
            .arg(format!("http://127.0.0.1:{}/readyz", self.probe))
            .output()
            .unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        let (body, code) = text.rsplit_once('\n').unwrap_or(("", ""));
        (code.to_string(), body.to_string())
    }

    fn ready(&self) -> bool {
        Command::new("curl")
            .args(["-sf", &format!("http://127.0.0.1:{}/readyz", self.probe)])
            .output()
            .is_ok_and(|o| o.status.success())
    }

    /// The issuer and serial of the certificate this replica serves now.
    fn served(&self) -> String {
        let script = format!(
            "openssl s_client -connect 127.0.0.1:{} -servername localhost </dev/null 2>/dev/null | openssl x509 -noout -issuer -serial",
            self.port
        );
        let out = Command::new("sh").args(["-c", &script]).output().unwrap();
        String::from_utf8(out.stdout).unwrap()
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The certificates (PEM blocks) of each webhook's caBundle in both configurations.
fn bundles(sb: &Sandbox) -> Vec<BTreeSet<String>> {
    let mut all = Vec::new();
    for kind in [
        "mutatingwebhookconfiguration",
        "validatingwebhookconfiguration",
    ] {
        for w in sb.json(&["get", kind, "trainplace"])["webhooks"]
            .as_array()
            .unwrap()
        {
            let b64 = w["clientConfig"]["caBundle"].as_str().unwrap_or("");
            let pem = base64::engine::general_purpose::STANDARD
                .decode(b64)
                .unwrap();
            let text = String::from_utf8(pem).unwrap();
            all.push(
                text.split_inclusive("-----END CERTIFICATE-----\n")
                    .filter(|c| c.contains("BEGIN CERTIFICATE"))
                    .map(str::to_string)
                    .collect(),
            );
        }
    }
    all
}

fn gpu_pod(ns: &str, name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns,
            "labels": {"batch.kubernetes.io/job-name": "train"}},
        "spec": {"nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"},
            "containers": [{"name": "c", "image": "busybox",
                "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}
    })
}

/// A pod created through the API server (server-side dry run: admission runs in full,
/// nothing is stored); `Ok` only when both webhooks answered (the mutating one is
/// failurePolicy Ignore, so its mark on the pod is checked).
fn create(sb: &Sandbox, pod: &Value) -> Result<(), String> {
    let out = sb.kubectl_stdin(
        &["create", "--dry-run=server", "-o", "json", "-f", "-"],
        Some(&pod.to_string()),
    );
    if !out.status.success() {
        return Err(stderr(&out));
    }
    let stored: Value = serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())?;
    if stored["metadata"]["annotations"]["trainplace.io/mutated"].is_null() {
        return Err(format!(
            "not mutated (the mutating webhook was not reached): {}",
            stderr(&out)
        ));
    }
    Ok(())
}

#[test]
fn two_replicas_rotate_their_ca_while_pods_are_created_without_a_failure() {
    // The replicas rewrite both webhook configurations' caBundle and the test points
    // them at the replicas: the control plane to this test alone, put back when it ends.
    let turn = sandbox::shared_exclusive();
    let sb = turn.sb();
    let began = std::time::Instant::now();
    let ns = sb.namespace("certs");
    let rbac = chart("templates/self-managed-rbac.yaml", &[]);
    let applied = sb.kubectl_stdin(&["apply", "-f", "-"], Some(&rbac));
    assert!(applied.status.success(), "{}", stderr(&applied));
    // Exactly what the mode needs.
    assert!(can_i(
        sb,
        "update",
        "secret/trainplace-tls",
        Some("trainplace")
    ));
    assert!(can_i(sb, "create", "secrets", Some("trainplace")));
    assert!(!can_i(
        sb,
        "get",
        "secret/trainplace-mark-keys",
        Some("trainplace")
    ));
    assert!(!can_i(
        sb,
        "delete",
        "secret/trainplace-tls",
        Some("trainplace")
    ));
    assert!(!can_i(sb, "create", "secrets", Some(&ns)));
    assert!(can_i(
        sb,
        "patch",
        "mutatingwebhookconfiguration/trainplace",
        None
    ));
    assert!(!can_i(
        sb,
        "patch",
        "mutatingwebhookconfiguration/other",
        None
    ));
    assert!(!can_i(
        sb,
        "delete",
        "validatingwebhookconfiguration/trainplace",
        None
    ));

    eprintln!("RBAC checked at {:?}", began.elapsed());
    let sandbox_ca = bundles(sb)[0].clone();
    let a = Replica::start(sb, "replica-a", &[]);
    let b = Replica::start(sb, "replica-b", &[]);
    // A replica that cannot get its certificate (its RBAC names another Secret) is not
    // ready and says why.
    let denied = Replica::start(sb, "replica-denied", &["--cert-secret", "not-granted"]);
    wait_until(Duration::from_secs(30), "both replicas ready", || {
        a.ready() && b.ready()
    });
    let mut seen = (String::new(), String::new());
    wait_until(
        Duration::from_secs(10),
        "the denied replica's reason",
        || {
            seen = denied.readyz();
            seen.1.contains("forbidden")
        },
    );
    assert_eq!(seen.0, "503", "{seen:?}");
    assert!(seen.1.contains("not-granted"), "{seen:?}");
    drop(denied);
    // The first self-managed CA in every webhook's caBundle.
    let mut first = BTreeSet::new();
    wait_until(Duration::from_secs(10), "the caBundle injected", || {
        let now = bundles(sb);
        first = now[0].clone();
        !first.is_empty() && first != sandbox_ca && now.iter().all(|b| *b == first)
    });
    assert_eq!(first.len(), 1, "one CA at first");
    sb.point_webhook("mutatingwebhookconfiguration", a.port, "/mutate");
    sb.point_webhook("validatingwebhookconfiguration", b.port, "/validate");
    let mut last = Err(String::new());
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while last.is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "creates through both replicas: {last:?}"
        );
        last = create(sb, &gpu_pod(&ns, "warmup"));
    }
    eprintln!("creates through both replicas at {:?}", began.elapsed());
    let served_first = (a.served(), b.served());
    assert!(
        served_first.0.contains("trainplace-webhook-ca-"),
        "{served_first:?}"
    );

    let created = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let creator = std::thread::spawn({
        let (created, stop, ns) = (created.clone(), stop.clone(), ns.clone());
        move || {
            let mut failed = Vec::new();
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                match create(sb, &gpu_pod(&ns, &format!("rot-{i}"))) {
                    Ok(()) => {
                        created.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => failed.push(e),
                }
                i += 1;
            }
            failed
        }
    });
    // A whole CA rotation: a next CA trusted beside the first, then signing, then the
    // first CA gone when it ends (15 s after it was made).
    let mut overlap = false;
    wait_until(Duration::from_secs(40), "the first CA replaced", || {
        let now = bundles(sb);
        overlap |= now.iter().all(|b| b.len() == 2 && b.is_superset(&first));
        now.iter().all(|b| !b.is_empty() && b.is_disjoint(&first))
    });
    let after = created.load(Ordering::Relaxed) + 5;
    wait_until(
        Duration::from_secs(30),
        "5 creates after the rotation",
        || created.load(Ordering::Relaxed) >= after,
    );
    stop.store(true, Ordering::Relaxed);
    let failed = creator.join().unwrap();
    let ok = created.load(Ordering::Relaxed);
    assert!(
        failed.is_empty(),
        "{} of {} creates failed during the rotation: {:?}",
        failed.len(),
        ok + failed.len(),
        failed.first()
    );
    assert!(ok >= 10, "{ok} creates");
    assert!(
        overlap,
        "both CAs were trusted together before the old one left"
    );
    let served_last = (a.served(), b.served());
    for (was, is) in [
        (&served_first.0, &served_last.0),
        (&served_first.1, &served_last.1),
    ] {
        let issuer = |s: &str| s.lines().next().unwrap_or("").to_string();
        assert!(
            issuer(was) != issuer(is) && is.contains("trainplace-webhook-ca-"),
            "a certificate from the new CA is served: was {was:?}, is {is:?}"
        );
    }
    eprintln!(
        "{ok} creates, 0 failed, across a CA rotation in {:?} (after the sandbox was up); served {served_last:?}",
        began.elapsed()
    );
}
