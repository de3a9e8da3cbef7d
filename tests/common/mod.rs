//! Test helpers: a throwaway PKI written to disk, a server on free ports, an HTTPS
//! client that trusts only the test CA, and AdmissionReview builders.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use serde_json::{Value, json};
use trainplace::server::{Config, Running, start};

pub struct Pki {
    pub ca_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl Pki {
    pub fn new(name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        let key = KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        Pki {
            ca_pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    /// Write a serving cert for localhost/127.0.0.1 and its key into `dir`.
    pub fn write_leaf(&self, dir: &Path) -> (PathBuf, PathBuf) {
        self.write_leaf_valid(dir, None)
    }

    /// Like `write_leaf`, valid from `window.0` to `window.1` when given.
    pub fn write_leaf_valid(
        &self,
        dir: &Path,
        window: Option<(time::OffsetDateTime, time::OffsetDateTime)>,
    ) -> (PathBuf, PathBuf) {
        let mut params =
            CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
        if let Some((from, to)) = window {
            params.not_before = from;
            params.not_after = to;
        }
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        let (c, k) = (dir.join("tls.crt"), dir.join("tls.key"));
        write_atomic(&c, cert.pem().as_bytes());
        write_atomic(&k, key.serialize_pem().as_bytes());
        (c, k)
    }
}

/// The repository's root (the main crate's manifest directory).
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// How long a test waits for a state the server reaches in well under a second when
/// it works: far beyond what a loaded machine adds, so only a server that never gets
/// there fails the wait.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// Ask `check` (every 25 ms) until it gives a value: for a state the server shows only
/// by answering differently (readiness, a counter, a page), the answer is the event.
/// Panics naming `what` after [`PATIENCE`].
pub async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let started = std::time::Instant::now();
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "{what}: not within {PATIENCE:?}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Replace a file in one rename, as kubelet does for mounted Secrets.
pub fn write_atomic(path: &Path, data: &[u8]) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, data).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

pub fn config(tls: Option<(PathBuf, PathBuf)>, policy_dir: Option<PathBuf>) -> Config {
    Config {
        addr: "127.0.0.1:0".parse().unwrap(),
        probe_addr: "127.0.0.1:0".parse().unwrap(),
        tls,
        self_managed: None,
        policy_dir,
        mark_keys: None,
        reservations: None,
        reload_interval: Duration::from_millis(100),
        shutdown_grace: Duration::from_secs(5),
        max_body: 4 * 1024 * 1024,
        read_timeout: Duration::from_secs(1),
        inventory: trainplace::server::config::InventoryMode::Off,
        limits: Default::default(),
        review_concurrency: 0,
        review_queue: 64,
        large_review_bytes: trainplace::server::pool::DEFAULT_LARGE_REVIEW_BYTES,
        deadlines: trainplace::server::config::Deadlines {
            header_read: Duration::from_secs(1),
            ..Default::default()
        },
        // The binary's runtime only; these servers run on the test's runtime.
        io_threads: 1,
        events: Default::default(),
        metrics_namespaces: 0,
    }
}

pub async fn serve(config: Config) -> Running {
    start(config).await.expect("server starts")
}

pub fn client_config(ca_pem: &str) -> rustls::ClientConfig {
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pemfile_certs(ca_pem) {
        roots.add(cert).unwrap();
    }
    let mut cfg = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    cfg
}

fn rustls_pemfile_certs(pem: &str) -> Vec<rustls::pki_types::CertificateDer<'static>> {
    use rustls::pki_types::pem::PemObject;
    rustls::pki_types::CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<_, _>>()
        .unwrap()
}

/// An HTTPS client that trusts only `ca_pem` and keeps connections alive.
pub fn client(ca_pem: &str) -> reqwest::Client {
    reqwest::Client::builder()
        .use_preconfigured_tls(client_config(ca_pem))
        .pool_max_idle_per_host(1)
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

pub fn fixture_object(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/pods")
        .join(format!("{name}.yaml"));
    let case: Value = serde_yaml_ng::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    case["object"].clone()
}

pub fn review_for(object: &Value, uid: &str) -> Value {
    let ns = object["metadata"]["namespace"]
        .as_str()
        .unwrap_or("default");
    let kind = object["kind"].as_str().unwrap_or("Pod");
    let api = object["apiVersion"].as_str().unwrap_or("v1");
    let (group, version) = api.rsplit_once('/').unwrap_or(("", api));
    let gvk = json!({"group": group, "version": version, "kind": kind});
    let gvr = json!({"group": group, "version": version, "resource": format!("{}s", kind.to_lowercase())});
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": gvk,
            "resource": gvr,
            "requestKind": gvk,
            "requestResource": gvr,
            "name": object["metadata"]["name"],
            "namespace": ns,
            "operation": "CREATE",
            "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
            "object": object,
            "oldObject": null,
            "dryRun": false,
            "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}
        }
    })
}

/// Decode the base64 JSON Patch of a response and apply it to `object`.
pub fn apply_response_patch(object: &Value, response: &Value) -> Value {
    use base64::Engine;
    let b64 = response["response"]["patch"]
        .as_str()
        .expect("patch present");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .unwrap();
    let patch: json_patch::Patch = serde_json::from_slice(&bytes).unwrap();
    let mut out = object.clone();
    json_patch::patch(&mut out, &patch).unwrap();
    out
}

/// `kubernetes-validate` from PyPI (official Kubernetes schemas): `scripts/test-deps.sh`
/// installs it into `.venv`; TRAINPLACE_KUBERNETES_VALIDATE points at another copy.
/// Missing is a failure, not a skip.
pub fn kubernetes_validate() -> PathBuf {
    if let Ok(p) = std::env::var("TRAINPLACE_KUBERNETES_VALIDATE") {
        return PathBuf::from(p);
    }
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/kubernetes-validate");
    assert!(
        venv.exists(),
        "kubernetes-validate not found: run scripts/test-deps.sh (the CI does)"
    );
    venv
}

/// `kubernetes-validate --strict` with the Kubernetes 1.33 schemas over `files`.
#[allow(dead_code)]
pub fn strict_validate<P: AsRef<std::ffi::OsStr>>(files: &[P]) -> std::process::Output {
    std::process::Command::new(kubernetes_validate())
        .args(["--strict", "-k", "1.33.0", "--quiet"])
        .args(files)
        .output()
        .expect("kubernetes-validate runs")
}

/// Fail with the validator's words unless every file passes strict validation.
#[allow(dead_code)]
pub fn assert_strictly_valid<P: AsRef<std::ffi::OsStr>>(context: &str, files: &[P]) {
    // kubernetes-validate skips empty documents: an empty file or list would pass.
    assert!(!files.is_empty(), "{context}: no files to validate");
    for file in files {
        let path = Path::new(file.as_ref());
        let text = std::fs::read_to_string(path).unwrap();
        assert!(
            text.lines().any(|l| l.starts_with("kind:")),
            "{context}: {} holds no object:\n{text}",
            path.display()
        );
    }
    let v = strict_validate(files);
    assert!(
        v.status.success(),
        "{context}: kubernetes-validate --strict failed:\n{}\n{}",
        String::from_utf8_lossy(&v.stdout),
        String::from_utf8_lossy(&v.stderr)
    );
}

/// A server on free ports serving a fresh CA-signed certificate from files on disk.
/// Keep the TempDir alive as long as the server runs.
pub async fn tls_server(policy_dir: Option<PathBuf>) -> (Running, Pki, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new("test-ca");
    let (crt, key) = pki.write_leaf(dir.path());
    let srv = serve(config(Some((crt, key)), policy_dir)).await;
    (srv, pki, dir)
}

/// `https://localhost:PORT` of a running server (the certificate names localhost).
pub fn https_base(srv: &Running) -> String {
    format!("https://localhost:{}", srv.addr.port())
}

/// A bare TLS connection to the server, for speaking HTTP by hand (slow clients, drain).
pub async fn raw_tls(
    srv: &Running,
    pki: &Pki,
) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    let tcp = tokio::net::TcpStream::connect(srv.addr).await.unwrap();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(client_config(&pki.ca_pem)));
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    connector.connect(name, tcp).await.unwrap()
}

/// The value of one series on the probe port's `/metrics` page, e.g.
/// `trainplace_policy_reloads_total{outcome="success"}`; 0 when absent.
pub async fn counter(probe: impl std::fmt::Display, series: &str) -> u64 {
    let key = format!("{series} ");
    metrics_text(probe)
        .await
        .lines()
        .find_map(|l| l.strip_prefix(&key))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// Wait until `series` reaches `n`: the server's own count of an event (a reload, a
/// closed connection) rather than a guess at how long it takes. False after
/// [`PATIENCE`].
pub async fn wait_for_count(probe: impl std::fmt::Display + Copy, series: &str, n: u64) -> bool {
    let started = std::time::Instant::now();
    while started.elapsed() < PATIENCE {
        if counter(probe, series).await >= n {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

/// The probe port's `/metrics` page as text.
pub async fn metrics_text(probe: impl std::fmt::Display) -> String {
    reqwest::get(format!("http://{probe}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// `N` distinct free local addresses. All listeners stay bound until every port is
/// chosen, so no two answers can be the same port (binding one at a time can be).
pub fn free_addrs<const N: usize>() -> [std::net::SocketAddr; N] {
    let held: Vec<std::net::TcpListener> = (0..N)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    std::array::from_fn(|i| held[i].local_addr().unwrap())
}

/// POST an AdmissionReview: the HTTP status and the answer (`Null` when it is not JSON).
pub async fn post(c: &reqwest::Client, url: &str, body: &Value) -> (u16, Value) {
    let resp = c.post(url).json(body).send().await.expect("request");
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// POST `body` as it is (JSON or not) with the JSON content type.
pub async fn post_text(
    c: &reqwest::Client,
    url: &str,
    body: impl Into<reqwest::Body>,
) -> reqwest::Result<reqwest::Response> {
    c.post(url)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
}

/// POST an AdmissionReview to a webhook with a self-signed certificate.
#[allow(dead_code)]
pub async fn post_review(url: &str, body: &Value) -> (u16, Value) {
    let c = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .build()
        .unwrap();
    post(&c, url, body).await
}

/// Write a kubeconfig at `path` that points at `server` with a bearer token (the
/// tests' fake or dead API servers); `insecure` skips TLS verification for it.
#[allow(dead_code)]
pub fn write_kubeconfig(path: &Path, server: &str, insecure: bool) {
    let skip = if insecure {
        "\n    insecure-skip-tls-verify: true"
    } else {
        ""
    };
    std::fs::write(
        path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n    server: {server}{skip}\nusers:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: c\n  context: {{cluster: test, user: u}}\ncurrent-context: c\n"
        ),
    )
    .unwrap();
}

/// Start `trainplace serve` on `addr`/`probe` with the inventory read through
/// `kubeconfig`; its stderr goes to `stderr`.
pub fn serve_with_kubeconfig(
    kubeconfig: &Path,
    addr: u16,
    probe: u16,
    stderr: std::process::Stdio,
) -> ServeProcess {
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_trainplace"))
        .args([
            "serve",
            "--addr",
            &format!("127.0.0.1:{addr}"),
            "--probe-addr",
            &format!("127.0.0.1:{probe}"),
        ])
        .env("KUBECONFIG", kubeconfig)
        .env("TRAINPLACE_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .stderr(stderr)
        .spawn()
        .unwrap();
    ServeProcess(child)
}

/// A `trainplace` process (serve, advisor serve), killed when dropped, so a failing
/// test leaves none behind; the `Child` is reached through it.
pub struct ServeProcess(pub std::process::Child);

impl Drop for ServeProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl std::ops::Deref for ServeProcess {
    type Target = std::process::Child;

    fn deref(&self) -> &std::process::Child {
        &self.0
    }
}

impl std::ops::DerefMut for ServeProcess {
    fn deref_mut(&mut self) -> &mut std::process::Child {
        &mut self.0
    }
}

/// Start `trainplace serve --inventory off` on `addr` (HTTPS) and `probe`, with
/// `extra` flags, logging warnings only to a discarded stderr.
pub fn spawn_serve(
    addr: std::net::SocketAddr,
    probe: std::net::SocketAddr,
    extra: &[&str],
) -> ServeProcess {
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_trainplace"))
        .args(["serve", "--inventory", "off", "--addr"])
        .arg(addr.to_string())
        .arg("--probe-addr")
        .arg(probe.to_string())
        .args(extra)
        .env("TRAINPLACE_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("trainplace serve starts");
    ServeProcess(child)
}

/// POST `review` to `url` until a just-started server answers: the HTTP status of the
/// first answer.
pub async fn first_answer(c: &reqwest::Client, url: &str, review: &Value) -> u16 {
    eventually(&format!("an answer on {url}"), || async {
        let resp = c.post(url).json(review).send().await.ok()?;
        Some(resp.status().as_u16())
    })
    .await
}

/// Wait until the probe port's `/readyz` says 200; its JSON detail.
pub async fn ready(probe: impl std::fmt::Display) -> Value {
    let url = format!("http://{probe}/readyz");
    eventually(&format!("ready on {url}"), || async {
        let r = reqwest::get(&url).await.ok()?;
        if r.status() != 200 {
            return None;
        }
        r.json().await.ok()
    })
    .await
}

/// VmRSS of process `pid` in KiB, from /proc/PID/status; `None` once it is gone.
pub fn rss_kib(pid: u32) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}
