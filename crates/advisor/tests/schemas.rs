//! Every generated object validates against the real tool's schema in schemas/.
//! (x-kubernetes-* extensions and CEL rules are not enforced by a JSON Schema validator.)

mod common;

use common::*;
use rstest::rstest;
use trainplace_advisor::artifacts::objects;
use trainplace_engine::Policy;

const SCENARIOS: [&str; 5] = [
    "h100-blocks",
    "h100-no-offerings",
    "l40s-on-demand",
    "a100-odcr",
    "single-node",
];

#[test]
fn eksctl_and_karpenter_validate_in_every_scenario() {
    let policy = Policy::embedded();
    let eksctl = eksctl_validator();
    let node_class = crd_validator("karpenter.k8s.aws_ec2nodeclasses.yaml");
    let node_pool = crd_validator("karpenter.sh_nodepools.yaml");
    for s in SCENARIOS {
        let o = objects(&recommendation(s, "pytorchjob"), &policy);
        assert_valid(&eksctl, &o.cluster_config, &format!("{s}: ClusterConfig"));
        assert!(o.node_class.is_none() && o.node_pool.is_none(), "{s}");
        let o = objects(&karpenter_recommendation(s, "pytorchjob"), &policy);
        assert_valid(
            &eksctl,
            &o.cluster_config,
            &format!("{s}: ClusterConfig (Karpenter route)"),
        );
        let class = o.node_class.as_ref().unwrap();
        assert_valid(&node_class, class, &format!("{s}: EC2NodeClass"));
        let pool = o.node_pool.as_ref().unwrap();
        assert_valid(&node_pool, pool, &format!("{s}: NodePool"));
    }
}

#[rstest]
#[case::pytorchjob("pytorchjob", "kubeflow.org_pytorchjobs.yaml")]
#[case::trainjob("trainjob", "trainer.kubeflow.org_trainjobs.yaml")]
#[case::jobset("jobset", "jobset.x-k8s.io_jobsets.yaml")]
#[case::mpijob("mpijob", "mpi-operator-v2beta1/kubeflow.org_mpijobs.yaml")]
fn job_manifests_validate(#[case] framework: &str, #[case] crd: &str) {
    let policy = Policy::embedded();
    let v = crd_validator(crd);
    let mpi = crd_validator("mpi-operator-v2beta1/kubeflow.org_mpijobs.yaml");
    for s in SCENARIOS {
        for rec in [
            recommendation(s, framework),
            karpenter_recommendation(s, framework),
        ] {
            let o = objects(&rec, &policy);
            let route = o.route.slug();
            assert_valid(&v, &o.job, &format!("{s}: {framework} ({route} route)"));
            assert_valid(
                &mpi,
                o.nccl_tests.as_ref().unwrap(),
                &format!("{s}: nccl-tests ({route} route)"),
            );
        }
    }
}

#[test]
fn validator_catches_a_broken_object() {
    let policy = Policy::embedded();
    let mut o = objects(&recommendation("h100-blocks", "pytorchjob"), &policy);
    o.cluster_config["managedNodeGroups"][0]["efaEnabled"] = serde_json::json!("yes");
    assert!(!eksctl_validator().is_valid(&o.cluster_config));
    o.cluster_config["managedNodeGroups"][0]["efaEnabled"] = serde_json::json!(true);
    o.cluster_config["managedNodeGroups"][0]["capacityReservation"]["bogus"] = serde_json::json!(1);
    assert!(
        !eksctl_validator().is_valid(&o.cluster_config),
        "refs resolve: nested unknown field rejected"
    );
    let o = objects(
        &karpenter_recommendation("h100-blocks", "pytorchjob"),
        &policy,
    );
    let mut pool = o.node_pool.unwrap();
    assert!(crd_validator("karpenter.sh_nodepools.yaml").is_valid(&pool));
    pool["spec"]["template"]["spec"]["taints"][0]["effect"] = serde_json::json!("Sometimes");
    assert!(!crd_validator("karpenter.sh_nodepools.yaml").is_valid(&pool));
}
