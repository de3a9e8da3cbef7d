//! One route per plan: the default (eksctl) plan emits no Karpenter file and offers no
//! Karpenter route beside its nodegroups, which take every reserved instance; the
//! Karpenter plan's cluster has only the system nodegroup, and its `aws-cli.sh` creates
//! that cluster, runs Karpenter's prerequisites, applies `karpenter.yaml` and runs the
//! Karpenter job and checks. Where Karpenter cannot make the nodes, asking for it is
//! refused with the reason.

mod common;

use common::{artifacts, count, karpenter_artifacts, recommendation, run_in, scenario, stand_ins};
use serde_json::Value;
use trainplace_advisor::artifacts::{nccl_tests, node_check};
use trainplace_advisor::inventory::NodeSource;
use trainplace_engine::Policy;

/// 2026-12-01T11:30:00Z + 1 min: the fixture's chosen blocks have started.
const AFTER_BLOCK_START: i64 = 1_796_124_660;

const KARPENTER_FILES: [&str; 5] = [
    "karpenter.yaml",
    "karpenter-prerequisites.sh",
    "job-pytorchjob-karpenter.yaml",
    node_check::KARPENTER_NODE_CHECK_FILE,
    nccl_tests::KARPENTER_NCCL_TESTS_FILE,
];

fn nodegroup_names(config: &Value, key: &str) -> Vec<String> {
    config[key]
        .as_array()
        .map(|groups| {
            groups
                .iter()
                .map(|ng| ng["name"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn the_default_plan_has_the_eksctl_route_only() {
    for s in ["h100-blocks", "a100-odcr", "l40s-on-demand", "trainium"] {
        let files = artifacts(s, "pytorchjob");
        for name in KARPENTER_FILES {
            assert!(!files.contains_key(name), "{s}: {name} emitted");
        }
        let script = &files["aws-cli.sh"];
        assert!(!script.contains("Or with Karpenter"), "{s}: {script}");
        assert!(!script.contains("karpenter"), "{s}: {script}");
        assert!(
            script.contains("kubectl apply -f job-pytorchjob.yaml"),
            "{s}"
        );
        let config: Value = serde_yaml_ng::from_str(&files["eksctl-cluster.yaml"]).unwrap();
        assert!(!common::gpu_nodegroups(&config).is_empty(), "{s}");
    }
    let rec = recommendation("h100-blocks", "pytorchjob");
    assert!(
        rec.route_summary.starts_with("eksctl nodegroups")
            && rec.route_summary.contains("--route karpenter"),
        "{}",
        rec.route_summary
    );
}

#[test]
fn the_karpenter_plans_cluster_has_no_gpu_nodegroup() {
    let eksctl = common::eksctl_validator();
    for s in ["h100-blocks", "a100-odcr", "l40s-on-demand", "trainium"] {
        let files = karpenter_artifacts(s, "pytorchjob");
        let config: Value = serde_yaml_ng::from_str(&files["eksctl-cluster.yaml"]).unwrap();
        common::assert_valid(&eksctl, &config, s);
        assert_eq!(
            nodegroup_names(&config, "managedNodeGroups"),
            ["system"],
            "{s}"
        );
        assert!(nodegroup_names(&config, "nodeGroups").is_empty(), "{s}");
        // Nothing in it holds a reservation: Karpenter's EC2NodeClass selects it.
        assert!(
            !files["eksctl-cluster.yaml"].contains("capacityReservation"),
            "{s}"
        );
        for name in ["karpenter.yaml", "karpenter-prerequisites.sh"] {
            assert!(files.contains_key(name), "{s}: no {name}");
        }
        assert!(!files.contains_key("job-pytorchjob.yaml"), "{s}");
        assert!(!files.contains_key(node_check::NODE_CHECK_FILE), "{s}");
        assert!(!files.contains_key(nccl_tests::NCCL_TESTS_FILE), "{s}");
    }
}

#[test]
fn the_karpenter_script_applies_karpenter_after_creating_the_cluster() {
    let files = karpenter_artifacts("h100-blocks", "pytorchjob");
    let script = &files["aws-cli.sh"];
    let at = |needle: &str| {
        script
            .find(needle)
            .unwrap_or_else(|| panic!("no {needle:?} in:\n{script}"))
    };
    let role = at("aws iam get-role --role-name KarpenterNodeRole-training");
    let buy = at("aws ec2 purchase-capacity-block");
    assert!(
        role < buy,
        "the node role is checked before buying: {script}"
    );
    let create = at("eksctl create cluster -f eksctl-cluster.yaml");
    let prereqs = at("sh karpenter-prerequisites.sh");
    let apply = at("kubectl apply -f karpenter.yaml");
    let wait = at("The Capacity Block starts");
    assert!(
        buy < create && create < prereqs && prereqs < apply && apply < wait,
        "{script}"
    );
    // The run stage's checks and job are the Karpenter ones.
    let node_check = at("kubectl apply -f nccl-node-check-karpenter.yaml");
    let tests = at("kubectl apply -f nccl-tests-mpijob-karpenter.yaml");
    let job = at("kubectl apply -f job-pytorchjob-karpenter.yaml");
    assert!(wait < node_check && node_check < tests && tests < job);
    for eksctl_only in [
        "kubectl apply -f job-pytorchjob.yaml",
        "kubectl apply -f nccl-node-check.yaml",
        "kubectl apply -f nccl-tests-mpijob.yaml",
        "Or with Karpenter",
        "put-scheduled-update-group-action",
    ] {
        assert!(!script.contains(eksctl_only), "{eksctl_only}: {script}");
    }
}

/// The Karpenter plan's script, run with stand-in tools: it buys the blocks, creates the
/// cluster with only the system nodegroup, checks Karpenter and applies its NodePool,
/// then (`run`) checks the Karpenter job's nodes and starts that job.
#[test]
fn the_karpenter_script_runs_in_order_with_stand_ins() {
    let dir = tempfile::tempdir().unwrap();
    for (name, content) in karpenter_artifacts("h100-blocks", "pytorchjob") {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
    stand_ins(dir.path(), 0, AFTER_BLOCK_START);
    let (out, calls) = run_in(dir.path(), None, &[]);
    assert!(
        out.status.success(),
        "{calls}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        count(&calls, "aws ec2 purchase-capacity-block"),
        2,
        "{calls}"
    );
    assert_eq!(count(&calls, "eksctl create nodegroup"), 0, "{calls}");
    let line = |what: &str| {
        calls
            .lines()
            .position(|l| l.starts_with(what))
            .unwrap_or_else(|| panic!("no {what:?} in:\n{calls}"))
    };
    let create = line("eksctl create cluster -f eksctl-cluster.yaml");
    let karpenter = line("kubectl get deploy -A -l app.kubernetes.io/name=karpenter");
    let plugin = line("helm upgrade --install nvdp");
    let apply = line("kubectl apply -f karpenter.yaml");
    assert!(
        create < karpenter && karpenter < plugin && plugin < apply,
        "{calls}"
    );
    let (out, calls) = run_in(dir.path(), None, &["run"]);
    assert!(
        out.status.success(),
        "{calls}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let check = line_in(&calls, "kubectl apply -f nccl-node-check-karpenter.yaml");
    let tests = line_in(&calls, "kubectl apply -f nccl-tests-mpijob-karpenter.yaml");
    let job = line_in(&calls, "kubectl apply -f job-pytorchjob-karpenter.yaml");
    assert!(check < tests && tests < job, "{calls}");
}

/// Without the Karpenter node role nothing is bought or created.
#[test]
fn the_karpenter_script_buys_nothing_without_the_node_role() {
    let dir = tempfile::tempdir().unwrap();
    for (name, content) in karpenter_artifacts("h100-blocks", "pytorchjob") {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
    stand_ins(dir.path(), 0, AFTER_BLOCK_START);
    let (out, calls) = run_in(dir.path(), Some("iam get-role"), &[]);
    assert!(!out.status.success(), "{calls}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no IAM role KarpenterNodeRole-training"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        count(&calls, "aws ec2 purchase-capacity-block"),
        0,
        "{calls}"
    );
    assert_eq!(count(&calls, "eksctl create"), 0, "{calls}");
}

fn line_in(calls: &str, what: &str) -> usize {
    calls
        .lines()
        .position(|l| l.starts_with(what))
        .unwrap_or_else(|| panic!("no {what:?} in:\n{calls}"))
}

#[test]
fn the_rerun_command_keeps_the_route() {
    let files = karpenter_artifacts("h100-no-offerings", "pytorchjob");
    let script = &files["aws-cli.sh"];
    assert!(script.contains("--route karpenter --offerings"), "{script}");
    let files = artifacts("h100-no-offerings", "pytorchjob");
    assert!(!files["aws-cli.sh"].contains("--route"));
}

#[test]
fn an_unknown_route_and_karpenter_on_existing_nodes_are_refused() {
    let policy = Policy::embedded();
    let (mut req, facts) = scenario("h100-blocks");
    req.route = Some("autopilot".into());
    let e = req.validate(&policy.catalog, common::now()).unwrap_err();
    assert_eq!(e.field, "route");
    assert_eq!(e.allowed, ["eksctl", "karpenter"]);
    // The cluster's own nodes: nothing for Karpenter to make.
    let nodes = trainplace_advisor::inventory::KubectlNodesJson(common::fixture("nodes.json"))
        .nodes()
        .unwrap();
    let facts = trainplace_advisor::Facts {
        nodes: Some(nodes),
        ..facts
    };
    let req = trainplace_advisor::AdviceRequest {
        nodes: Some(2),
        gpus: None,
        duration_days: Some(2.0),
        route: Some("karpenter".into()),
        ..req
    };
    let valid = req.validate(&policy.catalog, common::now()).unwrap();
    let e = trainplace_advisor::recommend(&valid, &policy.catalog, &facts).unwrap_err();
    assert_eq!(e.field, "route");
    assert!(e.message.contains("existing"), "{e}");
}
