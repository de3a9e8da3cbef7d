//! The webhook under hostile input and load, over real TLS sockets: bounded size per
//! review, probes that never wait behind reviews, a fast "busy" answer when saturated.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use common::*;
use serde_json::{Value, json};

/// The 8-GPU JobSet pod with `n` containers of one GPU each.
fn wide_pod(n: usize) -> Value {
    let mut pod = fixture_object("full-node-p5-jobset");
    let one =
        json!({"name": "c", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": 1}}});
    pod["spec"]["containers"] = Value::Array(
        (0..n)
            .map(|i| {
                let mut c = one.clone();
                c["name"] = json!(format!("c{i}"));
                c
            })
            .collect(),
    );
    pod
}

/// The UPDATE review of `object` (uid `update`) whose object before the change was `old`.
fn update_of(object: &Value, old: Value) -> Value {
    let mut update = review_for(object, "update");
    update["request"]["operation"] = json!("UPDATE");
    update["request"]["oldObject"] = old;
    update
}

#[tokio::test]
async fn oversized_objects_and_patches_are_denied_with_the_reason() {
    let (srv, pki, _dir) = tls_server(None).await;
    let c = client(&pki.ca_pem);
    let url = format!("{}/mutate", https_base(&srv));

    // 5,000 one-GPU containers: refused before the engine runs, with the count.
    let (status, body) = post(&c, &url, &review_for(&wide_pod(5000), "huge")).await;
    assert_eq!(status, 200);
    let r = &body["response"];
    assert_eq!(
        (r["uid"].as_str(), r["allowed"].as_bool()),
        (Some("huge"), Some(false))
    );
    let msg = r["status"]["message"].as_str().unwrap();
    assert!(
        msg.contains("5000 containers") && msg.contains("--max-containers"),
        "{msg}"
    );
    assert!(r.get("patch").is_none());

    // Within the bounds (64 containers a template): the patch is a base64 string (not
    // one number per byte) that applies to the object.
    let pod = wide_pod(trainplace_engine::bounds::MAX_CONTAINERS);
    let (_, body) = post(&c, &url, &review_for(&pod, "wide")).await;
    assert!(
        body["response"]["patch"].is_string(),
        "{}",
        body["response"]
    );
    let mutated = apply_response_patch(&pod, &body);
    assert_eq!(mutated["spec"]["hostIPC"], true);
    srv.handle.shutdown();

    // A patch over the ceiling is denied, naming the flag.
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new("ca");
    let mut cfg = config(Some(pki.write_leaf(dir.path())), None);
    cfg.limits.max_patch_bytes = 2000;
    let srv = serve(cfg).await;
    let c = client(&pki.ca_pem);
    let pod = fixture_object("full-node-p5-jobset");
    let (_, body) = post(
        &c,
        &format!("{}/mutate", https_base(&srv)),
        &review_for(&pod, "p"),
    )
    .await;
    let msg = body["response"]["status"]["message"].as_str().unwrap();
    assert_eq!(body["response"]["allowed"], false);
    assert!(
        msg.contains("larger than 2000 bytes (--max-patch-bytes)"),
        "{msg}"
    );
    srv.handle.shutdown();
}

/// The median of `times` (not empty).
fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

/// Probes are answered while heavy reviews keep every review thread busy. Measured
/// against the reviews themselves, not the clock alone: a probe waiting behind
/// reviews (as on a server whose async workers ran the reviews) takes at least a
/// review's time, while a probe served beside them takes a connection's. Both slow
/// down together on a busy machine, so the comparison holds on any machine; the
/// kubelet's own limit (1 s, its default probe timeout) is the absolute bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_stay_fast_while_heavy_reviews_run() {
    let (srv, pki, _dir) = tls_server(None).await;
    let url = format!("{}/mutate", https_base(&srv));
    // Wide, and each container's shell line read in full: a review that takes clearly
    // longer than a connection's answer on any machine.
    let mut pod = wide_pod(240);
    let line = format!(
        "export NNODES=1; {}torchrun --nnodes=$NNODES t.py",
        "cd /w && ".repeat(200)
    );
    for c in pod["spec"]["containers"].as_array_mut().unwrap() {
        c["command"] = json!(["bash", "-c", line]);
    }
    let heavy = serde_json::to_vec(&review_for(&pod, "heavy")).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let answered = Arc::new(AtomicU32::new(0));
    let mut load = Vec::new();
    for _ in 0..8 {
        let (c, url, heavy) = (client(&pki.ca_pem), url.clone(), heavy.clone());
        let (stop, answered) = (stop.clone(), answered.clone());
        load.push(tokio::spawn(async move {
            let mut took = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let t = Instant::now();
                let r = post_text(&c, &url, heavy.clone()).await;
                if let Ok(r) = r
                    && r.status().is_success()
                    && r.bytes().await.is_ok()
                {
                    took.push(t.elapsed());
                    answered.fetch_add(1, Ordering::Relaxed);
                }
            }
            took
        }));
    }
    // Probe once the load runs: every loop has had an answer.
    let started = Instant::now();
    while answered.load(Ordering::Relaxed) < 8 {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the heavy load did not start"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // A fresh connection per probe, as the kubelet makes.
    let mut probes = Vec::new();
    for i in 0..20 {
        let path = if i % 2 == 0 { "healthz" } else { "metrics" };
        let t = Instant::now();
        let r = reqwest::get(format!("http://{}/{path}", srv.probe_addr))
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        r.bytes().await.unwrap();
        probes.push(t.elapsed());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.store(true, Ordering::Relaxed);
    let mut reviews = Vec::new();
    for l in load {
        reviews.extend(l.await.unwrap());
    }
    let slowest = *probes.iter().max().unwrap();
    let (probe, review) = (median(probes), median(reviews.clone()));
    assert!(
        probe < review,
        "the median probe took {probe:?}, the median heavy review {review:?}: probes wait behind reviews"
    );
    assert!(
        slowest < Duration::from_secs(1),
        "a probe took {slowest:?} while {} heavy reviews ran: past the kubelet's timeout",
        reviews.len()
    );
    srv.handle.shutdown();
}

#[tokio::test]
async fn a_saturated_server_answers_busy_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new("ca");
    let mut cfg = config(Some(pki.write_leaf(dir.path())), None);
    cfg.review_concurrency = 1;
    cfg.review_queue = 0;
    let srv = serve(cfg).await;
    let url = format!("{}/mutate", https_base(&srv));
    let heavy = serde_json::to_vec(&review_for(&wide_pod(240), "heavy")).unwrap();
    let mut tasks = Vec::new();
    for _ in 0..12 {
        let (c, url, heavy) = (client(&pki.ca_pem), url.clone(), heavy.clone());
        tasks.push(tokio::spawn(async move {
            let mut seen = Vec::new();
            for _ in 0..10 {
                let r = post_text(&c, &url, heavy.clone()).await.unwrap();
                let status = r.status().as_u16();
                let retry = r.headers().get("retry-after").is_some();
                let text = r.text().await.unwrap();
                seen.push((status, retry, text));
            }
            seen
        }));
    }
    let mut ok = 0;
    let mut busy = 0;
    for t in tasks {
        for (status, retry, text) in t.await.unwrap() {
            match status {
                200 => ok += 1,
                503 => {
                    busy += 1;
                    assert!(retry, "503 without Retry-After");
                    assert!(
                        text.contains("saturated") && text.contains("--review-concurrency"),
                        "{text}"
                    );
                }
                other => panic!("unexpected status {other}: {text}"),
            }
        }
    }
    assert!(ok > 0 && busy > 0, "ok={ok} busy={busy}");
    let m = metrics_text(srv.probe_addr).await;
    assert!(
        m.contains(&format!("trainplace_reviews_saturated_total {busy}")),
        "{m}"
    );
    srv.handle.shutdown();
}

/// An UPDATE carries the object before the change as `oldObject`, as large as the
/// object. The mutating webhook reads past it without building it: the answer is the object's,
/// whatever the old one holds, even one nested deeper than a JSON tree may be (a webhook
/// parsing the whole review into a tree would answer HTTP 400).
#[tokio::test]
async fn an_update_is_answered_from_its_object_without_building_the_old_one() {
    let (srv, pki, _dir) = tls_server(None).await;
    let c = client(&pki.ca_pem);
    let url = format!("{}/mutate", https_base(&srv));
    // A workload whose templates may change on UPDATE (a JobSet's may not: its UPDATE gets
    // no layout); the mutating webhook never patches a pod on UPDATE.
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/workloads/pytorchjob-full.yaml");
    let case: Value = serde_yaml_ng::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let pod = case["object"].clone();
    let (status, create) = post(&c, &url, &review_for(&pod, "create")).await;
    assert_eq!(status, 200);
    assert!(create["response"]["patch"].is_string(), "{create}");

    let mut deep = json!("leaf");
    for _ in 0..200 {
        deep = json!([deep]);
    }
    let update = update_of(&pod, deep);
    let bytes = serde_json::to_vec(&update).unwrap();
    let tree = serde_json::from_slice::<Value>(&bytes).unwrap_err();
    assert!(tree.to_string().contains("recursion limit"), "{tree}");
    let (status, body) = post(&c, &url, &update).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["response"]["uid"], "update");
    assert_eq!(body["response"]["patch"], create["response"]["patch"]);

    // Broken JSON inside oldObject is still broken JSON: HTTP 400, as for any body.
    let text = serde_json::to_string(&review_for(&pod, "broken"))
        .unwrap()
        .replacen("\"request\":{", "\"request\":{\"oldObject\":{,},", 1);
    let r = post_text(&c, &url, text).await.unwrap();
    assert_eq!(r.status().as_u16(), 400);
    srv.handle.shutdown();
}

/// Nesting is bounded wherever the webhook reads it. A body nested a million arrays
/// deep (2 MB, within `--max-body`) is refused with HTTP 400 naming the limit in the
/// object, and denied as a review of the wrong shape as the whole body; in `oldObject`,
/// which is read past, it changes nothing; and the webhook goes on answering. A parser
/// that recursed once per level without a limit would abort the process here
/// (sonic-rs's tree parser overflowed a 2 MiB stack at 10,000 levels;
/// docs/performance-history.md).
#[tokio::test]
async fn nesting_a_million_deep_is_refused_or_read_past_and_the_webhook_stays_up() {
    let (srv, pki, _dir) = tls_server(None).await;
    let c = client(&pki.ca_pem);
    let url = format!("{}/mutate", https_base(&srv));
    let pod = fixture_object("full-node-p5-jobset");
    let (_, create) = post(&c, &url, &review_for(&pod, "create")).await;
    let deep = format!("{}1{}", "[".repeat(1_000_000), "]".repeat(1_000_000));
    // `review` with `"@"` where the deep value goes.
    let with_deep = |review: &Value| {
        serde_json::to_string(review)
            .unwrap()
            .replacen("\"@\"", &deep, 1)
    };

    let mut in_object = pod.clone();
    in_object["spec"]["extra"] = json!("@");
    let r = post_text(&c, &url, with_deep(&review_for(&in_object, "deep")))
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    let text = r.text().await.unwrap();
    assert!(text.contains("recursion limit exceeded"), "{text}");

    // The whole body an array: JSON of the wrong shape, answered from its first level.
    let r = post_text(&c, &url, deep.clone()).await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["response"]["allowed"], false, "{body}");

    // A pod UPDATE with a million-deep oldObject: read past, answered (a pod's layout
    // is never patched on UPDATE).
    let update = update_of(&pod, json!("@"));
    let r = post_text(&c, &url, with_deep(&update)).await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["response"]["allowed"], true, "{body}");
    assert!(body["response"]["patch"].is_null(), "{body}");

    let (status, again) = post(&c, &url, &review_for(&pod, "again")).await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["response"]["patch"], create["response"]["patch"]);
    srv.handle.shutdown();
}
