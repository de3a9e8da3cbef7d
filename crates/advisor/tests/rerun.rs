//! `aws-cli.sh` is safe to run again from any step: run it with stand-in `aws` and
//! `eksctl` that remember what they bought and created, stop it at a chosen step, run it
//! again, and count what was bought and created in all.

mod common;

use std::path::Path;

use common::{artifacts, count, run_in, stand_ins};

/// 2026-12-01T11:30:00Z + 1 min: the fixture's chosen blocks have started.
const AFTER_BLOCK_START: i64 = 1_796_124_660;

/// A directory holding the scenario's artifacts and the stand-in tools.
fn workdir(scenario: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, content) in artifacts(scenario, "pytorchjob") {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
    stand_ins(dir.path(), 0, AFTER_BLOCK_START);
    dir
}

fn eksctl_config(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("eksctl-cluster.yaml")).unwrap()
}

#[test]
fn a_rerun_after_a_failed_cluster_create_buys_nothing_again() {
    let dir = workdir("h100-blocks");
    let (out, calls) = run_in(dir.path(), Some("eksctl create cluster"), &[]);
    assert!(!out.status.success(), "{calls}");
    assert_eq!(
        count(&calls, "aws ec2 purchase-capacity-block"),
        2,
        "{calls}"
    );
    // The second run finds both blocks by their tags and buys neither again.
    let (out, calls) = run_in(dir.path(), None, &[]);
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
        count(&calls, "aws ec2 describe-capacity-reservations"),
        2,
        "{calls}"
    );
    assert_eq!(
        count(&calls, "eksctl create cluster -f eksctl-cluster.yaml"),
        1,
        "{calls}"
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("already bought: cr-0123456789abcde1"));
    let config = eksctl_config(dir.path());
    assert!(
        !config.contains("REPLACE-WITH")
            && config.contains("cr-0123456789abcde1")
            && config.contains("cr-0123456789abcde2"),
        "{config}"
    );
    // A third run creates nothing either: the cluster and its nodegroups exist.
    let (out, calls) = run_in(dir.path(), None, &[]);
    assert!(out.status.success());
    assert!(
        !calls.contains("purchase-capacity-block") && !calls.contains("eksctl create"),
        "{calls}"
    );
    assert!(calls.contains("kubectl apply -f job-pytorchjob.yaml"));
}

#[test]
fn a_purchase_that_fails_halfway_buys_only_the_missing_block_on_rerun() {
    let dir = workdir("h100-blocks");
    // The second block's purchase fails; the first one went through.
    let (out, calls) = run_in(
        dir.path(),
        Some(
            "purchase-capacity-block --region us-east-1 --capacity-block-offering-id cb-0f1a2b3c4d5e60002",
        ),
        &[],
    );
    assert!(!out.status.success(), "{calls}");
    assert_eq!(
        count(&calls, "aws ec2 purchase-capacity-block"),
        2,
        "{calls}"
    );
    assert!(!calls.contains("eksctl"), "{calls}");
    let (out, calls) = run_in(dir.path(), None, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bought: Vec<&str> = calls
        .lines()
        .filter(|l| l.starts_with("aws ec2 purchase-capacity-block"))
        .collect();
    assert_eq!(bought.len(), 1, "{calls}");
    assert!(bought[0].contains("cb-0f1a2b3c4d5e60002"), "{calls}");
    // The tags the rerun looks for are the tags the purchase puts on.
    assert!(
        bought[0].contains("Key=trainplace.io/reservation,Value=training-train")
            && bought[0].contains("Key=trainplace.io/block,Value=2"),
        "{}",
        bought[0]
    );
    let config = eksctl_config(dir.path());
    assert!(!config.contains("REPLACE-WITH"), "{config}");
}

#[test]
fn a_failed_nodegroup_create_on_an_existing_cluster_creates_only_what_is_missing() {
    let dir = workdir("h100-blocks");
    // The cluster exists already (someone's own, or an earlier run).
    std::fs::write(dir.path().join("state"), "cluster\nng p5-48xlarge-cb1\n").unwrap();
    let (out, calls) = run_in(dir.path(), None, &[]);
    assert!(
        out.status.success(),
        "{calls}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!calls.contains("eksctl create cluster"), "{calls}");
    assert_eq!(
        count(
            &calls,
            "eksctl create nodegroup -f eksctl-cluster.yaml --include p5-48xlarge-cb2"
        ),
        1,
        "{calls}"
    );
}

#[test]
fn the_placement_group_is_created_once() {
    let dir = workdir("l40s-on-demand");
    let (out, calls) = run_in(dir.path(), Some("eksctl create cluster"), &[]);
    assert!(!out.status.success());
    assert_eq!(
        count(&calls, "aws ec2 create-placement-group"),
        1,
        "{calls}"
    );
    let (out, calls) = run_in(dir.path(), None, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        count(&calls, "aws ec2 create-placement-group"),
        0,
        "{calls}"
    );
    assert!(calls.contains("eksctl create cluster"), "{calls}");
}

#[test]
fn the_block_end_warning_has_an_eventbridge_rule_on_the_blocks_bought() {
    let dir = workdir("h100-blocks");
    let (out, calls) = run_in(dir.path(), None, &[]);
    assert!(out.status.success(), "{calls}");
    let rule: Vec<&str> = calls
        .lines()
        .filter(|l| l.starts_with("aws events put-rule"))
        .collect();
    assert_eq!(rule.len(), 1, "{calls}");
    for needle in [
        "--name training-capacity-block-end",
        "\"source\":[\"aws.ec2\"]",
        "\"Capacity Block Expiration Warning\"",
        "\"Capacity Block Reservation Expiration Warning\"",
        "\"capacity-reservation-id\":[\"cr-0123456789abcde1\",\"cr-0123456789abcde2\"]",
    ] {
        assert!(rule[0].contains(needle), "{needle}: {}", rule[0]);
    }
    // The rule's pattern is JSON.
    let pattern = rule[0].split("--event-pattern ").nth(1).unwrap();
    let parsed: serde_json::Value = serde_json::from_str(pattern).unwrap();
    assert_eq!(parsed["detail-type"].as_array().unwrap().len(), 2);
    // After the purchase, before the cluster.
    let bought = calls.rfind("aws ec2 purchase-capacity-block").unwrap();
    let put = calls.find("aws events put-rule").unwrap();
    let cluster = calls.find("eksctl create cluster").unwrap();
    assert!(bought < put && put < cluster, "{calls}");
}

#[test]
fn the_end_warning_rule_has_a_target_people_can_subscribe_to() {
    let dir = workdir("h100-blocks");
    let (out, calls) = run_in(dir.path(), None, &[]);
    assert!(out.status.success(), "{calls}");
    // A topic of the rule's name, which EventBridge may publish to (for this rule only),
    // as the rule's target.
    let topic = "arn:aws:sns:us-east-1:123456789012:training-capacity-block-end";
    assert!(
        calls
            .contains("aws sns create-topic --region us-east-1 --name training-capacity-block-end"),
        "{calls}"
    );
    let policy = calls
        .lines()
        .find(|l| l.starts_with("aws sns set-topic-attributes"))
        .unwrap_or_else(|| panic!("{calls}"));
    let doc = policy.split("--attribute-value ").nth(1).unwrap();
    let doc: serde_json::Value = serde_json::from_str(doc).unwrap();
    assert_eq!(
        doc["Statement"][0]["Principal"]["Service"],
        "events.amazonaws.com"
    );
    assert_eq!(doc["Statement"][0]["Resource"], topic);
    assert_eq!(
        doc["Statement"][0]["Condition"]["ArnEquals"]["aws:SourceArn"],
        "arn:aws:events:us-east-1:123456789012:rule/training-capacity-block-end"
    );
    assert!(
        calls.contains(&format!(
            "aws events put-targets --region us-east-1 --rule training-capacity-block-end --targets Id=sns,Arn={topic}"
        )),
        "{calls}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!("subscribe to {topic}")),
        "{stdout}"
    );
    // NOTIFY_EMAIL subscribes it.
    let (out, calls) = common::run_in_env(
        dir.path(),
        None,
        &[],
        &[("NOTIFY_EMAIL", "ops@example.com")],
    );
    assert!(out.status.success(), "{calls}");
    assert!(
        calls.contains(&format!(
            "aws sns subscribe --region us-east-1 --topic-arn {topic} --protocol email --notification-endpoint ops@example.com"
        )),
        "{calls}"
    );
}

/// 2026-12-01T11:30:00Z and 2026-12-08T10:50:00Z: the fixture's blocks start, and the
/// plan's checkpoint deadline (the common window's end, 12-08T11:30, less 40 minutes).
const BLOCK_START: i64 = 1_796_124_600;
const CHECKPOINT_BY: i64 = 1_796_727_000;

fn puts(calls: &str) -> Vec<&str> {
    calls
        .lines()
        .filter(|l| l.starts_with("aws autoscaling put-scheduled-update-group-action"))
        .collect()
}

#[test]
fn block_nodegroups_scale_out_at_the_start_and_in_at_the_deadline_once() {
    let dir = workdir("h100-blocks");
    // A day before the blocks start: the script stops after the nodes, schedules put.
    stand_ins(dir.path(), 0, BLOCK_START - 86_400);
    let (out, calls) = run_in(dir.path(), None, &[]);
    assert!(out.status.success(), "{calls}");
    let put = puts(&calls);
    assert_eq!(put.len(), 4, "two nodegroups, two actions each: {calls}");
    for ng in ["p5-48xlarge-cb1", "p5-48xlarge-cb2"] {
        let asg = format!("--auto-scaling-group-name eks-{ng}-asg");
        let out_ = format!(
            "--scheduled-action-name trainplace-scale-out-{BLOCK_START} --start-time 2026-12-01T11:30:00Z --min-size 0 --max-size 4 --desired-capacity 4"
        );
        let in_ = format!(
            "--scheduled-action-name trainplace-scale-in-{CHECKPOINT_BY} --start-time 2026-12-08T10:50:00Z --min-size 0 --max-size 4 --desired-capacity 0"
        );
        for want in [out_, in_] {
            assert_eq!(
                put.iter()
                    .filter(|p| p.contains(&asg) && p.contains(&want))
                    .count(),
                1,
                "{ng} {want}: {calls}"
            );
        }
    }
    // After the nodegroups exist (the cluster step), before the stop for the block.
    let cluster = calls.find("eksctl create cluster").unwrap();
    assert!(cluster < calls.find("put-scheduled-update-group-action").unwrap());
    // A rerun finds every action and puts none.
    let (out, calls) = run_in(dir.path(), None, &[]);
    assert!(out.status.success(), "{calls}");
    assert!(puts(&calls).is_empty(), "{calls}");
    assert_eq!(
        calls
            .lines()
            .filter(|l| l.starts_with("aws autoscaling describe-scheduled-actions"))
            .count(),
        4,
        "{calls}"
    );
    // Once the blocks started, the scale-out time is past and skipped; nothing is put.
    stand_ins(dir.path(), 0, AFTER_BLOCK_START);
    let (out, calls) = run_in(dir.path(), None, &[]);
    assert!(out.status.success(), "{calls}");
    assert!(puts(&calls).is_empty(), "{calls}");
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains("scale-out time 2026-12-01T11:30:00Z has passed")
    );
}

#[test]
fn a_schedule_that_fails_halfway_puts_only_the_missing_actions_on_rerun() {
    let dir = workdir("h100-blocks");
    stand_ins(dir.path(), 0, BLOCK_START - 86_400);
    // The second nodegroup's scale-in fails; three actions went through.
    let fail = format!(
        "--auto-scaling-group-name eks-p5-48xlarge-cb2-asg --scheduled-action-name trainplace-scale-in-{CHECKPOINT_BY}"
    );
    let (out, calls) = run_in(dir.path(), Some(&fail), &[]);
    assert!(!out.status.success(), "{calls}");
    assert_eq!(puts(&calls).len(), 4, "{calls}");
    let (out, calls) = run_in(dir.path(), None, &[]);
    assert!(out.status.success(), "{calls}");
    let put = puts(&calls);
    assert_eq!(put.len(), 1, "{calls}");
    assert!(put[0].contains(&fail), "{}", put[0]);
}
