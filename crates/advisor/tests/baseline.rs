//! The cluster baseline the emitted job needs: a system nodegroup for the pods that are
//! not the job (CoreDNS, the operators, the MPI launcher), an IAM OIDC provider, and the
//! operator of every kind the plan applies, installed before it is applied.

mod common;

use common::{artifacts, recommendation};
use serde_json::Value;
use trainplace_advisor::artifacts::eksctl::{SYSTEM_INSTANCE_TYPE, SYSTEM_NODEGROUP};
use trainplace_advisor::artifacts::objects;
use trainplace_advisor::artifacts::operators::{self, MPI_OPERATOR, TRAINING_OPERATOR};
use trainplace_engine::Policy;

const SCENARIOS: [&str; 4] = ["h100-blocks", "l40s-on-demand", "trainium", "a100-odcr"];
const FRAMEWORKS: [&str; 4] = ["pytorchjob", "trainjob", "jobset", "mpijob"];

/// Whether a pod with `tolerations` may run on a node with `taints` (NoSchedule ones).
fn tolerated(tolerations: &Value, taints: &Value) -> bool {
    let none = Vec::new();
    let tolerations = tolerations.as_array().unwrap_or(&none);
    taints.as_array().unwrap_or(&none).iter().all(|taint| {
        tolerations.iter().any(|t| {
            t["key"] == taint["key"] && (t["operator"] == "Exists" || t["value"] == taint["value"])
        })
    })
}

#[test]
fn cluster_has_an_untainted_system_nodegroup_and_oidc() {
    let policy = Policy::embedded();
    for scenario in SCENARIOS {
        let rec = recommendation(scenario, "pytorchjob");
        let o = objects(&rec, &policy);
        let config = &o.cluster_config;
        assert_eq!(config["iam"]["withOIDC"], true, "{scenario}");
        let groups = config["managedNodeGroups"].as_array().unwrap();
        let system: Vec<&Value> = groups
            .iter()
            .filter(|ng| ng["name"] == SYSTEM_NODEGROUP)
            .collect();
        assert_eq!(system.len(), 1, "{scenario}: one system nodegroup");
        let system = system[0];
        assert_eq!(system["instanceType"], SYSTEM_INSTANCE_TYPE);
        assert!(system.get("taints").is_none(), "{scenario}: untainted");
        assert!(system.get("capacityReservation").is_none(), "on-demand");
        assert!(
            system["minSize"].as_u64().unwrap() >= 2,
            "CoreDNS has 2 replicas"
        );
        assert_eq!(
            system["availabilityZones"], config["availabilityZones"],
            "{scenario}: the cluster's two zones"
        );
        assert_eq!(
            system["availabilityZones"][0], rec.availability_zone,
            "{scenario}: one of them the GPU zone"
        );
        // The MPI launcher of the collective check tolerates no taint: it runs only on
        // an untainted node, which only the system nodegroup has.
        let launcher = &o.nccl_tests.as_ref().unwrap()["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]
            ["spec"];
        let homes: Vec<&str> = groups
            .iter()
            .filter(|ng| tolerated(&launcher["tolerations"], &ng["taints"]))
            .map(|ng| ng["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            homes,
            [SYSTEM_NODEGROUP],
            "{scenario}: where the launcher runs"
        );
        // The job's pods are pinned to the job's nodegroups, never the system one.
        let pod = &o.job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"];
        let text = pod["affinity"].to_string() + &pod["nodeSelector"].to_string();
        assert!(!text.contains(SYSTEM_INSTANCE_TYPE), "{scenario}: {text}");
    }
}

/// `group/version Kind` of every object in a multi-document YAML file.
fn kinds(yaml: &str) -> Vec<String> {
    serde_yaml_ng::Deserializer::from_str(yaml)
        .map(|d| {
            let v: Value = serde::Deserialize::deserialize(d).unwrap();
            format!(
                "{} {}",
                v["apiVersion"].as_str().unwrap(),
                v["kind"].as_str().unwrap()
            )
        })
        .collect()
}

#[test]
fn every_kind_the_script_applies_has_its_operator_installed_first() {
    for scenario in ["h100-blocks", "trainium"] {
        for framework in FRAMEWORKS {
            let rec = recommendation(scenario, framework);
            let files = artifacts(scenario, framework);
            let script = &files["aws-cli.sh"];
            let ops = operators::operators(&rec);
            for file in [
                format!("job-{framework}.yaml"),
                if scenario == "trainium" {
                    "nccom-test-mpijob.yaml".to_string()
                } else {
                    "nccl-tests-mpijob.yaml".to_string()
                },
            ] {
                let applied = script
                    .find(&format!("kubectl apply -f {file}"))
                    .unwrap_or_else(|| panic!("{scenario}/{framework}: {file} not applied"));
                for kind in kinds(&files[&file]) {
                    let op = ops
                        .iter()
                        .find(|op| op.kinds.contains(&kind.as_str()))
                        .unwrap_or_else(|| {
                            panic!("{scenario}/{framework}: no operator runs {kind} ({file})")
                        });
                    let installed = script
                        .find(&format!("kubectl apply --server-side {}", op.apply))
                        .unwrap_or_else(|| {
                            panic!("{scenario}/{framework}: {} not installed", op.name)
                        });
                    let ready = script
                        .find(&format!(
                            "rollout status deployment/{} --timeout",
                            op.deployment
                        ))
                        .unwrap();
                    assert!(
                        installed < ready && ready < applied,
                        "{scenario}/{framework}: {} installed and ready before {file}",
                        op.name
                    );
                    assert!(op.apply.contains(op.version) || op == &TRAINING_OPERATOR);
                }
            }
        }
    }
}

#[test]
fn pytorchjob_plans_run_the_training_operator_without_its_mpijob() {
    let files = artifacts("h100-blocks", "pytorchjob");
    let k: Value = serde_yaml_ng::from_str(&files["training-operator/kustomization.yaml"]).unwrap();
    assert_eq!(
        k["resources"][0],
        "https://github.com/kubeflow/trainer.git/manifests/overlays/standalone?ref=v1.9.4"
    );
    let patches = k["patches"].to_string();
    assert!(
        patches.contains("$patch: delete") && patches.contains("name: mpijobs.kubeflow.org"),
        "{patches}"
    );
    assert!(patches.contains("--enable-scheme=pytorchjob"), "{patches}");
    // The other frameworks need no Training Operator, and no kustomization.
    for framework in ["trainjob", "jobset", "mpijob"] {
        let files = artifacts("h100-blocks", framework);
        assert!(!files.contains_key("training-operator/kustomization.yaml"));
        assert!(!files["aws-cli.sh"].contains("-k training-operator"));
        assert!(files["aws-cli.sh"].contains(MPI_OPERATOR.apply));
    }
}

#[test]
fn gpu_nodes_are_repaired_on_hardware_faults() {
    let policy = Policy::embedded();
    for scenario in SCENARIOS {
        let o = objects(&recommendation(scenario, "pytorchjob"), &policy);
        for ng in common::gpu_nodegroups(&o.cluster_config) {
            assert_eq!(
                ng["nodeRepairConfig"]["enabled"], true,
                "{scenario}: {}",
                ng["name"]
            );
        }
        let addons: Vec<&str> = o.cluster_config["addons"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["name"].as_str().unwrap())
            .collect();
        assert!(
            addons.contains(&"eks-node-monitoring-agent"),
            "{scenario}: {addons:?}"
        );
    }
}
