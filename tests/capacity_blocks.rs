//! `capacity-block-ends` through the real binary: `trainplace check -f FILE --cluster DIR
//! [--reservations FILE] [--now RFC3339]`. The cluster directory holds an EC2NodeClass
//! list as Karpenter writes its status; the reservations file is
//! `aws ec2 describe-capacity-reservations --output json` as the aws CLI prints it.

use std::process::{Command, Output};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_trainplace");
const DIR: &str = "tests/fixtures/capacity-blocks";
/// 25 h 50 min before Karpenter drains the nodes of block cr-0a1b2c3d4e5f60718 (it ends
/// 2026-11-24T11:30Z; Karpenter drains 40 minutes before, EC2 terminates 30 before).
const NOW: &str = "2026-11-23T09:00:00Z";

fn check(job: &str, extra: &[&str]) -> Output {
    let file = format!("{DIR}/job-{job}.yaml");
    let cluster = format!("{DIR}/karpenter");
    let mut args = vec!["check", "-f", &file, "--cluster", &cluster];
    args.extend_from_slice(extra);
    run(&args)
}

fn run(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("trainplace runs")
}

/// The `capacity-block-ends` findings of a `check -o json` run of job `job`.
fn block_findings(job: &str, o: &Output) -> Vec<Value> {
    let v: Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{job}: {e}: {}", String::from_utf8_lossy(&o.stderr)));
    v[0]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["rule"] == "capacity-block-ends")
        .cloned()
        .collect()
}

fn findings(job: &str, extra: &[&str]) -> Vec<Value> {
    let mut args = extra.to_vec();
    args.extend_from_slice(&["-o", "json"]);
    block_findings(job, &check(job, &args))
}

#[test]
fn a_job_that_outlives_its_block_is_told_when_the_block_ends_word_for_word() {
    let o = check("outlives", &["--now", NOW]);
    assert_eq!(o.status.code(), Some(0), "a warning does not deny");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains(
        "  warn [capacity-block-ends] spec.template.spec: the job can only run on Capacity Block cr-0a1b2c3d4e5f60718 (p5.48xlarge, us-east-1a), which ends 2026-11-24T11:30:00Z; Karpenter drains its nodes (10 minutes before EC2 terminates them) at 2026-11-24T10:50:00Z, 25.8h from now, but the job expects to run 36.0h (trainplace.io/expected-duration: 36h).\n      fix: checkpoint often enough to lose little at 2026-11-24T10:50:00Z and resume on a later block, shorten the run to under 25.8h, or submit onto a block that ends after 2026-11-24T21:40:00Z.\n"
    ), "{out}");
}

#[test]
fn a_job_that_fits_its_block_gets_no_finding() {
    assert!(findings("fits", &["--now", NOW]).is_empty());
}

#[test]
fn the_deadline_counts_when_no_duration_is_written() {
    let f = findings("deadline-outlives", &["--now", NOW]);
    assert_eq!(f.len(), 1);
    assert!(
        f[0]["found"]
            .as_str()
            .unwrap()
            .contains("activeDeadlineSeconds: 200000")
    );
}

#[test]
fn a_jobset_child_job_deadline_counts() {
    let f = findings("jobset-deadline", &["--now", NOW]);
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(
        f[0]["found"].as_str().unwrap().contains(
            "the job expects to run 48.0h (replicatedJobs[].template.spec.activeDeadlineSeconds: 172800)"
        ),
        "{f:?}"
    );
}

#[test]
fn without_a_duration_only_a_block_ending_within_a_day_is_reported() {
    assert!(
        findings("no-duration", &["--now", NOW]).is_empty(),
        "25.8h left"
    );
    // The same job submitted the next morning: 10.8h left.
    let f = findings("no-duration", &["--now", "2026-11-24T00:00:00Z"]);
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(
        f[0]["found"]
            .as_str()
            .unwrap()
            .contains("10.8h from now, and the job states no expected run time")
    );
}

#[test]
fn an_expiring_block_is_reported_and_denied_in_enforce() {
    let f = findings("expiring", &["--now", NOW]);
    assert_eq!(f.len(), 1);
    assert_eq!(f[0]["mode"], "warn");
    assert!(
        f[0]["found"]
            .as_str()
            .unwrap()
            .contains("its nodes are already being drained or reclaimed")
    );
    let pol = tempfile::tempdir().unwrap();
    std::fs::write(
        pol.path().join("policy.yaml"),
        "apiVersion: trainplace.io/v1alpha1\nkind: Policy\nrules:\n  capacityBlockEnds: enforce\n",
    )
    .unwrap();
    let o = check(
        "expiring",
        &["--now", NOW, "--policy-dir", pol.path().to_str().unwrap()],
    );
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
}

#[test]
fn managed_node_group_blocks_come_from_describe_capacity_reservations() {
    let f = findings(
        "mng-block",
        &[
            "--now",
            NOW,
            "--reservations",
            &format!("{DIR}/describe-capacity-reservations.json"),
        ],
    );
    assert_eq!(f.len(), 1, "{f:?}");
    let found = f[0]["found"].as_str().unwrap();
    // The active block ends first; the scheduled one holds no nodes yet. A managed
    // node group is scaled to 0 40 minutes before the end (11:30 - 0:40 = 10:50).
    assert!(
        found.contains("cr-0123456789abcdef0 (p5.48xlarge, us-east-1d)"),
        "{found}"
    );
    assert!(
        found.contains(
            "EKS scales its managed node group to 0 at 2026-11-23T10:50:00Z, 1.8h from now"
        ),
        "{found}"
    );
}

/// `--reservations` alone (no `--cluster`): the block is judged by instance type, and
/// the missing node list is not read as "the cluster has no such nodes".
#[test]
fn reservations_without_a_cluster_judge_the_block_and_nothing_else() {
    let file = format!("{DIR}/job-mng-block.yaml");
    let reservations = format!("{DIR}/describe-capacity-reservations.json");
    let o = run(&[
        "check",
        "-f",
        &file,
        "--reservations",
        &reservations,
        "--now",
        NOW,
        "-o",
        "json",
    ]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let rules: Vec<&str> = v[0]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["rule"].as_str().unwrap())
        .collect();
    assert_eq!(rules, ["capacity-block-ends"]);
}

fn mng(job: &str, extra: &[&str]) -> Vec<Value> {
    let file = format!("{DIR}/job-{job}.yaml");
    let cluster = format!("{DIR}/managed-node-group");
    let reservations = format!("{DIR}/describe-capacity-reservations.json");
    let mut args = vec![
        "check",
        "-f",
        &file,
        "--cluster",
        &cluster,
        "--reservations",
        &reservations,
        "-o",
        "json",
    ];
    args.extend_from_slice(extra);
    block_findings(job, &run(&args))
}

#[test]
fn a_node_group_that_only_has_block_nodes_counts_as_the_block() {
    let f = mng("mng-nodegroup", &["--now", NOW]);
    assert_eq!(f.len(), 1, "{f:?}");
    let found = f[0]["found"].as_str().unwrap();
    assert!(
        found.contains("Capacity Block cr-0123456789abcdef0")
            && found.contains("the job expects to run 72.0h"),
        "{found}"
    );
}

#[test]
fn a_job_that_ends_before_the_node_group_scales_to_zero_fits() {
    // 1.5 h run, 1 h 50 min until EKS scales the node group to 0 at 10:50.
    assert!(mng("mng-fits", &["--now", NOW]).is_empty());
    // Submitted at 09:30 it would still be running at 10:50.
    let f = mng("mng-fits", &["--now", "2026-11-23T09:30:00Z"]);
    assert_eq!(f.len(), 1, "{f:?}");
}

#[test]
fn a_managed_node_group_past_its_scale_down_is_denied_in_enforce() {
    let pol = tempfile::tempdir().unwrap();
    std::fs::write(
        pol.path().join("policy.yaml"),
        "apiVersion: trainplace.io/v1alpha1\nkind: Policy\nrules:\n  capacityBlockEnds: enforce\n",
    )
    .unwrap();
    let f = mng(
        "mng-fits",
        &[
            "--now",
            "2026-11-23T10:55:00Z",
            "--policy-dir",
            pol.path().to_str().unwrap(),
        ],
    );
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0]["mode"], "enforce");
    assert!(
        f[0]["found"]
            .as_str()
            .unwrap()
            .contains("EKS scales its managed node group to 0 at 2026-11-23T10:50:00Z: its nodes are already being drained or reclaimed"),
        "{f:?}"
    );
}

#[test]
fn a_node_group_with_on_demand_nodes_too_is_not_judged() {
    assert!(mng("mng-mixed", &["--now", NOW]).is_empty());
}

#[test]
fn a_nodepool_named_in_required_node_affinity_counts_as_its_block() {
    let f = findings("nodepool-affinity", &["--now", NOW]);
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(
        f[0]["found"]
            .as_str()
            .unwrap()
            .contains("Capacity Block cr-0a1b2c3d4e5f60718 (p5.48xlarge, us-east-1a)")
    );
}

#[test]
fn the_horizon_for_jobs_without_a_duration_is_set_by_policy() {
    let pol = tempfile::tempdir().unwrap();
    std::fs::write(
        pol.path().join("policy.yaml"),
        "apiVersion: trainplace.io/v1alpha1\nkind: Policy\ndefaults:\n  capacityBlockHorizon: 48h\n",
    )
    .unwrap();
    let dir = pol.path().to_str().unwrap();
    // 25.8h left: beyond the default 24h, within 48h.
    let f = findings("no-duration", &["--now", NOW, "--policy-dir", dir]);
    assert_eq!(f.len(), 1, "{f:?}");
    std::fs::write(
        pol.path().join("policy.yaml"),
        "apiVersion: trainplace.io/v1alpha1\nkind: Policy\ndefaults:\n  capacityBlockHorizon: two days\n",
    )
    .unwrap();
    let o = check("no-duration", &["--now", NOW, "--policy-dir", dir]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr)
            .contains("defaults.capacityBlockHorizon \"two days\" is not a duration"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn a_duration_that_is_not_one_says_so() {
    let f = findings("bad-duration", &["--now", NOW]);
    assert!(
        f[0]["found"]
            .as_str()
            .unwrap()
            .contains("\"three days\" is not a duration")
    );
}

#[test]
fn a_reservations_file_of_the_wrong_shape_is_refused() {
    let o = check(
        "fits",
        &["--reservations", &format!("{DIR}/karpenter/nodes.json")],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no CapacityReservations array"));
}

/// Durations at the edge of what a clock holds: `activeDeadlineSeconds` is an int64 on a
/// batch/v1 Job, so 2^63 - 1 is a valid object; the annotation takes any text. Each is
/// told it outlives the block; none panics (adding it to the clock overflowed).
#[test]
fn a_run_time_past_the_end_of_the_clock_is_reported_not_a_panic() {
    for (job, source) in [
        (
            "huge-deadline",
            "activeDeadlineSeconds: 9223372036854775807",
        ),
        (
            "huge-duration",
            "trainplace.io/expected-duration: 9223372036854775807s",
        ),
    ] {
        let o = check(job, &["--now", NOW, "-o", "json"]);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(!stderr.contains("panicked"), "{job}: {stderr}");
        assert_eq!(o.status.code(), Some(0), "{job}: {stderr}");
        let f = findings(job, &["--now", NOW]);
        assert_eq!(f.len(), 1, "{job}: {f:?}");
        let found = f[0]["found"].as_str().unwrap();
        assert!(found.contains(source), "{job}: {found}");
        let fix = f[0]["fix"].as_str().unwrap();
        assert!(fix.contains("submit onto a later block"), "{job}: {fix}");
    }
}

/// `-1h` is no run time: reported as a bad duration, not taken as "fits".
#[test]
fn a_negative_duration_is_reported_as_malformed() {
    let f = findings("negative-duration", &["--now", NOW]);
    assert_eq!(f.len(), 1, "{f:?}");
    let found = f[0]["found"].as_str().unwrap();
    assert!(
        found.contains("trainplace.io/expected-duration: \"-1h\" is negative"),
        "{found}"
    );
}

/// `job-outlives.yaml` with its reservation pin replaced by `scheduling` (YAML lines under
/// the pod spec), judged against the Karpenter cluster.
fn scheduled(scheduling: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(format!("{DIR}/job-outlives.yaml")).unwrap();
    let pin = "        karpenter.k8s.aws/capacity-reservation-id: cr-0a1b2c3d4e5f60718\n";
    assert!(text.contains(pin));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("job.yaml");
    std::fs::write(&file, text.replace(pin, "").to_string() + scheduling).unwrap();
    let cluster = format!("{DIR}/karpenter");
    let o = run(&[
        "check",
        "-f",
        file.to_str().unwrap(),
        "--cluster",
        &cluster,
        "--now",
        NOW,
        "-o",
        "json",
    ]);
    block_findings("scheduled", &o)
}

fn required(exprs: &str) -> String {
    format!(
        "      affinity:\n        nodeAffinity:\n          requiredDuringSchedulingIgnoredDuringExecution:\n            nodeSelectorTerms:\n            - matchExpressions:\n{exprs}"
    )
}

#[test]
fn reserved_capacity_only_is_read_from_every_way_of_saying_it() {
    let block_only = [
        "        karpenter.sh/capacity-type: reserved\n".to_string(),
        "        karpenter.k8s.aws/capacity-reservation-type: capacity-block\n".to_string(),
        required(
            "              - {key: karpenter.sh/capacity-type, operator: In, values: [reserved]}\n",
        ),
        // NotIn the other capacity types, on nodes that carry the label.
        required(
            "              - {key: karpenter.sh/capacity-type, operator: NotIn, values: [spot, on-demand]}\n              - {key: karpenter.sh/capacity-type, operator: Exists}\n",
        ),
        required(
            "              - {key: karpenter.k8s.aws/capacity-reservation-type, operator: NotIn, values: [default]}\n              - {key: karpenter.k8s.aws/capacity-reservation-type, operator: Exists}\n",
        ),
    ];
    for s in &block_only {
        let f = scheduled(s);
        assert_eq!(f.len(), 1, "{s}: {f:?}");
        assert!(
            f[0]["found"]
                .as_str()
                .unwrap()
                .contains("cr-0ffeeffeeffee0001"),
            "{s}: the p5 block that ends first: {f:?}"
        );
    }
}

#[test]
fn scheduling_that_may_land_off_reserved_capacity_is_not_judged_as_a_block() {
    let may_leave = [
        // A node without the label (not made by Karpenter) matches NotIn too.
        required(
            "              - {key: karpenter.sh/capacity-type, operator: NotIn, values: [spot, on-demand]}\n",
        ),
        required(
            "              - {key: karpenter.sh/capacity-type, operator: In, values: [reserved, on-demand]}\n",
        ),
        required("              - {key: karpenter.sh/capacity-type, operator: DoesNotExist}\n"),
        // One term pins reserved capacity, the other does not: either may be used.
        format!(
            "{}            - matchExpressions:\n              - {{key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a]}}\n",
            required(
                "              - {key: karpenter.sh/capacity-type, operator: In, values: [reserved]}\n"
            )
        ),
        "        karpenter.sh/capacity-type: on-demand\n".to_string(),
    ];
    for s in &may_leave {
        assert!(scheduled(s).is_empty(), "{s}");
    }
}
