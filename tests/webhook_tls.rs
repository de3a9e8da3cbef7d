//! The webhook over real TLS sockets: reviews, bad input, slow clients, certificate
//! rotation with a client connected, policy hot reload, probes and graceful drain.

mod common;

use std::time::Duration;

use common::*;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[tokio::test]
async fn mutate_and_validate_over_tls() {
    let (srv, pki, _dir) = tls_server(None).await;
    let c = client(&pki.ca_pem);
    let base = https_base(&srv);

    let pod = fixture_object("full-node-p5-jobset");
    let (status, body) = post(&c, &format!("{base}/mutate"), &review_for(&pod, "uid-1")).await;
    assert_eq!(status, 200);
    assert_eq!(body["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(body["kind"], "AdmissionReview");
    assert_eq!(body["response"]["uid"], "uid-1");
    assert_eq!(body["response"]["allowed"], true);
    assert_eq!(body["response"]["patchType"], "JSONPatch");
    let mutated = apply_response_patch(&pod, &body);
    assert_eq!(mutated["spec"]["hostIPC"], true);
    assert_eq!(
        mutated["spec"]["containers"][0]["resources"]["limits"]["vpc.amazonaws.com/efa"],
        32
    );
    assert!(
        mutated["metadata"]["annotations"]["trainplace.io/mutated"]
            .as_str()
            .unwrap()
            .contains("hostIPC=true")
    );

    // The validating webhook sees the mutated pod: allowed, no patch.
    let (_, body) = post(
        &c,
        &format!("{base}/validate"),
        &review_for(&mutated, "uid-2"),
    )
    .await;
    assert_eq!(body["response"]["allowed"], true);
    assert!(body["response"].get("patch").is_none());

    // A second mutate pass over the mutated pod yields no patch.
    let (_, body) = post(
        &c,
        &format!("{base}/mutate"),
        &review_for(&mutated, "uid-3"),
    )
    .await;
    assert!(body["response"].get("patch").is_none(), "{body}");

    // 1-GPU-per-pod is denied with a 403 status and an actionable message.
    let bad = fixture_object("one-gpu-per-pod-kubeflow");
    let mut review = review_for(&bad, "uid-4");
    review["request"]["dryRun"] = json!(true);
    let (_, body) = post(&c, &format!("{base}/validate"), &review).await;
    let r = &body["response"];
    assert_eq!(r["uid"], "uid-4");
    assert_eq!(r["allowed"], false);
    assert_eq!(r["status"]["code"], 403);
    let msg = r["status"]["message"].as_str().unwrap();
    assert!(
        msg.contains("[partial-node]") && msg.contains("trainplace.io/allow-partial-node"),
        "{msg}"
    );

    // Metrics saw both endpoints.
    let metrics = metrics_text(srv.probe_addr).await;
    assert!(metrics.contains("trainplace_admission_reviews_total{endpoint=\"validate\",kind=\"Pod\",operation=\"CREATE\",verdict=\"denied\"} 1"), "{metrics}");
    assert!(
        metrics.contains("trainplace_admission_findings_total{endpoint=\"validate\",kind=\"Pod\",rule=\"partial-node\",mode=\"enforce\",verdict=\"denied\"} 1"),
        "{metrics}"
    );
    assert!(metrics.contains("trainplace_admission_review_duration_seconds_bucket"));
    srv.handle.shutdown();
}

#[tokio::test]
async fn warn_mode_returns_warnings_and_still_patches() {
    let pol = tempfile::tempdir().unwrap();
    std::fs::write(
        pol.path().join("policy.yaml"),
        "apiVersion: trainplace.io/v1alpha1\nkind: Policy\nrules:\n  partial-node: warn\noptIns: {}\n",
    )
    .unwrap();
    let (srv, pki, _dir) = tls_server(Some(pol.path().to_path_buf())).await;
    let c = client(&pki.ca_pem);
    let base = https_base(&srv);
    let bad = fixture_object("one-gpu-per-pod-kubeflow");
    let mut review = review_for(&bad, "w-1");
    review["request"]["dryRun"] = json!(true);
    let (_, m) = post(&c, &format!("{base}/mutate"), &review).await;
    assert_eq!(m["response"]["allowed"], true);
    let mutated = apply_response_patch(&bad, &m);
    let (_, v) = post(
        &c,
        &format!("{base}/validate"),
        &review_for(&mutated, "w-2"),
    )
    .await;
    assert_eq!(v["response"]["allowed"], true);
    let warnings = v["response"]["warnings"].as_array().expect("warnings");
    assert!(
        warnings
            .iter()
            .any(|w| w.as_str().unwrap().contains("[partial-node]")),
        "{warnings:?}"
    );
    srv.handle.shutdown();
}

#[tokio::test]
async fn bad_input_gets_clear_errors() {
    let srv = serve(config(None, None)).await;
    // Self-signed in memory: the test trusts nothing, so accept any cert for this test only.
    let c = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .build()
        .unwrap();
    let url = format!("https://127.0.0.1:{}/validate", srv.addr.port());

    let r = post_text(&c, &url, "not json").await.unwrap();
    assert_eq!(r.status().as_u16(), 400);
    let body: Value = r.json().await.unwrap();
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("not an AdmissionReview JSON"),
        "{body}"
    );

    let r = c
        .post(&url)
        .header("content-type", "text/plain")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 415);

    let big = format!("{{\"x\":\"{}\"}}", "a".repeat(10 * 1024 * 1024));
    let r = post_text(&c, &url, big).await.unwrap();
    assert_eq!(r.status().as_u16(), 413);

    let (s, body) = post(&c, &url, &json!({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview", "request": {}})).await;
    assert_eq!(s, 200);
    assert_eq!(body["response"]["allowed"], false);
    assert!(
        body["response"]["status"]["message"]
            .as_str()
            .unwrap()
            .contains("admissionReviewVersions")
    );

    let (_, body) = post(
        &c,
        &url,
        &json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}),
    )
    .await;
    assert_eq!(body["response"]["allowed"], false);
    assert!(
        body["response"]["status"]["message"]
            .as_str()
            .unwrap()
            .contains("no request")
    );

    // A well-formed review whose object cannot be read: denied, naming the field.
    let mut pod = fixture_object("full-node-p5-jobset");
    pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = json!("eight");
    let (_, body) = post(&c, &url, &review_for(&pod, "u-bad")).await;
    assert_eq!(body["response"]["uid"], "u-bad");
    assert_eq!(body["response"]["allowed"], false);
    assert!(
        body["response"]["status"]["message"]
            .as_str()
            .unwrap()
            .contains("limits[nvidia.com/gpu]")
    );

    // A kind trainplace does not handle passes with a warning, not a denial.
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "a"}});
    let (_, body) = post(&c, &url, &review_for(&cm, "u-cm")).await;
    assert_eq!(body["response"]["allowed"], true);
    assert!(
        body["response"]["warnings"][0]
            .as_str()
            .unwrap()
            .contains("does not handle")
    );
    srv.handle.shutdown();
}

#[tokio::test]
async fn slow_client_is_disconnected() {
    let (srv, pki, _dir) = tls_server(None).await;
    let mut tls = raw_tls(&srv, &pki).await;
    // Half a request line, then silence: the header read timeout (1 s here) must end it.
    tls.write_all(b"POST /validate HTTP/1.1\r\nHost: localhost\r\n")
        .await
        .unwrap();
    let mut buf = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), tls.read_to_end(&mut buf)).await;
    assert!(
        read.is_ok(),
        "server kept a silent client for more than 5 s"
    );
    srv.handle.shutdown();
}

#[tokio::test]
async fn certificate_rotation_keeps_connections_and_rejects_bad_certs() {
    let dir = tempfile::tempdir().unwrap();
    let old_ca = Pki::new("old-ca");
    let (crt, key) = old_ca.write_leaf(dir.path());
    let srv = serve(config(Some((crt.clone(), key.clone())), None)).await;
    let base = format!("https://localhost:{}", srv.addr.port());
    let pod = fixture_object("full-node-p5-jobset");

    // A keep-alive client on the old certificate.
    let old_client = client(&old_ca.ca_pem);
    let (s, _) = post(
        &old_client,
        &format!("{base}/validate"),
        &review_for(&pod, "a"),
    )
    .await;
    assert_eq!(s, 200);

    // Rotate to a certificate from a new CA. write_leaf writes the certificate, then
    // the key: the watcher may see the new certificate beside the old key first (a
    // failed reload), but the pair's reload succeeds.
    let reloads =
        |outcome: &str| format!("trainplace_certificate_reloads_total{{outcome=\"{outcome}\"}}");
    let new_ca = Pki::new("new-ca");
    new_ca.write_leaf(dir.path());
    assert!(
        wait_for_count(srv.probe_addr, &reloads("success"), 1).await,
        "new certificate was not picked up"
    );
    let new_client = client(&new_ca.ca_pem);
    let (s, _) = post(
        &new_client,
        &format!("{base}/validate"),
        &review_for(&pod, "b"),
    )
    .await;
    assert_eq!(s, 200);
    // The old connection was not dropped: the pooled keep-alive connection still works.
    let (s, body) = post(
        &old_client,
        &format!("{base}/validate"),
        &review_for(&pod, "c"),
    )
    .await;
    assert_eq!((s, body["response"]["uid"].as_str()), (200, Some("c")));

    // A broken certificate is refused; the last good one keeps serving.
    let failed = counter(srv.probe_addr, &reloads("failure")).await;
    common::write_atomic(
        &crt,
        b"-----BEGIN CERTIFICATE-----\nnot a cert\n-----END CERTIFICATE-----\n",
    );
    assert!(
        wait_for_count(srv.probe_addr, &reloads("failure"), failed + 1).await,
        "failed reload not counted"
    );
    let fresh = client(&new_ca.ca_pem);
    let (s, _) = post(&fresh, &format!("{base}/validate"), &review_for(&pod, "d")).await;
    assert_eq!(s, 200);
    srv.handle.shutdown();
}

#[tokio::test]
async fn policy_reload_and_broken_edit() {
    let pol = tempfile::tempdir().unwrap();
    let write = |mode: &str| {
        common::write_atomic(
            &pol.path().join("policy.yaml"),
            format!(
                "apiVersion: trainplace.io/v1alpha1\nkind: Policy\nrules:\n  partial-node: {mode}\n"
            )
            .as_bytes(),
        )
    };
    write("enforce");
    let srv = serve(config(None, Some(pol.path().to_path_buf()))).await;
    let c = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .build()
        .unwrap();
    let url = format!("https://127.0.0.1:{}/validate", srv.addr.port());
    let mut bad = fixture_object("one-gpu-per-pod-kubeflow");
    // Pinned to a zone, so /validate judges only the partial-node layout (an unpinned
    // pod without the mutating webhook's zone hold is refused for that).
    bad["spec"]["nodeSelector"]["topology.kubernetes.io/zone"] = serde_json::json!("us-east-1a");
    let (_, b) = post(&c, &url, &review_for(&bad, "1")).await;
    assert_eq!(b["response"]["allowed"], false);

    let reloads =
        |outcome: &str| format!("trainplace_policy_reloads_total{{outcome=\"{outcome}\"}}");
    write("audit");
    assert!(
        wait_for_count(srv.probe_addr, &reloads("success"), 1).await,
        "policy change not picked up"
    );
    let (_, b) = post(&c, &url, &review_for(&bad, "2")).await;
    assert_eq!(
        b["response"]["allowed"], true,
        "the reloaded policy not in force: {b}"
    );

    write("maybe");
    assert!(
        wait_for_count(srv.probe_addr, &reloads("failure"), 1).await,
        "broken edit not noticed"
    );
    let (_, b) = post(&c, &url, &review_for(&bad, "3")).await;
    assert_eq!(
        b["response"]["allowed"], true,
        "broken edit replaced the last good policy"
    );
    let m = metrics_text(srv.probe_addr).await;
    assert!(
        m.contains("trainplace_policy_reloads_total{outcome=\"failure\"} 1"),
        "{m}"
    );
    assert!(
        m.contains("trainplace_policy_reloads_total{outcome=\"success\"} 1"),
        "{m}"
    );
    srv.handle.shutdown();
}

#[tokio::test]
async fn probes_and_graceful_drain() {
    let (srv, pki, _dir) = tls_server(None).await;
    let probe = format!("http://{}", srv.probe_addr);
    assert_eq!(
        reqwest::get(format!("{probe}/healthz"))
            .await
            .unwrap()
            .status(),
        200
    );
    let ready = reqwest::get(format!("{probe}/readyz")).await.unwrap();
    assert_eq!(ready.status(), 200);
    let detail: Value = ready.json().await.unwrap();
    assert!(
        detail["detail"]["certificate"]
            .as_str()
            .unwrap()
            .contains("tls.crt")
    );

    // Start a review whose body arrives slowly, then shut down while it is in flight.
    let mut tls = raw_tls(&srv, &pki).await;
    let body =
        serde_json::to_vec(&review_for(&fixture_object("full-node-p5-jobset"), "drain")).unwrap();
    let head = format!(
        "POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    tls.write_all(head.as_bytes()).await.unwrap();
    tls.write_all(&body[..100]).await.unwrap();
    // The two pauses pace the steps; they synchronise nothing: the review is answered
    // whether the server read its head before the drain began or after (a connection
    // holding part of a request is not idle), within a grace no step comes near.
    tokio::time::sleep(Duration::from_millis(100)).await;
    srv.state.set_ready(false);
    srv.handle.graceful_shutdown(Some(Duration::from_secs(60)));
    assert_eq!(
        reqwest::get(format!("{probe}/readyz"))
            .await
            .unwrap()
            .status(),
        503
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    tls.write_all(&body[100..]).await.unwrap();
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), tls.read_to_end(&mut buf))
        .await
        .unwrap()
        .ok();
    let text = String::from_utf8_lossy(&buf);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.contains("\"uid\":\"drain\""), "{text}");
    srv.done.await.unwrap().unwrap();
}

#[tokio::test]
async fn one_review_per_workload_kind() {
    let (srv, pki, _dir) = tls_server(None).await;
    let c = client(&pki.ca_pem);
    let base = https_base(&srv);
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/workloads");
    let mut kinds = std::collections::BTreeSet::new();
    for entry in std::fs::read_dir(root).unwrap() {
        let path = entry.unwrap().path();
        let object: Value =
            serde_yaml_ng::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let kind = object["kind"].as_str().unwrap().to_string();
        let (_, m) = post(&c, &format!("{base}/mutate"), &review_for(&object, &kind)).await;
        assert_eq!(m["response"]["uid"], kind.as_str());
        assert_eq!(m["response"]["allowed"], true, "{kind}: {m}");
        let mutated = apply_response_patch(&object, &m);
        assert_ne!(mutated, object, "{kind}: no layout written");
        let (_, v) = post(&c, &format!("{base}/validate"), &review_for(&mutated, "v")).await;
        let denied = path
            .file_stem()
            .unwrap()
            .to_string_lossy()
            .contains("one-gpu");
        assert_eq!(v["response"]["allowed"], !denied, "{kind}: {v}");
        if denied {
            let msg = v["response"]["status"]["message"].as_str().unwrap();
            assert!(msg.contains("pytorchReplicaSpecs.Worker"), "{msg}");
        }
        kinds.insert(kind);
    }
    let want: std::collections::BTreeSet<String> = [
        "Job",
        "JobSet",
        "PyTorchJob",
        "MPIJob",
        "TrainJob",
        "LeaderWorkerSet",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(kinds, want);
    let metrics = metrics_text(srv.probe_addr).await;
    assert!(metrics.contains("kind=\"TrainJob\""), "{metrics}");
    srv.handle.shutdown();
}

#[tokio::test]
async fn stalled_body_is_cut_off() {
    let (srv, pki, _dir) = tls_server(None).await;
    let mut tls = raw_tls(&srv, &pki).await;
    // Complete headers promising 5000 bytes, then 10 bytes and silence.
    tls.write_all(b"POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 5000\r\n\r\n{\"apiVersi")
        .await
        .unwrap();
    let mut buf = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(6), tls.read_to_end(&mut buf)).await;
    assert!(
        read.is_ok(),
        "server waited more than 6 s for a stalled body"
    );
    let text = String::from_utf8_lossy(&buf);
    assert!(
        text.is_empty() || text.starts_with("HTTP/1.1 4"),
        "unexpected answer: {text}"
    );
    srv.handle.shutdown();
}

#[tokio::test]
async fn http2_over_tls() {
    let (srv, pki, _dir) = tls_server(None).await;
    let mut cfg = client_config(&pki.ca_pem);
    cfg.alpn_protocols = vec![b"h2".to_vec()];
    let c = reqwest::Client::builder()
        .use_preconfigured_tls(cfg)
        .http2_prior_knowledge()
        .build()
        .unwrap();
    let pod = fixture_object("full-node-p5-jobset");
    let resp = c
        .post(format!("{}/mutate", https_base(&srv)))
        .json(&review_for(&pod, "h2"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.version(), reqwest::Version::HTTP_2);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["response"]["uid"], "h2");
    assert_eq!(body["response"]["allowed"], true);
    srv.handle.shutdown();
}
