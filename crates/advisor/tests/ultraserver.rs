//! P6e-GB200 as it is sold: UltraServer Capacity Blocks in the Dallas Local Zone, never
//! on-demand, reclaimed an hour before their end. The plan's deadline, its refusal when
//! no block fits, and the self-managed Local Zone nodegroup it emits.

mod common;

use serde_json::{Value, json};
use trainplace_advisor::{AdviceRequest, RawFacts, advise};
use trainplace_engine::Policy;

const ZONE: &str = "us-east-1-dfw-2a";

fn request() -> AdviceRequest {
    AdviceRequest {
        gpus: Some(72),
        family: Some("gb200".into()),
        duration_days: Some(7.0),
        now: Some(common::NOW.into()),
        ..Default::default()
    }
}

/// One u-p6e-gb200x72 block of `hours` from 2026-12-01T11:30Z in the Dallas Local Zone.
fn offering(hours: i64) -> RawFacts {
    let end = jiff::Timestamp::from_second(
        "2026-12-01T11:30:00Z"
            .parse::<jiff::Timestamp>()
            .unwrap()
            .as_second()
            + hours * 3600,
    )
    .unwrap();
    let offering = json!({"CapacityBlockOfferings": [{
        "CapacityBlockOfferingId": "cb-0gb200000000000001", "InstanceType": "p6e-gb200.36xlarge",
        "AvailabilityZone": ZONE, "InstanceCount": 18,
        "StartDate": "2026-12-01T11:30:00Z", "EndDate": end.to_string(),
        "CapacityBlockDurationHours": hours, "UpfrontFee": "700000.00",
        "CurrencyCode": "USD", "Tenancy": "default",
        "UltraserverType": "u-p6e-gb200x72", "UltraserverCount": 1,
    }]});
    RawFacts {
        offerings: Some(offering.to_string()),
        ..Default::default()
    }
}

fn planned() -> trainplace_advisor::Advice {
    advise(
        &request(),
        &offering(192),
        &Policy::embedded(),
        common::now(),
    )
    .unwrap()
}

#[test]
fn an_ultraserver_block_is_usable_until_an_hour_before_its_end() {
    let advice = planned();
    let rec = &advice.recommendation;
    let v = serde_json::to_value(&rec.capacity).unwrap();
    let blocks = &v["blocks"];
    // 192 h block ending 2026-12-09T11:30Z: reclaimed from 10:30Z, not 10:50Z.
    assert_eq!(blocks["end"], "2026-12-09T11:30:00Z");
    assert_eq!(blocks["checkpointBy"], "2026-12-09T10:30:00Z", "{blocks}");
    assert_eq!(blocks["endMarginMinutes"], 60);
    assert_eq!(blocks["usableHours"], 191.0);
    let end = rec
        .warnings
        .iter()
        .find(|w| w.code == "capacity-block-end")
        .unwrap();
    assert!(
        end.message
            .starts_with("checkpoint deadline 2026-12-09T10:30:00Z")
            && end
                .message
                .contains("reclaimed from 60 minutes before the end"),
        "{}",
        end.message
    );
    // The EventBridge rule's step says its warning comes after the reclaim began.
    let script = common::emitted(&advice, "aws-cli.sh");
    assert!(
        script.contains("20 minutes after these blocks' instances begin to be reclaimed (60 minutes before the end)"),
        "{script}"
    );
}

#[test]
fn a_job_that_needs_the_last_hour_of_an_ultraserver_block_is_told_to_checkpoint() {
    // 168 h job on a 168 h block: 167 h usable, 60 minutes past the deadline.
    let advice = advise(
        &request(),
        &offering(168),
        &Policy::embedded(),
        common::now(),
    )
    .unwrap();
    let end = advice
        .recommendation
        .warnings
        .iter()
        .find(|w| w.code == "capacity-block-end")
        .unwrap();
    assert!(
        end.message.contains("2026-12-08T10:30:00Z")
            && end.message.contains("the job's 168 h run 60 min past that"),
        "{}",
        end.message
    );
}

#[test]
fn gb200_is_never_planned_or_offered_on_demand() {
    let advice = planned();
    let rec = &advice.recommendation;
    assert!(
        rec.capacity_options.iter().all(|o| o.kind != "on-demand"),
        "{:?}",
        rec.capacity_options
    );
    assert_eq!(rec.cost.on_demand_usd, None);
    assert!(
        rec.reasons.iter().any(
            |r| r.contains("no on-demand comparison: p6e-gb200.36xlarge is not sold on-demand")
        ),
        "{:?}",
        rec.reasons
    );

    // Asked for on-demand: refused, saying why.
    let err = advise(
        &AdviceRequest {
            capacity: Some("on-demand".into()),
            region: Some("us-east-1".into()),
            ..request()
        },
        &RawFacts::default(),
        &Policy::embedded(),
        common::now(),
    )
    .unwrap_err();
    assert_eq!(err.field, "capacity");
    assert!(err.message.contains("is not sold on-demand"), "{err}");

    // No block fits (the only one is 24 h for a 168 h job): refused with the reason, not
    // planned on-demand.
    let err = advise(
        &request(),
        &offering(24),
        &Policy::embedded(),
        common::now(),
    )
    .unwrap_err();
    assert_eq!(err.field, "offerings", "{err}");
    assert!(
        err.message.contains("no UltraServer Capacity Block fits")
            && err.message.contains("shorter than the job")
            && !err.message.contains("planned on-demand"),
        "{err}"
    );
    // What the offerings allow instead, without an on-demand remainder.
    assert!(
        err.message.contains(
            "what the offerings allow instead: a shorter block with checkpoint and resume"
        ) && err.message.contains("checkpoint by 2026-12-02T10:30:00Z")
            && !err.message.contains("or on-demand"),
        "{err}"
    );
}

/// The job's nodegroups of the emitted config, self-managed (`nodeGroups`).
fn self_managed(config: &Value) -> Vec<&Value> {
    config["nodeGroups"]
        .as_array()
        .map(|a| a.iter().collect())
        .unwrap_or_default()
}

#[test]
fn gb200_nodes_are_a_self_managed_nodegroup_in_the_local_zone() {
    let advice = planned();
    let text = common::emitted(&advice, "eksctl-cluster.yaml");
    let config: Value = serde_yaml_ng::from_str(text).unwrap();
    common::assert_valid(&common::eksctl_validator(), &config, "GB200 ClusterConfig");
    let groups = self_managed(&config);
    assert_eq!(groups.len(), 1, "{config}");
    let ng = groups[0];
    assert_eq!(ng["localZones"], json!([ZONE]));
    assert!(ng.get("availabilityZones").is_none());
    assert_eq!(ng["instanceType"], "p6e-gb200.36xlarge");
    // Empty until the block is active, up to the UltraServer's 18.
    assert_eq!(
        (&ng["desiredCapacity"], &ng["maxSize"]),
        (&json!(0), &json!(18))
    );
    assert_eq!(ng["efaEnabled"], true);
    assert_eq!(
        ng["capacityReservation"]["capacityReservationTarget"]["capacityReservationID"],
        "REPLACE-WITH-cr-ID-OF-cb-0gb200000000000001"
    );
    assert_eq!(ng["instanceMarketOptions"]["marketType"], "capacity-block");
    assert!(ng["taints"].as_array().is_some_and(|t| !t.is_empty()));
    assert_eq!(ng["labels"]["trainplace.io/nodegroup"], ng["name"]);
    // The cluster knows the Local Zone; its own zones and the system nodes stay in the
    // region's Availability Zones, managed.
    assert_eq!(config["localZones"], json!([ZONE]));
    let zones = config["availabilityZones"].as_array().unwrap();
    assert!(
        zones
            .iter()
            .all(|z| z.as_str().unwrap().len() == "us-east-1a".len()),
        "{zones:?}"
    );
    let managed = config["managedNodeGroups"].as_array().unwrap();
    assert_eq!(managed.len(), 1);
    assert_eq!(managed[0]["name"], "system");
    // The warning that asked for a hand edit is gone.
    assert!(
        advice
            .recommendation
            .warnings
            .iter()
            .all(|w| !w.message.contains("must be made a self-managed")),
        "{:?}",
        advice.recommendation.warnings
    );
}

#[test]
fn the_script_opts_in_to_the_local_zone_once() {
    let advice = planned();
    let script = common::emitted(&advice, "aws-cli.sh");
    let check = script
        .find("describe-availability-zones --region \"$REGION\" --all-availability-zones")
        .expect("an opt-in check");
    let opt_in = script
        .find("modify-availability-zone-group --region \"$REGION\" --group-name \"$LZ_GROUP\" --opt-in-status opted-in")
        .expect("an opt-in");
    let cluster = script.find("eksctl create cluster").unwrap();
    assert!(check < opt_in && opt_in < cluster, "{script}");
    assert!(script.contains(&format!("Values={ZONE}")), "{script}");
}

#[test]
fn the_gb200_job_selects_what_its_self_managed_nodes_carry() {
    let advice = planned();
    let config: Value =
        serde_yaml_ng::from_str(common::emitted(&advice, "eksctl-cluster.yaml")).unwrap();
    let ng = self_managed(&config)[0];
    let job: Value = serde_yaml_ng::from_str(
        common::emitted(&advice, "job-pytorchjob.yaml")
            .split("\n---\n")
            .next()
            .unwrap(),
    )
    .unwrap();
    let text = job.to_string();
    // Set by the kubelet itself: the instance type and the zone (the Local Zone's name).
    let kubelet = [
        "node.kubernetes.io/instance-type",
        "topology.kubernetes.io/zone",
    ];
    let mut checked = 0;
    for spec in job["spec"]["pytorchReplicaSpecs"]
        .as_object()
        .unwrap()
        .values()
    {
        let pod = &spec["template"]["spec"];
        for (k, v) in pod["nodeSelector"].as_object().unwrap() {
            if !kubelet.contains(&k.as_str()) {
                assert_eq!(&ng["labels"][k], v, "{k}: {text}");
                checked += 1;
            }
        }
        assert_eq!(pod["nodeSelector"]["topology.kubernetes.io/zone"], ZONE);
        let term = &pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            ["nodeSelectorTerms"][0]["matchExpressions"][0];
        let key = term["key"].as_str().unwrap();
        assert!(
            term["values"]
                .as_array()
                .unwrap()
                .contains(&ng["labels"][key]),
            "{term}"
        );
    }
    assert!(checked > 0, "{text}");
}

/// A directory holding the planned GB200 artifacts.
fn workdir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for a in &planned().artifacts {
        let path = dir.path().join(&a.name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, &a.content).unwrap();
    }
    dir
}

#[test]
fn the_gb200_script_runs_again_without_buying_or_opting_in_twice() {
    let dir = workdir();
    // 2026-12-01T11:31:00Z: the block has started.
    common::stand_ins(dir.path(), 0, 1_796_124_660);
    let count = common::count;
    let (out, calls) = common::run_in(dir.path(), Some("eksctl create cluster"), &[]);
    assert!(!out.status.success(), "{calls}");
    assert_eq!(
        count(&calls, "aws ec2 purchase-capacity-block"),
        1,
        "{calls}"
    );
    assert_eq!(
        count(&calls, "aws ec2 modify-availability-zone-group"),
        1,
        "{calls}"
    );
    let (out, calls) = common::run_in(dir.path(), None, &[]);
    assert!(
        out.status.success(),
        "{calls}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        count(&calls, "aws ec2 purchase-capacity-block"),
        0,
        "{calls}"
    );
    assert_eq!(
        count(&calls, "aws ec2 modify-availability-zone-group"),
        0,
        "{calls}"
    );
    assert_eq!(count(&calls, "eksctl create cluster"), 1, "{calls}");
    let config = std::fs::read_to_string(dir.path().join("eksctl-cluster.yaml")).unwrap();
    // The stand-in numbers its ids by the lines it has recorded: the opt-in came first,
    // before the purchase.
    assert!(
        !config.contains("REPLACE-WITH") && config.contains("cr-0123456789abcde2"),
        "{config}"
    );
}

/// 2026-12-01T11:30:00Z, the block's start; its 192 h end less the UltraServer's 60
/// minutes is 2026-12-09T10:30:00Z.
const GB200_START: i64 = 1_796_124_600;
const GB200_CHECKPOINT_BY: i64 = GB200_START + 192 * 3600 - 3600;

#[test]
fn the_self_managed_gb200_nodegroup_scales_in_an_hour_before_the_block_ends_once() {
    let dir = workdir();
    let config: Value = serde_yaml_ng::from_str(
        &std::fs::read_to_string(dir.path().join("eksctl-cluster.yaml")).unwrap(),
    )
    .unwrap();
    let ng = self_managed(&config)[0]["name"]
        .as_str()
        .unwrap()
        .to_string();
    let cluster = config["metadata"]["name"].as_str().unwrap().to_string();
    // A day before the block: the script stops after the nodes, with the actions put.
    common::stand_ins(dir.path(), 0, GB200_START - 86_400);
    let puts = |calls: &str| {
        calls
            .lines()
            .filter(|l| l.starts_with("aws autoscaling put-scheduled-update-group-action"))
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let (out, calls) = common::run_in(dir.path(), None, &[]);
    assert!(out.status.success(), "{calls}");
    assert!(
        calls.contains(&format!(
            "aws cloudformation describe-stack-resource --region us-east-1 --stack-name eksctl-{cluster}-nodegroup-{ng} --logical-resource-id NodeGroup"
        )),
        "{calls}"
    );
    let asg = format!("--auto-scaling-group-name eksctl-{cluster}-nodegroup-{ng}-NodeGroup-asg");
    let put = puts(&calls);
    assert_eq!(put.len(), 2, "{calls}");
    for want in [
        format!(
            "--scheduled-action-name trainplace-scale-out-{GB200_START} --start-time 2026-12-01T11:30:00Z --min-size 0 --max-size 18 --desired-capacity 18"
        ),
        format!(
            "--scheduled-action-name trainplace-scale-in-{GB200_CHECKPOINT_BY} --start-time 2026-12-09T10:30:00Z --min-size 0 --max-size 18 --desired-capacity 0"
        ),
    ] {
        assert_eq!(
            put.iter()
                .filter(|p| p.contains(&asg) && p.contains(&want))
                .count(),
            1,
            "{want}: {calls}"
        );
    }
    // A rerun finds both actions and puts none.
    let (out, calls) = common::run_in(dir.path(), None, &[]);
    assert!(out.status.success(), "{calls}");
    assert!(puts(&calls).is_empty(), "{calls}");
}

#[test]
fn the_self_managed_gb200_nodegroup_starts_empty_and_fills_when_the_block_is_active() {
    let dir = workdir();
    let config: Value = serde_yaml_ng::from_str(
        &std::fs::read_to_string(dir.path().join("eksctl-cluster.yaml")).unwrap(),
    )
    .unwrap();
    let ng = self_managed(&config)[0];
    // Created before the block is active: no instance asked for (eksctl would wait for
    // them, and the Auto Scaling group would retry launches the block refuses).
    assert_eq!(
        (&ng["desiredCapacity"], &ng["minSize"], &ng["maxSize"]),
        (&json!(0), &json!(0), &json!(18)),
        "{ng}"
    );
    let name = ng["name"].as_str().unwrap().to_string();
    let cluster = config["metadata"]["name"].as_str().unwrap().to_string();
    let asg = format!("eksctl-{cluster}-nodegroup-{name}-NodeGroup-asg");
    let sets = |calls: &str| {
        calls
            .lines()
            .filter(|l| l.starts_with("aws autoscaling update-auto-scaling-group"))
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    // Before the block: the scheduled scale-out fills it; nothing set now.
    common::stand_ins(dir.path(), 0, GB200_START - 86_400);
    let (out, calls) = common::run_in(dir.path(), None, &[]);
    assert!(out.status.success(), "{calls}");
    assert!(sets(&calls).is_empty(), "{calls}");
    // Set up (again) once the block is active: the scale-out time has passed, so the
    // script sets the group to the job's size itself.
    common::stand_ins(dir.path(), 0, GB200_START + 600);
    let (out, calls) = common::run_in(dir.path(), None, &[]);
    assert!(out.status.success(), "{calls}");
    assert_eq!(
        sets(&calls),
        [format!(
            "aws autoscaling update-auto-scaling-group --region us-east-1 --auto-scaling-group-name {asg} --min-size 0 --max-size 18 --desired-capacity 18"
        )],
        "{calls}"
    );
    // After the checkpoint deadline: left alone.
    common::stand_ins(dir.path(), 0, GB200_CHECKPOINT_BY + 60);
    let (_, calls) = common::run_in(dir.path(), None, &[]);
    assert!(sets(&calls).is_empty(), "{calls}");
}

/// The job's pod templates (objects holding `containers`) in `v`.
fn pod_specs<'a>(v: &'a Value, out: &mut Vec<&'a Value>) {
    match v {
        Value::Object(m) if m.get("containers").is_some_and(Value::is_array) => out.push(v),
        Value::Object(m) => m.values().for_each(|c| pod_specs(c, out)),
        Value::Array(a) => a.iter().for_each(|c| pod_specs(c, out)),
        _ => {}
    }
}

#[test]
fn every_gb200_pod_that_asks_for_hugepages_asks_for_memory_too() {
    let advice = planned();
    let mut checked = 0;
    for artifact in &advice.artifacts {
        if !artifact.name.ends_with(".yaml") {
            continue;
        }
        for doc in serde_yaml_ng::Deserializer::from_str(&artifact.content) {
            let v: Value = serde::Deserialize::deserialize(doc).unwrap();
            let mut specs = Vec::new();
            pod_specs(&v, &mut specs);
            for spec in specs {
                for c in spec["containers"].as_array().unwrap() {
                    let requests = &c["resources"]["requests"];
                    if requests.get("hugepages-2Mi").is_some() {
                        // kube-apiserver: "HugePages require cpu or memory".
                        assert!(
                            requests.get("memory").is_some() || requests.get("cpu").is_some(),
                            "{}: {requests}",
                            artifact.name
                        );
                        checked += 1;
                    }
                }
            }
        }
    }
    assert!(
        checked >= 3,
        "the job, the node check and nccl-tests: {checked}"
    );
}

#[test]
fn gb200_has_no_karpenter_route() {
    let advice = planned();
    let names: Vec<&str> = advice.artifacts.iter().map(|a| a.name.as_str()).collect();
    assert!(
        !names.iter().any(|n| n.contains("karpenter")),
        "Karpenter does not support DRA, which GB200's ComputeDomain needs: {names:?}"
    );
    let script = common::emitted(&advice, "aws-cli.sh");
    assert!(!script.contains("Karpenter instead"), "{script}");
    assert!(
        advice
            .recommendation
            .route_summary
            .contains("no Karpenter route"),
        "{}",
        advice.recommendation.route_summary
    );
}

/// Asked for, the Karpenter route is refused for GB200 with the reason and the EKS
/// guide's page, as a bad request.
#[test]
fn gb200_on_karpenter_is_refused_with_the_reason() {
    let req = trainplace_advisor::AdviceRequest {
        route: Some("karpenter".into()),
        ..request()
    };
    let refused = advise(&req, &offering(192), &Policy::embedded(), common::now()).unwrap_err();
    assert_eq!(refused.field, "route");
    for needle in [
        "ComputeDomain",
        "Karpenter does not support DRA",
        "https://docs.aws.amazon.com/eks/latest/userguide/ml-eks-nvidia-ultraserver.html",
    ] {
        assert!(refused.message.contains(needle), "{needle}: {refused}");
    }
}

#[test]
fn gb200_installs_what_writes_the_clique_label_and_checks_it_before_the_job() {
    let advice = planned();
    let values: Value = serde_yaml_ng::from_str(common::emitted(
        &advice,
        "gpu-feature-discovery-values.yaml",
    ))
    .unwrap();
    assert_eq!(values["gfd"]["enabled"], true);
    assert_eq!(values["devicePlugin"]["enabled"], false);
    assert_eq!(
        values["nfd"]["worker"]["tolerations"][0],
        json!({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"})
    );
    let script = common::emitted(&advice, "aws-cli.sh");
    let install = script
        .find("helm upgrade --install gfd nvdp/nvidia-device-plugin --version 0.20.0")
        .unwrap_or_else(|| panic!("{script}"));
    let check = script
        .find("carry nvidia.com/gpu.clique")
        .unwrap_or_else(|| panic!("{script}"));
    let domain = script.find("kubectl apply -f compute-domain.yaml").unwrap();
    let job = script.find("kubectl apply -f job-").unwrap();
    assert!(
        install < check && check < domain && domain < job,
        "{script}"
    );
    // The job's pods keep together by that label.
    let job: Value =
        serde_yaml_ng::from_str(common::emitted(&advice, "job-pytorchjob.yaml")).unwrap();
    assert!(job.to_string().contains("nvidia.com/gpu.clique"));
}

#[test]
fn the_local_zone_is_opted_in_and_its_offerings_listed_before_anything_is_bought() {
    let advice = planned();
    let script = common::emitted(&advice, "aws-cli.sh");
    let opt_in = script
        .find("modify-availability-zone-group")
        .unwrap_or_else(|| panic!("{script}"));
    let reread = script
        .find("aws ec2 describe-capacity-block-offerings")
        .unwrap();
    let buy = script.find("aws ec2 purchase-capacity-block").unwrap();
    assert!(opt_in < reread && reread < buy, "{script}");
    for line in script
        .lines()
        .filter(|l| l.contains("describe-capacity-block-offerings"))
    {
        assert!(line.contains("--all-availability-zones"), "{line}");
        assert!(
            line.contains("--ultraserver-type u-p6e-gb200x72 --ultraserver-count 1"),
            "{line}"
        );
    }
    // Without offerings the listing sees the Local Zone too.
    let listing = advise(
        &request(),
        &RawFacts::default(),
        &Policy::embedded(),
        common::now(),
    )
    .unwrap();
    let script = common::emitted(&listing, "aws-cli.sh");
    assert!(
        script
            .lines()
            .filter(|l| l.contains("describe-capacity-block-offerings"))
            .all(|l| l.contains("--all-availability-zones")),
        "{script}"
    );
}

#[test]
fn the_cluster_is_created_without_its_nodegroups_then_they_are_added() {
    let advice = planned();
    let script = common::emitted(&advice, "aws-cli.sh");
    let cluster = script
        .find("eksctl create cluster -f eksctl-cluster.yaml --without-nodegroup")
        .unwrap_or_else(|| panic!("{script}"));
    let groups = script[cluster..]
        .find("eksctl create nodegroup -f eksctl-cluster.yaml")
        .unwrap();
    assert!(groups > 0);
}

#[test]
fn checkpoint_storage_follows_the_model_size_and_is_in_the_cost_line() {
    // 72 GB200 without a model size: bounded by GPU memory.
    let advice = planned();
    assert!(advice.recommendation.cost.checkpoint_storage_usd.is_some());
    // A 70 B-parameter model: 70e9 x 16 bytes = 1,044 GiB a checkpoint (rounded up), 3 kept =
    // 3,132 GiB, in 4,800 GiB.
    let sized = advise(
        &AdviceRequest {
            model_params_billions: Some(70.0),
            ..request()
        },
        &offering(192),
        &Policy::embedded(),
        common::now(),
    )
    .unwrap();
    let storage = common::emitted(&sized, "checkpoint-storage.yaml");
    assert!(storage.contains("storage: 4800Gi"), "{storage}");
    assert!(
        storage.contains("one checkpoint = 70 B parameters x 16 bytes"),
        "{storage}"
    );
    let cost = &sized.recommendation.cost;
    // 4,800 GiB x 1.073741824 GB/GiB x $0.21 = $1,082.33 a month; 168 h of 730.
    assert_eq!(cost.checkpoint_storage_usd_per_month, Some(1082.33));
    assert_eq!(cost.checkpoint_storage_usd, Some(249.08));
    let text = trainplace_advisor::render::text(&sized);
    assert!(
        text.contains("+ checkpoint storage $249.08 for the run ($1082.33 a month until deleted)"),
        "{text}"
    );
}

#[test]
fn the_run_stops_before_the_job_when_the_clique_label_is_missing_or_split() {
    let dir = workdir();
    common::stand_ins(dir.path(), 0, 1_796_124_660);
    for (env, says) in [
        (
            [("CLIQUE_NODES", "17"), ("CLIQUES", "c1.0")],
            "fewer than 18 of the job's nodes carry nvidia.com/gpu.clique",
        ),
        (
            [("CLIQUE_NODES", "18"), ("CLIQUES", "c1.0 c2.0")],
            "the job's nodes are in more than one NVLink clique",
        ),
    ] {
        let (out, calls) = common::run_in_env(dir.path(), None, &["run"], &env);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(says), "{err}");
        assert!(
            !calls.contains("compute-domain.yaml") && !calls.contains("job-pytorchjob.yaml"),
            "{calls}"
        );
    }
    let (out, calls) = common::run_in_env(
        dir.path(),
        None,
        &["run"],
        &[("CLIQUE_NODES", "18"), ("CLIQUES", "c1.0")],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        calls.contains("kubectl apply -f job-pytorchjob.yaml"),
        "{calls}"
    );
}

#[test]
fn the_gb200_nodes_get_the_arm64_nvidia_ami_read_before_anything_is_bought() {
    let advice = planned();
    let config: Value =
        serde_yaml_ng::from_str(common::emitted(&advice, "eksctl-cluster.yaml")).unwrap();
    assert_eq!(config["nodeGroups"][0]["ami"], "REPLACE-WITH-AMI-ID");
    assert_eq!(config["nodeGroups"][0]["amiFamily"], "AmazonLinux2023");
    let script = common::emitted(&advice, "aws-cli.sh");
    let read = script
        .find("aws ssm get-parameter --region \"$REGION\" --name /aws/service/eks/optimized-ami/1.35/amazon-linux-2023/arm64/nvidia/recommended/image_id")
        .unwrap_or_else(|| panic!("{script}"));
    let buy = script.find("aws ec2 purchase-capacity-block").unwrap();
    assert!(read < buy, "{script}");
    // Run: the id is written into the config before eksctl runs.
    let dir = workdir();
    common::stand_ins(dir.path(), 0, 1_796_124_660);
    let (out, _) = common::run_in(dir.path(), None, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let config = std::fs::read_to_string(dir.path().join("eksctl-cluster.yaml")).unwrap();
    assert!(
        config.contains("ami: ami-0123456789abcdef0") && !config.contains("REPLACE-WITH"),
        "{config}"
    );
}
