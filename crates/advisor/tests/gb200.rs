//! GB200 (p6e-gb200, NVLink domain of 18 instances): the emitted job claims its
//! ComputeDomain's IMEX channel and keeps its pods in one NVLink domain, so the webhook
//! engine, given the ComputeDomain as `trainplace check` is, finds nothing to say about
//! multi-node NVLink.

mod common;

use serde_json::Value;
use trainplace_advisor::artifacts::objects;
use trainplace_advisor::{AdviceRequest, Facts, recommend};
use trainplace_engine::{Claims, Policy, Requester, evaluate};

fn gb200(framework: &str) -> (Value, Value, Value) {
    let policy = Policy::embedded();
    let req = AdviceRequest {
        gpus: Some(72),
        family: Some("gb200".into()),
        duration_days: Some(7.0),
        region: Some("us-east-1".into()),
        framework: Some(framework.into()),
        now: Some(common::NOW.into()),
        ..Default::default()
    };
    let req = req.validate(&policy.catalog, common::now()).unwrap();
    let rec = recommend(&req, &policy.catalog, &Facts::default()).unwrap();
    assert_eq!(
        (rec.instance.name.as_str(), rec.shape.nodes),
        ("p6e-gb200.36xlarge", 18)
    );
    let o = objects(&rec, &policy);
    (
        o.compute_domain.expect("a ComputeDomain"),
        o.job,
        o.nccl_tests.unwrap(),
    )
}

/// The engine's findings for `job` with `domain` submitted beside it.
fn rules(domain: &Value, job: &Value) -> Vec<String> {
    let policy = Policy::embedded();
    let mut claims = Claims::default();
    claims.add([domain, job], "default");
    let who = Requester {
        namespace: "default",
        namespace_labels: None,
        groups: &[],
        inventory: None,
        marks: None,
        now: None,
        claims: Some(&claims),
        updating: None,
    };
    let v = evaluate(job, &policy, &who).unwrap();
    assert!(v.allowed, "{:#?}", v.findings);
    v.findings
        .iter()
        .map(|f| format!("{:?}: {}", f.rule, f.found))
        .collect()
}

#[test]
fn the_gb200_job_claims_the_imex_channel_of_its_compute_domain() {
    for framework in ["pytorchjob", "mpijob", "jobset"] {
        let (domain, job, tests) = gb200(framework);
        assert_eq!(domain["kind"], "ComputeDomain");
        common::assert_valid(
            &common::crd_validator("resource.nvidia.com_computedomains.yaml"),
            &domain,
            "the ComputeDomain",
        );
        assert_eq!(domain["spec"]["numNodes"], 18);
        let template = domain["spec"]["channel"]["resourceClaimTemplate"]["name"].clone();
        for object in [&job, &tests] {
            let text = object.to_string();
            assert!(
                text.contains(&format!("\"resourceClaimTemplateName\":{template}")),
                "{text}"
            );
            assert!(
                text.contains("nvidia.com/gpu.clique"),
                "one NVLink domain: {text}"
            );
            let found = rules(&domain, object);
            assert!(
                found
                    .iter()
                    .all(|f| !f.to_lowercase().contains("imex") && !f.starts_with("DeviceClaims")),
                "{framework}: {found:?}"
            );
        }
    }
}

#[test]
fn without_its_compute_domain_the_engine_says_so() {
    // The same job judged without the ComputeDomain beside it: the claim names a
    // template nothing provides (the check that the channel matters).
    let (_, job, _) = gb200("pytorchjob");
    let empty =
        serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}});
    let policy = Policy::embedded();
    let mut claims = Claims::default();
    claims.add([&empty], "default");
    let who = Requester {
        namespace: "default",
        namespace_labels: None,
        groups: &[],
        inventory: None,
        marks: None,
        now: None,
        claims: Some(&claims),
        updating: None,
    };
    let v = evaluate(&job, &policy, &who).unwrap();
    let text = format!("{:?}", v.findings);
    assert!(
        text.contains("DeviceClaims")
            && text.contains("ResourceClaimTemplate train-compute-domain-channel not found"),
        "{text}"
    );
}

#[test]
fn gb200_blocks_are_listed_as_ultraservers_and_bought_in_the_local_zone() {
    let policy = Policy::embedded();
    let req = AdviceRequest {
        gpus: Some(72),
        family: Some("gb200".into()),
        duration_days: Some(7.0),
        now: Some(common::NOW.into()),
        ..Default::default()
    };
    // Without offerings: the script asks for one u-p6e-gb200x72 (18 instances).
    let advice = trainplace_advisor::advise(
        &AdviceRequest {
            region: Some("us-east-1".into()),
            ..req.clone()
        },
        &trainplace_advisor::RawFacts::default(),
        &policy,
        common::now(),
    )
    .unwrap();
    let script = common::emitted(&advice, "aws-cli.sh");
    assert!(
        script.contains(
            "--ultraserver-type u-p6e-gb200x72 --ultraserver-count 1 --capacity-duration-hours 168"
        ),
        "{script}"
    );
    assert!(
        !script.contains("--instance-type p6e-gb200.36xlarge --instance-count")
            && !script.contains("u-p6e-gb200x36"),
        "{script}"
    );
    // An offering in the Dallas Local Zone names the region and is bought there.
    let offering = serde_json::json!({"CapacityBlockOfferings": [{
        "CapacityBlockOfferingId": "cb-0gb200000000000001", "InstanceType": "p6e-gb200.36xlarge",
        "AvailabilityZone": "us-east-1-dfw-2a", "InstanceCount": 18,
        "StartDate": "2026-12-01T11:30:00Z", "EndDate": "2026-12-08T11:30:00Z",
        "CapacityBlockDurationHours": 168, "UpfrontFee": "700000.00",
        "CurrencyCode": "USD", "Tenancy": "default",
        "UltraserverType": "u-p6e-gb200x72", "UltraserverCount": 1,
    }]});
    let facts = trainplace_advisor::RawFacts {
        offerings: Some(offering.to_string()),
        ..Default::default()
    };
    let advice = trainplace_advisor::advise(&req, &facts, &policy, common::now()).unwrap();
    let rec = &advice.recommendation;
    assert_eq!(rec.request.region, "us-east-1");
    assert_eq!(rec.availability_zone, "us-east-1-dfw-2a");
    let script = common::emitted(&advice, "aws-cli.sh");
    assert!(
        script.contains("--capacity-block-offering-id cb-0gb200000000000001"),
        "{script}"
    );
    let warning = rec
        .warnings
        .iter()
        .find(|w| w.code == "ultraserver-blocks")
        .unwrap();
    assert!(
        warning
            .message
            .contains("self-managed nodeGroup with localZones: [us-east-1-dfw-2a]")
    );
}

#[test]
fn gpu_memory_the_catalog_lacks_is_said_to_be_unknown() {
    let policy = Policy::embedded();
    let req = AdviceRequest {
        gpus: Some(72),
        family: Some("gb200".into()),
        duration_days: Some(7.0),
        region: Some("us-east-1".into()),
        now: Some(common::NOW.into()),
        ..Default::default()
    }
    .validate(&policy.catalog, common::now())
    .unwrap();
    let rec = recommend(&req, &policy.catalog, &Facts::default()).unwrap();
    let first = &rec.reasons[0];
    assert!(!first.contains('?'), "{first}");
    assert!(
        first.contains("GPU memory unknown: the catalog has no sourced figure for this type"),
        "{first}"
    );
    // A type with the figure keeps it.
    let req = AdviceRequest {
        gpus: Some(64),
        family: Some("h100".into()),
        duration_days: Some(7.0),
        region: Some("us-east-1".into()),
        now: Some(common::NOW.into()),
        ..Default::default()
    }
    .validate(&policy.catalog, common::now())
    .unwrap();
    let rec = recommend(&req, &policy.catalog, &Facts::default()).unwrap();
    assert!(
        rec.reasons[0].contains("(80 GiB each)"),
        "{}",
        rec.reasons[0]
    );
}
