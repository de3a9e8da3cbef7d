//! The kwok nodes of the advisor's plan, made from its eksctl-cluster.yaml.

use std::process::Command;

use serde_json::{Value, json};

use crate::sandbox::{Sandbox, stderr};

/// vCPUs and memory of the plan's instance types (p5.48xlarge: the catalog has its
/// memory; m7i.2xlarge: https://aws.amazon.com/ec2/instance-types/m7i/).
fn sizing(instance_type: &str) -> (&'static str, Option<&'static str>) {
    match instance_type {
        "p5.48xlarge" => ("192", None),
        "m7i.2xlarge" => ("8", Some("32Gi")),
        other => panic!("no sizing for {other}"),
    }
}

/// A SandboxFleet of the config's nodegroups: each group's desired count spread over its
/// zones, as an Auto Scaling group spreads it.
fn fleet_of(config: &Value) -> String {
    let mut groups = Vec::new();
    for ng in config["managedNodeGroups"].as_array().unwrap() {
        let zones: Vec<&str> = ng["availabilityZones"]
            .as_array()
            .unwrap()
            .iter()
            .map(|z| z.as_str().unwrap())
            .collect();
        let mut nodes = serde_json::Map::new();
        for i in 0..ng["desiredCapacity"].as_u64().unwrap() as usize {
            let n = nodes.entry(zones[i % zones.len()]).or_insert(json!(0));
            *n = json!(n.as_u64().unwrap() + 1);
        }
        let block = ng["instanceMarketOptions"]["marketType"] == "capacity-block";
        let (cpu, memory) = sizing(ng["instanceType"].as_str().unwrap());
        let mut g = json!({
            "name": ng["name"], "instanceType": ng["instanceType"], "nodes": nodes,
            "cpu": cpu, "taintDevices": false,
            "capacityType": if block { "CAPACITY_BLOCK" } else { "ON_DEMAND" },
        });
        if let Some(m) = memory {
            g["memory"] = json!(m);
        }
        groups.push(g);
    }
    serde_json::to_string(&json!({
        "apiVersion": "trainplace.io/v1alpha1", "kind": "SandboxFleet", "region": "us-east-1",
        "zones": [{"name": "us-east-1a", "id": "use1-az4"}, {"name": "us-east-1b", "id": "use1-az6"}],
        "nodeGroups": groups,
    }))
    .unwrap()
}

/// The kwok nodes of the plan: `trainplace sandbox nodes` gives each the catalog's
/// devices (8 nvidia.com/gpu, 32 vpc.amazonaws.com/efa on p5.48xlarge) and EKS's labels;
/// the nodegroup adds its labels and taints. EFA nodes get the 2 MiB hugepages the job
/// asks for (5120Mi, the AWS EKS nccl-tests sample's value): a real node's count is set
/// by its AMI.
fn plan_nodes(config: &Value) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let fleet = dir.path().join("fleet.json");
    std::fs::write(&fleet, fleet_of(config)).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_trainplace"))
        .args(["sandbox", "nodes", "-f"])
        .arg(&fleet)
        .output()
        .unwrap();
    assert!(out.status.success(), "sandbox nodes: {}", stderr(&out));
    let mut list: Value = serde_json::from_slice(&out.stdout).unwrap();
    let groups = config["managedNodeGroups"].as_array().unwrap();
    for node in list["items"].as_array_mut().unwrap() {
        let group = node["metadata"]["labels"]["eks.amazonaws.com/nodegroup"].clone();
        let ng = groups.iter().find(|g| g["name"] == group).unwrap();
        for (k, v) in ng["labels"].as_object().unwrap() {
            node["metadata"]["labels"][k] = v.clone();
        }
        node["spec"]["taints"] = ng.get("taints").cloned().unwrap_or(json!([]));
        if ng["efaEnabled"] == true {
            for field in ["capacity", "allocatable"] {
                node["status"][field]["hugepages-2Mi"] = json!("5120Mi");
            }
        }
    }
    list
}

/// The nodes up and Ready; (GPU node names, system node names).
pub fn make_nodes(sb: &Sandbox, config: &Value) -> (Vec<String>, Vec<String>) {
    let nodes = plan_nodes(config);
    let out = sb.kubectl_stdin(&["apply", "-f", "-"], Some(&nodes.to_string()));
    assert!(out.status.success(), "nodes: {}", stderr(&out));
    let names = |group_is_system: bool| -> Vec<String> {
        nodes["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|n| {
                (n["metadata"]["labels"]["trainplace.io/nodegroup"] == "system") == group_is_system
            })
            .map(|n| n["metadata"]["name"].as_str().unwrap().to_string())
            .collect()
    };
    sb.ok(&[
        "wait",
        "--for",
        "condition=Ready",
        "--timeout",
        "60s",
        "node",
        "--all",
    ]);
    (names(false), names(true))
}
