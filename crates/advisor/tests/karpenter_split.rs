//! The Karpenter route of a job split over several placement groups: one EC2NodeClass and
//! NodePool per placement group, each limited to its share, and the job's pods allowed
//! onto all of them.

mod common;

use serde_json::Value;

fn docs(text: &str) -> Vec<Value> {
    text.split("\n---\n")
        .map(|d| serde_yaml_ng::from_str(d).unwrap())
        .collect()
}

/// The eksctl plan's ClusterConfig, whose nodegroups the Karpenter plan's NodePools
/// stand for: the Karpenter plan's config has none of them (only the system nodegroup)
/// and the same VPC, GPU subnets included.
fn same_subnets_as_the_eksctl_plan(advice: &trainplace_advisor::Advice) -> Value {
    let on_karpenter: Value =
        serde_yaml_ng::from_str(common::emitted(advice, "eksctl-cluster.yaml")).unwrap();
    assert!(common::gpu_nodegroups(&on_karpenter).is_empty());
    let eksctl = common::split_plan();
    let config: Value =
        serde_yaml_ng::from_str(common::emitted(&eksctl, "eksctl-cluster.yaml")).unwrap();
    assert_eq!(on_karpenter["vpc"], config["vpc"]);
    config
}

#[test]
fn each_placement_group_gets_its_own_node_class_and_pool() {
    let advice = common::split_plan_on(Some("karpenter"));
    let config = same_subnets_as_the_eksctl_plan(&advice);
    let mut groups: Vec<String> = common::gpu_nodegroups(&config)
        .iter()
        .map(|ng| ng["placement"]["groupName"].as_str().unwrap().to_string())
        .collect();
    assert!(groups.len() > 1, "{groups:?}");
    let karpenter = docs(common::emitted(&advice, "karpenter.yaml"));
    let classes: Vec<&Value> = karpenter
        .iter()
        .filter(|d| d["kind"] == "EC2NodeClass")
        .collect();
    let pools: Vec<&Value> = karpenter
        .iter()
        .filter(|d| d["kind"] == "NodePool")
        .collect();
    let class_schema = common::crd_validator("karpenter.k8s.aws_ec2nodeclasses.yaml");
    let pool_schema = common::crd_validator("karpenter.sh_nodepools.yaml");
    for c in &classes {
        common::assert_valid(&class_schema, c, "EC2NodeClass");
    }
    for p in &pools {
        common::assert_valid(&pool_schema, p, "NodePool");
    }
    let mut selected: Vec<String> = classes
        .iter()
        .map(|c| {
            c["spec"]["placementGroupSelector"]["name"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    groups.sort();
    selected.sort();
    assert_eq!(selected, groups, "one node class per placement group");
    // Each pool uses its own class; together they hold the job's GPUs exactly.
    let mut gpus = 0;
    for p in &pools {
        let class = &p["spec"]["template"]["spec"]["nodeClassRef"]["name"];
        assert!(
            classes.iter().any(|c| &c["metadata"]["name"] == class),
            "{p}"
        );
        gpus += p["spec"]["limits"]["nvidia.com/gpu"]
            .as_str()
            .unwrap()
            .parse::<u32>()
            .unwrap();
    }
    assert_eq!(pools.len(), groups.len());
    assert_eq!(gpus, advice.recommendation.shape.total_gpus);
    // The Karpenter job's pods may land on any of the pools, not only the first.
    let job = docs(common::emitted(&advice, "job-pytorchjob-karpenter.yaml"));
    let names: Vec<&Value> = pools.iter().map(|p| &p["metadata"]["name"]).collect();
    for spec in job[0]["spec"]["pytorchReplicaSpecs"]
        .as_object()
        .unwrap()
        .values()
    {
        let pod = &spec["template"]["spec"];
        assert!(
            pod["nodeSelector"].get("karpenter.sh/nodepool").is_none(),
            "{pod}"
        );
        let term = &pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            ["nodeSelectorTerms"][0]["matchExpressions"][0];
        assert_eq!(term["key"], "karpenter.sh/nodepool");
        let values: Vec<&Value> = term["values"].as_array().unwrap().iter().collect();
        assert_eq!(values, names, "{term}");
    }
}

#[test]
fn each_node_class_selects_its_own_nodegroups_subnet() {
    let advice = common::split_plan_on(Some("karpenter"));
    let config = same_subnets_as_the_eksctl_plan(&advice);
    let cluster = config["metadata"]["name"].as_str().unwrap();
    let script = common::emitted(&advice, "karpenter-prerequisites.sh");
    let karpenter = docs(common::emitted(&advice, "karpenter.yaml"));
    let classes: Vec<&Value> = karpenter
        .iter()
        .filter(|d| d["kind"] == "EC2NodeClass")
        .collect();
    let groups = common::gpu_nodegroups(&config);
    assert!(groups.len() > 1 && classes.len() == groups.len());
    let mut subnets: Vec<&str> = Vec::new();
    for class in classes {
        let pg = &class["spec"]["placementGroupSelector"]["name"];
        let ng = groups
            .iter()
            .find(|ng| &ng["placement"]["groupName"] == pg)
            .unwrap_or_else(|| panic!("no nodegroup in {pg}"));
        // The nodegroup's one subnet, in the job's zone.
        let [subnet] = ng["subnets"].as_array().unwrap().as_slice() else {
            panic!("{ng}");
        };
        let subnet = subnet.as_str().unwrap();
        let spec = &config["vpc"]["subnets"]["private"][subnet];
        assert_eq!(spec["az"], advice.recommendation.availability_zone);
        assert_eq!(
            class["spec"]["subnetSelectorTerms"],
            serde_json::json!([{"tags": {"karpenter.sh/discovery": cluster, "trainplace.io/subnet": subnet}}]),
            "{}",
            class["metadata"]["name"]
        );
        // The prerequisites script finds that subnet by its CIDR and names it so.
        let cidr = spec["cidr"].as_str().unwrap();
        let find = script
            .find(&format!("Name=cidr-block,Values={cidr} "))
            .unwrap_or_else(|| panic!("{subnet} {cidr} not looked up:\n{script}"));
        let tag = format!("--tags Key=trainplace.io/subnet,Value={subnet}\n");
        assert!(script[find..].contains(&tag), "{tag}");
        subnets.push(subnet);
    }
    subnets.sort();
    subnets.dedup();
    assert_eq!(subnets.len(), groups.len(), "one subnet per node class");
}
