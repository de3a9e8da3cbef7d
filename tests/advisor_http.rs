//! The HTTP face through `router(state)` with `oneshot`: status codes, one error shape.

use axum::body::{Body, to_bytes};
use axum::http::{Request, StatusCode, header};
use serde_json::{Value, json};
use tower::ServiceExt;
use trainplace::advisor_server::{AppState, router};

async fn call(method: &str, uri: &str, body: Option<&str>) -> (StatusCode, Vec<u8>) {
    let mut req = Request::builder().method(method).uri(uri);
    if body.is_some() {
        req = req.header(header::CONTENT_TYPE, "application/json");
    }
    let req = req
        .body(body.map_or(Body::empty(), |b| Body::from(b.to_string())))
        .unwrap();
    let res = router(AppState::new()).oneshot(req).await.unwrap();
    let status = res.status();
    (
        status,
        to_bytes(res.into_body(), usize::MAX)
            .await
            .unwrap()
            .to_vec(),
    )
}

async fn json_call(method: &str, uri: &str, body: Option<&str>) -> (StatusCode, Value) {
    let (s, b) = call(method, uri, body).await;
    (
        s,
        serde_json::from_slice(&b)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&b))),
    )
}

#[tokio::test]
async fn recommendation_round_trip_with_offerings() {
    let offerings: Value = serde_json::from_str(include_str!(
        "../crates/advisor/fixtures/capacity-block-offerings.json"
    ))
    .unwrap();
    let body = json!({"gpus": 64, "family": "h100", "durationDays": 7, "framework": "jobset", "offerings": offerings, "now": "2026-11-22T00:00:00Z"});
    let (status, v) = json_call("POST", "/v1/recommendations", Some(&body.to_string())).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    let r = &v["recommendation"];
    assert_eq!(r["instance"]["name"], "p5.48xlarge");
    assert_eq!(r["capacity"]["kind"], "capacity-block");
    assert_eq!(r["availabilityZone"], "us-east-1a");
    let names: Vec<&str> = v["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "eksctl-cluster.yaml",
            "aws-cli.sh",
            "checkpoint-storage.yaml",
            "dcgm-exporter-values.yaml",
            "efa-device-plugin-values.yaml",
            "job-jobset.yaml",
            "nccl-node-check.yaml",
            "nccl-tests-mpijob.yaml"
        ]
    );
    assert!(v["layoutSvg"].as_str().unwrap().starts_with("<svg"));
    assert_eq!(r["request"]["route"], "eksctl");
    // The Karpenter route, asked for in the body: its files instead.
    let mut body = body;
    body["route"] = json!("karpenter");
    let (status, v) = json_call("POST", "/v1/recommendations", Some(&body.to_string())).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    let names: Vec<&str> = v["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "eksctl-cluster.yaml",
            "karpenter.yaml",
            "karpenter-prerequisites.sh",
            "aws-cli.sh",
            "checkpoint-storage.yaml",
            "dcgm-exporter-values.yaml",
            "efa-device-plugin-values.yaml",
            "job-jobset-karpenter.yaml",
            "nccl-node-check-karpenter.yaml",
            "nccl-tests-mpijob-karpenter.yaml"
        ]
    );
    assert!(
        v["recommendation"]["routeSummary"]
            .as_str()
            .is_some_and(|s| s.starts_with("Karpenter NodePools")),
        "{}",
        v["recommendation"]["routeSummary"]
    );
}

#[tokio::test]
async fn bad_requests_are_422_with_field_path() {
    let cases = [
        (json!({"gpus": 0, "durationDays": 1}), "gpus"),
        (json!({"gpus": -3, "durationDays": 1}), "gpus"),
        (
            json!({"gpus": 8, "durationDays": 1, "family": "v100"}),
            "family",
        ),
        (
            json!({"gpus": 8, "durationDays": 1, "region": "mars-1"}),
            "region",
        ),
        (json!({"gpus": "eight", "durationDays": 1}), "gpus"),
        (
            json!({"gpus": 8, "durationDays": 1, "earliestStart": "2026-12-05", "latestEnd": "2026-12-01"}),
            "latestEnd",
        ),
        (
            json!({"gpus": 8, "durationDays": 1, "offerings": {"CapacityBlockOfferings": [{"CapacityBlockOfferingId": "cb-1"}]}}),
            "CapacityBlockOfferings[0].InstanceType",
        ),
        (
            json!({"gpus": 8, "durationDays": 1, "route": "fargate"}),
            "route",
        ),
        (
            json!({"gpus": 64, "family": "h100", "durationDays": 1, "efaDra": true, "route": "karpenter"}),
            "route",
        ),
    ];
    for (body, field) in cases {
        let (status, v) = json_call("POST", "/v1/recommendations", Some(&body.to_string())).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}: {v}");
        assert_eq!(v["error"]["field"], field, "{v}");
        assert_eq!(v["error"]["status"], 422);
        assert!(
            v["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty())
        );
    }
    let (_, v) = json_call(
        "POST",
        "/v1/recommendations",
        Some(r#"{"gpus": 8, "durationDays": 1, "family": "v100"}"#),
    )
    .await;
    assert!(
        v["error"]["allowed"]
            .as_array()
            .unwrap()
            .contains(&json!("h100"))
    );
}

#[tokio::test]
async fn transport_errors_share_the_shape() {
    let (status, v) = json_call("POST", "/v1/recommendations", Some("{not json")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(v["error"]["field"], "$");
    let req = Request::post("/v1/recommendations")
        .header(header::CONTENT_TYPE, "text/plain")
        .body(Body::from("{}"))
        .unwrap();
    let res = router(AppState::new()).oneshot(req).await.unwrap();
    assert_eq!(res.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let v: Value =
        serde_json::from_slice(&to_bytes(res.into_body(), usize::MAX).await.unwrap()).unwrap();
    assert_eq!(v["error"]["status"], 415);
    let (status, v) = json_call("GET", "/nope", None).await;
    assert_eq!(
        (status, v["error"]["status"].as_u64()),
        (StatusCode::NOT_FOUND, Some(404))
    );
}

#[tokio::test]
async fn instance_types_and_page() {
    let (status, v) = json_call("GET", "/v1/instance-types", None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        v.as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "p5.48xlarge" && p["maxEfa"] == 32)
    );
    let (status, page) = call("GET", "/", None).await;
    assert_eq!(status, StatusCode::OK);
    let page = String::from_utf8(page).unwrap();
    assert!(page.contains("<form id=\"advise\"") && page.contains("/v1/recommendations"));
    assert!(
        !page.contains("<script src") && !page.contains("<link rel=\"stylesheet\""),
        "self-contained"
    );
}

#[tokio::test]
async fn node_count_and_cluster_inventory_are_separate_fields() {
    let inventory: Value =
        serde_json::from_str(include_str!("../crates/advisor/fixtures/nodes.json")).unwrap();
    let body = json!({"nodes": 2, "family": "h100", "durationDays": 1, "capacity": "on-demand", "clusterNodes": inventory});
    let (status, v) = json_call("POST", "/v1/recommendations", Some(&body.to_string())).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["recommendation"]["shape"]["nodes"], 2);
    // The inventory was read: the zone with the cluster's p5 nodes is chosen.
    assert_eq!(v["recommendation"]["availabilityZone"], "us-east-1a");
    assert!(
        v["recommendation"]["reasons"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r.as_str().unwrap().contains("already has 2 p5.48xlarge")),
        "{v}"
    );
    // A bad inventory is named as the inventory, not as the request's node count.
    let body = json!({"nodes": 2, "durationDays": 1, "clusterNodes": {"items": 3}});
    let (status, v) = json_call("POST", "/v1/recommendations", Some(&body.to_string())).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        (v["error"]["input"].as_str(), v["error"]["field"].as_str()),
        (Some("nodes"), Some("items")),
        "{v}"
    );
}

/// The page pre-fills no region: a form sent with offerings from another region plans
/// there (the offerings name it), instead of being refused for a region nobody chose.
#[tokio::test]
async fn the_page_region_follows_the_offerings() {
    let (_, page) = call("GET", "/", None).await;
    let page = String::from_utf8(page).unwrap();
    let input = page
        .lines()
        .find(|l| l.contains("id=\"region\""))
        .expect("a region field");
    assert!(!input.contains("value="), "{input}");
    let offerings = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/crates/advisor/fixtures/capacity-block-offerings.json"
    ))
    .unwrap()
    .replace("us-east-1", "us-east-2");
    let offerings: Value = serde_json::from_str(&offerings).unwrap();
    // What the form sends when the region field is left empty: no region key.
    let body = json!({"gpus": 64, "family": "h100", "durationDays": 7, "offerings": offerings, "now": "2026-11-22T00:00:00Z"});
    let (status, v) = json_call("POST", "/v1/recommendations", Some(&body.to_string())).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["recommendation"]["request"]["region"], "us-east-2");
    assert_eq!(v["recommendation"]["availabilityZone"], "us-east-2a");
}
