//! Recommendations end to end on the fixtures: choice, plan, cost, warnings, errors.

mod common;

use common::*;
use trainplace_advisor::aws::instance_types::parse_instance_types;
use trainplace_advisor::aws::offerings::parse_offerings;
use trainplace_advisor::inventory::{KubectlNodesJson, NodeSource};
use trainplace_advisor::recommend::CapacityPlan;
use trainplace_advisor::{AdviceRequest, Facts, InputSource, recommend};
use trainplace_catalog::Catalog;

fn codes(r: &trainplace_advisor::Recommendation) -> Vec<&str> {
    r.warnings.iter().map(|w| w.code).collect()
}

#[test]
fn h100_week_buys_week_blocks_in_one_zone() {
    let r = recommendation("h100-blocks", "pytorchjob");
    assert_eq!(r.instance.name, "p5.48xlarge");
    assert_eq!(
        (r.shape.nodes, r.shape.gpus_per_node, r.shape.efa_per_node),
        (8, 8, 32)
    );
    assert_eq!((r.pods, r.processes_per_pod), (8, 8));
    assert_eq!(r.availability_zone, "us-east-1a");
    let CapacityPlan::CapacityBlock {
        block_hours: 168,
        blocks: Some(plan),
    } = &r.capacity
    else {
        panic!("{:?}", r.capacity)
    };
    // The cheapest cover of 7 days: the 7-day block plus one 8-day block.
    let ids: Vec<_> = plan.offerings.iter().map(|o| o.id.as_str()).collect();
    assert_eq!(ids, ["cb-0f1a2b3c4d5e60001", "cb-0f1a2b3c4d5e60002"]);
    assert_eq!(r.placement_group, None, "capacity blocks are co-located");
    assert_eq!(r.cost.estimate_usd, Some(45308.16));
    // Alternatives with their cost: the longer blocks that also hold the EKS
    // scale-down, and on-demand.
    let opts: Vec<(&str, bool, Option<f64>)> = r
        .capacity_options
        .iter()
        .map(|o| (o.kind, o.chosen, o.usd))
        .collect();
    assert_eq!(
        opts,
        [
            ("capacity-block", true, Some(45308.16)),
            ("capacity-block", false, Some(48328.70)),
            ("on-demand", false, r.cost.on_demand_usd),
        ]
    );
    assert_eq!(
        r.capacity_options[1].offerings,
        ["cb-0f1a2b3c4d5e60002", "cb-0f1a2b3c4d5e60003"]
    );
    assert_eq!(
        r.cost.on_demand_usd,
        Some(55.04 * 8.0 * 168.0).map(|x| (x * 100.0_f64).round() / 100.0)
    );
    assert_eq!(r.bandwidth.class, "nvlink+efa-rdma");
    assert_eq!(codes(&r), ["capacity-block-end", "efa-single-az"]);
    let m = &r.warnings[0].message;
    assert!(
        m.contains("checkpoint deadline 2026-12-08T10:50:00Z"),
        "{m}"
    );
    assert!(m.contains("run 40 min past that"), "{m}");
}

#[test]
fn g_family_has_no_blocks_and_gets_a_placement_group() {
    let (mut req, facts) = scenario("l40s-on-demand");
    req.capacity = Some("capacity-block".into());
    let c = Catalog::embedded();
    let r = recommend(&req.validate(&c, common::now()).unwrap(), &c, &facts).unwrap();
    assert_eq!(r.instance.name, "g6e.48xlarge");
    assert_eq!(r.capacity, CapacityPlan::OnDemand);
    assert_eq!(r.availability_zone, "us-east-1b");
    assert_eq!(r.placement_group.as_deref(), Some("training-g6e-48xlarge"));
    assert!(codes(&r).contains(&"no-capacity-blocks"));
    assert!(r.warnings.iter().any(|w| w.message.contains("G families")));
}

#[test]
fn p4d_warns_about_efa_to_other_types() {
    let r = recommendation("a100-odcr", "pytorchjob");
    assert_eq!(r.instance.name, "p4d.24xlarge");
    assert!(
        matches!(&r.capacity, CapacityPlan::Odcr { reservation_id } if reservation_id == "cr-0123456789abcdef0")
    );
    assert!(codes(&r).contains(&"p4d-efa-isolated"));
    assert!(codes(&r).contains(&"zone-assumed"));
}

#[test]
fn week_long_job_buys_the_week_long_block() {
    let c = Catalog::embedded();
    let only_7d = parse_offerings(&offerings_fixture())
        .unwrap()
        .into_iter()
        .filter(|o| o.duration_hours == 168)
        .collect();
    let req = AdviceRequest {
        gpus: Some(32),
        family: Some("h100".into()),
        duration_days: Some(7.0),
        ..Default::default()
    };
    let facts = Facts {
        offerings: Some(only_7d),
        ..Default::default()
    };
    let r = recommend(&req.validate(&c, common::now()).unwrap(), &c, &facts).unwrap();
    let CapacityPlan::CapacityBlock {
        block_hours: 168,
        blocks: Some(plan),
    } = &r.capacity
    else {
        panic!("{:?}", r.capacity)
    };
    assert_eq!(plan.offerings[0].id, "cb-0f1a2b3c4d5e60001");
    assert_eq!(codes(&r), ["capacity-block-end", "efa-single-az"]);
    // No longer block in the offerings: on-demand is the only alternative.
    assert_eq!(r.capacity_options.len(), 2);
    assert_eq!(r.capacity_options[1].kind, "on-demand");
}

#[test]
fn rounding_budget_and_inventory() {
    let c = Catalog::embedded();
    let req = AdviceRequest {
        gpus: Some(12),
        family: Some("h100".into()),
        duration_hours: Some(5.0),
        capacity: Some("on-demand".into()),
        ..Default::default()
    };
    let nodes = KubectlNodesJson(fixture("nodes.json")).nodes().unwrap();
    let facts = Facts {
        nodes: Some(nodes),
        ..Default::default()
    };
    let r = recommend(&req.validate(&c, common::now()).unwrap(), &c, &facts).unwrap();
    assert_eq!(
        (r.shape.nodes, r.shape.total_gpus, r.shape.rounded_up),
        (2, 16, true)
    );
    assert_eq!(
        r.availability_zone, "us-east-1a",
        "zone of the existing p5 nodes"
    );
    assert!(r.reasons.iter().any(|x| x.contains("gpu-p5")));
    assert!(codes(&r).contains(&"rounded-up"), "{:?}", codes(&r));
    // A budget the plan exceeds refuses it, with the field.
    let over = AdviceRequest {
        budget_usd: Some(100.0),
        ..req
    };
    let e = recommend(&over.validate(&c, common::now()).unwrap(), &c, &facts).unwrap_err();
    assert_eq!(e.field, "budgetUsd");
    assert!(e.message.contains("over the budget of $100.00"), "{e}");
}

#[test]
fn instance_types_limit_and_cross_check() {
    let c = Catalog::embedded();
    let types = parse_instance_types(&fixture("instance-types.json")).unwrap();
    let req = AdviceRequest {
        gpus: Some(16),
        duration_days: Some(1.0),
        ..Default::default()
    };
    let facts = Facts {
        instance_types: Some(types),
        ..Default::default()
    };
    let r = recommend(&req.validate(&c, common::now()).unwrap(), &c, &facts).unwrap();
    assert_eq!(r.instance.name, "p5.48xlarge");
    assert!(r.alternatives.iter().all(|a| {
        ["p5en.48xlarge", "p4d.24xlarge", "g6e.48xlarge"].contains(&a.instance_type.as_str())
    }));
}

#[test]
fn bad_input_names_the_field() {
    let c = Catalog::embedded();
    let base = AdviceRequest {
        gpus: Some(8),
        duration_days: Some(1.0),
        ..Default::default()
    };
    let cases: Vec<(AdviceRequest, &str)> = vec![
        (
            AdviceRequest {
                gpus: Some(0),
                ..base.clone()
            },
            "gpus",
        ),
        (
            AdviceRequest {
                gpus: Some(-8),
                ..base.clone()
            },
            "gpus",
        ),
        (
            AdviceRequest {
                gpus: None,
                ..base.clone()
            },
            "gpus",
        ),
        (
            AdviceRequest {
                family: Some("v100".into()),
                ..base.clone()
            },
            "family",
        ),
        (
            AdviceRequest {
                region: Some("us-middle-1".into()),
                ..base.clone()
            },
            "region",
        ),
        (
            AdviceRequest {
                availability_zones: vec!["us-east-1a".into(), "eu-west-1a".into()],
                ..base.clone()
            },
            "availabilityZones[1]",
        ),
        (
            AdviceRequest {
                earliest_start: Some("2026-12-10".into()),
                latest_end: Some("2026-12-01".into()),
                ..base.clone()
            },
            "latestEnd",
        ),
        (
            AdviceRequest {
                earliest_start: Some("soon".into()),
                ..base.clone()
            },
            "earliestStart",
        ),
        (
            AdviceRequest {
                duration_days: Some(0.0),
                ..base.clone()
            },
            "durationDays",
        ),
        (
            AdviceRequest {
                framework: Some("ray".into()),
                ..base.clone()
            },
            "framework",
        ),
        (
            AdviceRequest {
                capacity: Some("odcr".into()),
                ..base.clone()
            },
            "reservationId",
        ),
        (
            AdviceRequest {
                instance_type: Some("p5.48xlarge".into()),
                family: Some("a100".into()),
                ..base.clone()
            },
            "instanceType",
        ),
        (
            AdviceRequest {
                job_name: Some("My_Job".into()),
                ..base.clone()
            },
            "jobName",
        ),
    ];
    for (req, field) in cases {
        let err = req.validate(&c, common::now()).unwrap_err();
        assert_eq!(
            (err.input, err.field.as_str()),
            (InputSource::Request, field),
            "{err}"
        );
    }
    let err = AdviceRequest {
        family: Some("v100".into()),
        ..base
    }
    .validate(&c, common::now())
    .unwrap_err();
    assert!(err.allowed.contains(&"h100".to_string()) && err.allowed.contains(&"any".to_string()));
}

#[test]
fn trainium_uses_neuron_devices_and_skips_nccl_tests() {
    let c = trainplace_engine::Policy::embedded();
    let req = AdviceRequest {
        gpus: Some(32),
        family: Some("trainium".into()),
        duration_days: Some(2.0),
        ..Default::default()
    };
    let advice = trainplace_advisor::advise(&req, &Default::default(), &c, common::now()).unwrap();
    assert_eq!(
        advice.recommendation.instance.accelerator_resource,
        "aws.amazon.com/neuron"
    );
    let names: Vec<&str> = advice.artifacts.iter().map(|a| a.name.as_str()).collect();
    assert!(!names.contains(&"nccl-tests-mpijob.yaml"), "{names:?}");
    let job = common::emitted(&advice, "job-pytorchjob.yaml");
    assert!(
        job.contains("aws.amazon.com/neuron: 16") && !job.contains("NCCL_SOCKET_IFNAME"),
        "{job}"
    );
}

#[test]
fn region_comes_from_the_offerings_or_is_refused_with_the_flag() {
    let policy = trainplace_engine::Policy::embedded();
    let east2 = offerings_fixture().replace("us-east-1", "us-east-2");
    let facts = trainplace_advisor::RawFacts {
        offerings: Some(east2.clone()),
        ..Default::default()
    };
    let req = AdviceRequest {
        gpus: Some(64),
        family: Some("h100".into()),
        duration_days: Some(7.0),
        ..Default::default()
    };
    let advice = trainplace_advisor::advise(&req, &facts, &policy, common::now()).unwrap();
    let r = &advice.recommendation;
    assert_eq!(r.request.region, "us-east-2");
    assert_eq!(r.availability_zone, "us-east-2a");
    assert!(matches!(
        r.capacity,
        CapacityPlan::CapacityBlock {
            blocks: Some(_),
            ..
        }
    ));
    // An explicit region without any offering in it is refused, naming the flag.
    let err = trainplace_advisor::advise(
        &AdviceRequest {
            region: Some("us-east-1".into()),
            ..req.clone()
        },
        &facts,
        &policy,
        common::now(),
    )
    .unwrap_err();
    assert_eq!(err.field, "region");
    assert!(err.message.contains("--region us-east-2"), "{err}");
    // Offerings from two regions and no region: say which flag picks one.
    let mixed = offerings_fixture().replacen("us-east-1a", "us-west-2a", 1);
    let err = trainplace_advisor::advise(
        &req,
        &trainplace_advisor::RawFacts {
            offerings: Some(mixed),
            ..Default::default()
        },
        &policy,
        common::now(),
    )
    .unwrap_err();
    assert!(err.message.contains("pass --region"), "{err}");
}

#[test]
fn more_than_64_instances_split_into_blocks_and_nodegroups() {
    let c = trainplace_engine::Policy::embedded();
    let req = AdviceRequest {
        gpus: Some(800),
        family: Some("h100".into()),
        duration_days: Some(7.0),
        ..Default::default()
    };
    let r = recommend(
        &req.validate(&c.catalog, common::now()).unwrap(),
        &c.catalog,
        &Facts::default(),
    )
    .unwrap();
    assert_eq!(r.shape.nodes, 100);
    let o = trainplace_advisor::artifacts::objects(&r, &c);
    let sizes: Vec<u64> = common::gpu_nodegroups(&o.cluster_config)
        .iter()
        .map(|ng| ng["desiredCapacity"].as_u64().unwrap())
        .collect();
    assert_eq!(sizes, [64, 36]);
    let script = trainplace_advisor::artifacts::awscli::script(&r);
    assert!(
        script.contains("--instance-count 64 ") && script.contains("--instance-count 36 "),
        "{script}"
    );
    // Beyond 256 instances no set of blocks can hold the job: say so, plan on-demand.
    let req = AdviceRequest {
        gpus: Some(8 * 257),
        ..req
    };
    let r = recommend(
        &req.validate(&c.catalog, common::now()).unwrap(),
        &c.catalog,
        &Facts::default(),
    )
    .unwrap();
    assert_eq!(r.capacity, CapacityPlan::OnDemand);
    assert!(
        codes(&r).contains(&"too-many-for-capacity-blocks"),
        "{:?}",
        r.warnings
    );
}

#[test]
fn offerings_appended_per_block_size_parse_as_one_list() {
    let one = offerings_fixture();
    let both = format!("{one}\n{one}");
    assert_eq!(
        parse_offerings(&both).unwrap().len(),
        2 * parse_offerings(&one).unwrap().len()
    );
    assert!(parse_offerings("").is_err());
    assert!(parse_offerings(&format!("{one} {{")).is_err());
}

fn at(now: &str, req: &AdviceRequest, facts: &Facts) -> trainplace_advisor::Recommendation {
    let c = Catalog::embedded();
    let valid = req.validate_at(&c, now.parse().unwrap()).unwrap();
    recommend(&valid, &c, facts).unwrap()
}

#[test]
fn start_in_the_past_moves_to_now_and_an_ended_window_is_refused() {
    let req = AdviceRequest {
        gpus: Some(8),
        family: Some("h100".into()),
        duration_days: Some(1.0),
        earliest_start: Some("2026-11-01".into()),
        ..Default::default()
    };
    let r = at("2026-11-22T00:00:00Z", &req, &Facts::default());
    assert_eq!(
        r.request.earliest_start,
        Some("2026-11-22T00:00:00Z".parse().unwrap())
    );
    assert!(codes(&r).contains(&"start-moved"), "{:?}", r.warnings);
    let req = AdviceRequest {
        latest_end: Some("2026-11-10".into()),
        ..req
    };
    let err = req
        .validate_at(
            &Catalog::embedded(),
            "2026-11-22T00:00:00Z".parse().unwrap(),
        )
        .unwrap_err();
    assert_eq!(err.field, "latestEnd");
}

#[test]
fn blocks_more_than_8_weeks_ahead_cannot_be_bought_today() {
    let req = AdviceRequest {
        gpus: Some(32),
        family: Some("h100".into()),
        duration_days: Some(7.0),
        ..Default::default()
    };
    let facts = Facts {
        offerings: Some(parse_offerings(&offerings_fixture()).unwrap()),
        ..Default::default()
    };
    // 2026-09-01 + 8 weeks = 2026-10-27: the December offerings are not for sale yet.
    let r = at("2026-09-01T00:00:00Z", &req, &facts);
    assert_eq!(r.capacity, CapacityPlan::OnDemand);
    let fits = r
        .warnings
        .iter()
        .find(|w| w.code == "no-capacity-block-fits")
        .unwrap();
    assert!(
        fits.message.contains("more than 8 weeks"),
        "{}",
        fits.message
    );
    // Without offerings, a start beyond 8 weeks says when the block can be bought.
    let req = AdviceRequest {
        earliest_start: Some("2027-03-01".into()),
        ..req
    };
    let r = at("2026-11-22T00:00:00Z", &req, &Facts::default());
    let w = r
        .warnings
        .iter()
        .find(|w| w.code == "capacity-block-too-early")
        .unwrap();
    assert!(
        w.message.contains("from 2027-01-04T00:00:00Z"),
        "{}",
        w.message
    );
}

#[test]
fn existing_cluster_nodes_come_before_buying() {
    let nodes = KubectlNodesJson(fixture("nodes.json")).nodes().unwrap();
    let facts = Facts {
        nodes: Some(nodes),
        offerings: Some(parse_offerings(&offerings_fixture()).unwrap()),
        ..Default::default()
    };
    let req = AdviceRequest {
        nodes: Some(2),
        family: Some("h100".into()),
        duration_days: Some(2.0),
        ..Default::default()
    };
    let r = at(common::NOW, &req, &facts);
    assert!(
        matches!(&r.capacity, CapacityPlan::Existing { nodes: 2, groups } if groups == &["gpu-p5"]),
        "{:?}",
        r.capacity
    );
    assert_eq!(r.availability_zone, "us-east-1a");
    let policy = trainplace_engine::Policy::embedded();
    let o = trainplace_advisor::artifacts::objects(&r, &policy);
    assert!(
        o.cluster_config["managedNodeGroups"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    let script = trainplace_advisor::artifacts::awscli::script(&r);
    assert!(
        script.contains("Nothing to buy") && !script.contains("eksctl create cluster"),
        "{script}"
    );
    // More nodes than the cluster has: get new ones. For 4 x 48 h on-demand
    // ($10,567.68) is cheaper than the only block that fits (4 x 168 h, $21,143.81).
    let r = at(
        common::NOW,
        &AdviceRequest {
            nodes: Some(4),
            ..req
        },
        &facts,
    );
    assert!(
        matches!(r.capacity, CapacityPlan::OnDemand)
            && r.reasons
                .iter()
                .any(|x| x.contains("on-demand, the cheaper")),
        "{:?}",
        r.capacity
    );
}

#[test]
fn trn1n_is_in_the_catalog_with_its_16_efa() {
    let c = Catalog::embedded();
    let req = AdviceRequest {
        nodes: Some(4),
        instance_type: Some("trn1n.32xlarge".into()),
        duration_days: Some(2.0),
        ..Default::default()
    };
    let r = recommend(
        &req.validate(&c, common::now()).unwrap(),
        &c,
        &Facts::default(),
    )
    .unwrap();
    assert_eq!(
        (
            r.shape.efa_per_node,
            r.processes_per_pod,
            r.shape.total_gpus
        ),
        (16, 32, 64)
    );
    // Not sold as Capacity Blocks: on-demand, in a placement group.
    assert_eq!(r.capacity, CapacityPlan::OnDemand);
    assert_eq!(r.cost.on_demand_usd, Some(24.78 * 4.0 * 48.0));
}

#[test]
fn alternatives_keep_the_layout_or_are_marked_slower_with_the_cost() {
    let c = Catalog::embedded();
    let plan = |gpus: i64, family: &str| {
        let req = AdviceRequest {
            gpus: Some(gpus),
            family: Some(family.into()),
            duration_days: Some(1.0),
            ..Default::default()
        };
        recommend(
            &req.validate(&c, common::now()).unwrap(),
            &c,
            &Facts::default(),
        )
        .unwrap()
    };
    // 16 H100: 16 single-GPU nodes are no equal of 2 NVLink nodes.
    let r = plan(16, "h100");
    let a = &r.alternatives[0];
    assert_eq!((a.instance_type.as_str(), a.nodes), ("p5.4xlarge", 16));
    assert!(!a.same_layout);
    let w = a.slower.as_deref().unwrap();
    assert!(
        w.starts_with("slower layout: pcie+efa-rdma over 16 node(s) of 1 accelerator(s) instead of nvlink+efa-rdma over 2")
            && w.contains("12.5 GB/s, against 200..360 GB/s"),
        "{w}"
    );
    // 4 L40S: one 4-GPU node; other one-node types keep the layout and come first, four
    // 1-GPU nodes without EFA do not.
    let r = plan(4, "l40s");
    let layout: Vec<(&str, bool)> = r
        .alternatives
        .iter()
        .map(|a| (a.instance_type.as_str(), a.same_layout))
        .collect();
    assert_eq!(
        layout,
        [
            ("g6e.24xlarge", true),
            ("g6e.48xlarge", true),
            ("g6e.xlarge", false)
        ]
    );
    assert!(r.alternatives[0].slower.is_none());
    let w = r.alternatives[2].slower.as_deref().unwrap();
    assert!(w.contains("pcie+tcp over 4 node(s)"), "{w}");
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["alternatives"][2]["sameLayout"], false);
}

#[test]
fn separate_blocks_are_not_called_co_located() {
    // Two blocks: AWS places the instances inside a block close together, and says
    // nothing of two blocks.
    let r = recommendation("h100-blocks", "pytorchjob");
    let CapacityPlan::CapacityBlock {
        blocks: Some(plan), ..
    } = &r.capacity
    else {
        panic!("{:?}", r.capacity)
    };
    assert_eq!(plan.offerings.len(), 2);
    let said = r.reasons.join("\n");
    assert!(
        !said.contains("Capacity Blocks are already co-located"),
        "{said}"
    );
    assert!(
        said.contains(
            "the 2 blocks are separate: they are not known to be co-located with each other"
        ),
        "{said}"
    );
    // While no block is chosen the plan may need several: the same caveat.
    let r = recommendation("h100-no-offerings", "pytorchjob");
    let said = r.reasons.join("\n");
    assert!(
        said.contains("instances inside one Capacity Block are placed close together")
            && said.contains("separate blocks are not known to be co-located"),
        "{said}"
    );
}
