//! Very large asks are planned within EKS, EC2 and VPC limits (nodegroups of at most 450
//! nodes, a placement group each, /18 subnets for 32 EFA addresses per node, the vCPU
//! quota checked) or refused with the reason.

mod common;

use common::{assert_valid, eksctl_validator};
use serde_json::Value;
use trainplace_advisor::{AdviceRequest, RawFacts, advise};
use trainplace_engine::Policy;

fn ask(gpus: i64) -> Result<trainplace_advisor::Advice, trainplace_advisor::InputError> {
    ask_for(AdviceRequest {
        gpus: Some(gpus),
        family: Some("h100".into()),
        ..Default::default()
    })
}

fn ask_for(
    req: AdviceRequest,
) -> Result<trainplace_advisor::Advice, trainplace_advisor::InputError> {
    let req = AdviceRequest {
        duration_days: Some(14.0),
        capacity: Some("on-demand".into()),
        region: Some("us-east-1".into()),
        now: Some(common::NOW.into()),
        ..req
    };
    advise(
        &req,
        &RawFacts::default(),
        &Policy::embedded(),
        common::now(),
    )
}

/// Each GPU nodegroup's /18 subnet in us-east-1a, from an extra CIDR block, big enough for
/// its nodes' addresses; their placement groups.
fn placement_groups_with_own_subnets(gpu: &[Value], vpc: &Value) -> Vec<String> {
    let mut groups = Vec::new();
    for ng in gpu {
        let subnet = ng["subnets"][0].as_str().unwrap();
        let spec = &vpc["subnets"]["private"][subnet];
        assert_eq!(spec["az"], "us-east-1a", "{subnet}");
        let cidr = spec["cidr"].as_str().unwrap();
        assert!(cidr.ends_with("/18"), "{cidr}");
        let block = format!(
            "{}.0.0/16",
            cidr.split('.').take(2).collect::<Vec<_>>().join(".")
        );
        assert!(
            vpc["extraCIDRs"]
                .as_array()
                .unwrap()
                .iter()
                .any(|b| b == &block),
            "{cidr} in an extra CIDR block"
        );
        // 32 EFA addresses and the pod's per node fit the /18's 16,379.
        assert!(ng["desiredCapacity"].as_u64().unwrap() * 33 <= 16_379);
        groups.push(ng["placement"]["groupName"].as_str().unwrap().to_string());
    }
    groups
}

#[test]
fn ten_thousand_h100_are_planned_within_the_limits() {
    let advice = ask(10_000).unwrap();
    let rec = &advice.recommendation;
    assert_eq!(
        (rec.instance.name.as_str(), rec.shape.nodes),
        ("p5.48xlarge", 1250)
    );
    let config: Value =
        serde_yaml_ng::from_str(common::emitted(&advice, "eksctl-cluster.yaml")).unwrap();
    assert_valid(
        &eksctl_validator(),
        &config,
        "10,000 GPUs: eksctl-cluster.yaml",
    );
    let gpu = common::gpu_nodegroups(&config);
    let sizes: Vec<u64> = gpu
        .iter()
        .map(|ng| ng["desiredCapacity"].as_u64().unwrap())
        .collect();
    assert_eq!(
        sizes,
        [417, 417, 416],
        "nodegroups of at most 450 (EKS quota)"
    );
    let vpc = &config["vpc"];
    assert!(
        config.get("availabilityZones").is_none(),
        "subnets name the zones"
    );
    let mut groups = placement_groups_with_own_subnets(&gpu, vpc);
    groups.sort();
    groups.dedup();
    assert_eq!(groups.len(), 3, "a cluster placement group per nodegroup");
    let subnets: Vec<&Value> = gpu.iter().map(|ng| &ng["subnets"][0]).collect();
    assert!(subnets[0] != subnets[1] && subnets[1] != subnets[2]);
    let codes: Vec<&str> = rec.warnings.iter().map(|w| w.code).collect();
    for code in ["nodegroups-split", "subnet-addresses", "vcpu-quota"] {
        assert!(codes.contains(&code), "{code} in {codes:?}");
    }
    let script = common::emitted(&advice, "aws-cli.sh");
    let create = script.find("eksctl create cluster").unwrap();
    for pg in &groups {
        let made = script
            .find(&format!("--group-name {pg} --strategy cluster"))
            .unwrap();
        assert!(made < create, "{pg} before the cluster");
    }
    let quota = script.find("--quota-code L-417A185B").unwrap();
    assert!(
        quota < create && script.contains("-lt 240000 ]"),
        "vCPU quota checked first"
    );
    // The Karpenter route's placement group is one its aws-cli.sh creates.
    let on_karpenter = ask_for(AdviceRequest {
        gpus: Some(10_000),
        family: Some("h100".into()),
        route: Some("karpenter".into()),
        ..Default::default()
    })
    .unwrap();
    let karpenter = common::emitted(&on_karpenter, "karpenter.yaml");
    assert!(
        karpenter.contains(&format!("name: {}", groups[0])),
        "{karpenter}"
    );
    assert!(
        common::emitted(&on_karpenter, "aws-cli.sh")
            .contains(&format!("--group-name {} --strategy cluster", groups[0]))
    );
}

#[test]
fn an_ask_beyond_one_cluster_is_refused_with_the_reason() {
    // 10,000 p5.48xlarge (80,000 GPUs): 23 nodegroups of at most 450, more than the 16
    // GPU subnets a VPC's 5 CIDR blocks hold.
    let err = ask_for(AdviceRequest {
        nodes: Some(10_000),
        instance_type: Some("p5.48xlarge".into()),
        ..Default::default()
    })
    .unwrap_err()
    .to_string();
    for needle in [
        "request nodes:",
        "23 nodegroups",
        "450",
        "/18",
        "at most 7200 nodes (57600 accelerators)",
    ] {
        assert!(err.contains(needle), "{needle}: {err}");
    }
}

#[test]
fn small_plans_keep_eksctl_defaults() {
    let advice = ask(64).unwrap();
    let config: Value =
        serde_yaml_ng::from_str(common::emitted(&advice, "eksctl-cluster.yaml")).unwrap();
    assert!(config.get("vpc").is_none());
    assert_eq!(common::gpu_nodegroups(&config).len(), 1);
    assert_eq!(
        config["managedNodeGroups"][0]["placement"]["groupName"],
        "training-p5-48xlarge"
    );
    let codes: Vec<&str> = advice
        .recommendation
        .warnings
        .iter()
        .map(|w| w.code)
        .collect();
    assert!(!codes.contains(&"nodegroups-split") && !codes.contains(&"subnet-addresses"));
}
