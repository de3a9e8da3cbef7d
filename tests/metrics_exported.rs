//! What /metrics exports, scraped from a running server: the series alerts compare exist
//! from the start, reviews are counted by endpoint, kind, rule, mode and verdict, the
//! namespace only when asked for and within its bound; and the chart's Grafana dashboard
//! asks only for metrics the server exports. And Events never hold a review up.

mod common;

use std::collections::BTreeSet;

use common::*;
use serde_json::Value;

/// The metric families on a /metrics page (`# TYPE name kind`), with the sample
/// suffixes a query may add for each.
fn families(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let mut parts = rest.split_whitespace();
        let (Some(name), Some(kind)) = (parts.next(), parts.next()) else {
            continue;
        };
        let suffixes: &[&str] = match kind {
            "counter" => &["_total", "_created"],
            "histogram" => &["_bucket", "_sum", "_count", "_created"],
            "info" => &["_info"],
            _ => &[""],
        };
        for s in suffixes {
            out.insert(format!("{name}{s}"));
        }
    }
    out
}

#[tokio::test]
async fn series_exist_from_the_start_and_reviews_carry_rule_kind_and_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new("metrics-ca");
    let (crt, key) = pki.write_leaf(dir.path());
    let mut cfg = config(Some((crt.clone(), key)), None);
    cfg.metrics_namespaces = 1;
    let srv = serve(cfg).await;
    let text = metrics_text(srv.probe_addr).await;
    let version = env!("CARGO_PKG_VERSION");
    assert!(
        text.contains(&format!("trainplace_build_info{{version=\"{version}\"}} 1")),
        "{text}"
    );
    for family in [
        "policy_reloads",
        "certificate_reloads",
        "reservations_reloads",
        "mark_key_reloads",
    ] {
        for outcome in ["success", "failure"] {
            let series = format!("trainplace_{family}_total{{outcome=\"{outcome}\"}} 0");
            assert!(text.contains(&series), "{series} at start:\n{text}");
        }
    }
    assert!(text.contains("trainplace_mark_verification_failures_total 0"));
    // `--inventory off`: the embedded catalog by choice, so TrainplaceInventoryDown
    // (inventory_up 0 unless inventory_enabled 0) stays quiet.
    assert!(text.contains("trainplace_inventory_up 0"), "{text}");
    assert!(text.contains("trainplace_inventory_enabled 0"), "{text}");
    assert!(text.contains("trainplace_webhooks_registered 0"), "{text}");
    for outcome in ["published", "failed", "rate_limited", "queue_full"] {
        let series = format!("trainplace_events_total{{outcome=\"{outcome}\"}} 0");
        assert!(text.contains(&series), "{series} at start");
    }
    // The served certificate's notAfter, as openssl reads it.
    let out = std::process::Command::new("openssl")
        .args(["x509", "-noout", "-enddate", "-dateopt", "iso_8601", "-in"])
        .arg(&crt)
        .output()
        .unwrap();
    let end = String::from_utf8(out.stdout).unwrap();
    let end: jiff::Timestamp = end
        .trim()
        .strip_prefix("notAfter=")
        .unwrap()
        .replace(' ', "T")
        .parse()
        .unwrap();
    let series = format!(
        "trainplace_certificate_expiry_timestamp_seconds {}",
        end.as_second()
    );
    assert!(text.contains(&series), "{series}:\n{text}");

    // A denied pod in one namespace and the same in two others: counted by rule, kind,
    // mode and verdict; by namespace for the first only (the bound is 1).
    let mut pod = fixture_object("one-gpu-per-pod-kubeflow");
    let url = format!("{}/validate", https_base(&srv));
    let c = client(&pki.ca_pem);
    for ns in ["team-a", "team-b", "team-c"] {
        pod["metadata"]["namespace"] = ns.into();
        let (status, answer) = post(&c, &url, &review_for(&pod, ns)).await;
        assert_eq!(status, 200);
        assert_eq!(answer["response"]["allowed"], false, "{answer}");
    }
    let text = metrics_text(srv.probe_addr).await;
    let findings = "trainplace_admission_findings_total{endpoint=\"validate\",kind=\"Pod\",rule=\"partial-node\",mode=\"enforce\",verdict=\"denied\"} 3";
    assert!(text.contains(findings), "{findings}:\n{text}");
    assert!(text.contains(
        "trainplace_admission_namespace_reviews_total{namespace=\"team-a\",verdict=\"denied\"} 1"
    ));
    assert!(text.contains(
        "trainplace_admission_namespace_reviews_total{namespace=\"_other\",verdict=\"denied\"} 2"
    ));
    assert!(!text.contains("namespace=\"team-b\""), "{text}");
    srv.handle.shutdown();
}

/// Every metric the dashboard's queries name is one the server exports.
#[tokio::test]
async fn the_dashboard_queries_only_exported_metrics() {
    let path = root().join("charts/trainplace/files/dashboards/trainplace.json");
    let dashboard: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut exprs = Vec::new();
    collect_exprs(&dashboard, &mut exprs);
    assert!(exprs.len() >= 8, "the dashboard has its queries: {exprs:?}");
    // A server with a series in every family the dashboard may ask for: a Capacity
    // Block, a denied review, a rejected request.
    let dir = tempfile::tempdir().unwrap();
    let blocks = dir.path().join("reservations.json");
    let block = serde_json::json!({"CapacityReservations": [{"CapacityReservationId": "cr-1",
        "InstanceType": "p5.48xlarge", "AvailabilityZone": "us-east-1a", "State": "active",
        "EndDate": "2099-01-01T00:00:00Z", "ReservationType": "capacity-block"}]});
    std::fs::write(&blocks, block.to_string()).unwrap();
    let pki = Pki::new("dashboard-ca");
    let (crt, key) = pki.write_leaf(dir.path());
    let mut cfg = config(Some((crt, key)), None);
    cfg.reservations = Some(blocks);
    cfg.inventory = trainplace::server::config::InventoryMode::Files(
        root().join("tests/fixtures/capacity-blocks/managed-node-group"),
    );
    cfg.metrics_namespaces = 4;
    let srv = serve(cfg).await;
    let loaded = "trainplace_reservations_reloads_total{outcome=\"success\"}";
    assert!(wait_for_count(srv.probe_addr, loaded, 1).await, "{loaded}");
    let c = client(&pki.ca_pem);
    let url = format!("{}/validate", https_base(&srv));
    let pod = fixture_object("one-gpu-per-pod-kubeflow");
    let (status, _) = post(&c, &url, &review_for(&pod, "d")).await;
    assert_eq!(status, 200);
    let not_json = c.post(&url).body("x").send().await.unwrap();
    assert_eq!(not_json.status().as_u16(), 415);
    let exported = families(&metrics_text(srv.probe_addr).await);
    srv.handle.shutdown();
    let name = regex::Regex::new(r"\btrainplace_[a-z0-9_]+").unwrap();
    let mut unknown = BTreeSet::new();
    let mut used = BTreeSet::new();
    for e in &exprs {
        for m in name.find_iter(e) {
            used.insert(m.as_str().to_string());
            if !exported.contains(m.as_str()) {
                unknown.insert(m.as_str().to_string());
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "the dashboard queries metrics the server does not export: {unknown:?}\nexported: {exported:?}"
    );
    assert!(used.len() >= 8, "{used:?}");
}

fn collect_exprs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                match (k.as_str(), v) {
                    ("expr" | "query", Value::String(s)) => out.push(s.clone()),
                    _ => collect_exprs(v, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|v| collect_exprs(v, out)),
        _ => {}
    }
}

/// Events are written off the review path: with an API server that accepts connections
/// and never answers, 300 denials are each answered at once, and the Events that do not
/// fit the queue are dropped and counted instead of waited for.
#[tokio::test]
async fn an_api_server_that_never_answers_delays_no_review() {
    let hole = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let api = hole.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in hole.incoming().flatten() {
            held.push(conn);
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    write_kubeconfig(&kubeconfig, &format!("https://{api}"), true);
    let [addr, probe] = free_addrs::<2>();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_trainplace"));
    cmd.args(["serve", "--inventory", "off", "--event-burst", "1000"])
        .arg("--addr")
        .arg(addr.to_string())
        .arg("--probe-addr")
        .arg(probe.to_string())
        .env("KUBECONFIG", &kubeconfig)
        .env("TRAINPLACE_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let _server = ServeProcess(cmd.spawn().unwrap());
    let url = format!("https://127.0.0.1:{}/validate", addr.port());
    let pod = fixture_object("one-gpu-per-pod-kubeflow");
    let c = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .build()
        .unwrap();
    assert_eq!(first_answer(&c, &url, &review_for(&pod, "0")).await, 200);
    let mut slowest = std::time::Duration::ZERO;
    for i in 1..=300 {
        let started = std::time::Instant::now();
        let (status, answer) = post(&c, &url, &review_for(&pod, &i.to_string())).await;
        slowest = slowest.max(started.elapsed());
        assert_eq!(status, 200);
        assert_eq!(answer["response"]["allowed"], false);
    }
    assert!(
        slowest < std::time::Duration::from_secs(1),
        "a review waited {slowest:?} (one Event write may take 5 s)"
    );
    let dropped = counter(probe, "trainplace_events_total{outcome=\"queue_full\"}").await;
    let published = counter(probe, "trainplace_events_total{outcome=\"published\"}").await;
    assert!(dropped >= 300 - 128 - 2, "{dropped} dropped");
    assert_eq!(published, 0);
}
