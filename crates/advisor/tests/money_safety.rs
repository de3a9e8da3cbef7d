//! No money spent on a plan that cannot finish: `aws-cli.sh` for the two-block 64 x H100
//! plan, run with stand-in tools (`common::stand_ins`), buys nothing when one of its blocks
//! is no longer sold, when the FSx quota cannot hold its checkpoint storage, or without
//! the user's confirmation of the fee; a purchase that answers no id stops it, and it says
//! which blocks were bought and which were not.

mod common;

use common::{artifacts, confirmation, count, recommendation, run_in_env, stand_ins};
use trainplace_advisor::recommend::CapacityPlan;

/// 2026-12-01T11:30:00Z + 1 min: the fixture's chosen blocks have started.
const AFTER_BLOCK_START: i64 = 1_796_124_660;

fn workdir() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let files = artifacts("h100-blocks", "pytorchjob");
    for (name, content) in &files {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
    stand_ins(dir.path(), 0, AFTER_BLOCK_START);
    let fee = confirmation(&files["aws-cli.sh"]).expect("the script asks to confirm a fee");
    (dir, fee)
}

/// The chosen blocks' offering ids, in the plan's order.
fn offering_ids() -> Vec<String> {
    match recommendation("h100-blocks", "pytorchjob").capacity {
        CapacityPlan::CapacityBlock {
            blocks: Some(plan), ..
        } => plan.offerings.iter().map(|o| o.id.clone()).collect(),
        other => panic!("not a block plan: {other:?}"),
    }
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn the_script_asks_for_the_fee_and_buys_nothing_without_it() {
    let (dir, fee) = workdir();
    assert_eq!(fee, "45308.16");
    let (out, calls) = run_in_env(dir.path(), None, &[], &[]);
    assert!(!out.status.success());
    assert_eq!(
        count(&calls, "aws ec2 purchase-capacity-block"),
        0,
        "{calls}"
    );
    assert!(
        stderr(&out).contains("run again with CONFIRM_PURCHASE_USD=45308.16"),
        "{}",
        stderr(&out)
    );
    // Another figure is no confirmation either.
    let (out, calls) = run_in_env(dir.path(), None, &[], &[("CONFIRM_PURCHASE_USD", "yes")]);
    assert!(!out.status.success());
    assert_eq!(
        count(&calls, "aws ec2 purchase-capacity-block"),
        0,
        "{calls}"
    );
    let (out, calls) = run_in_env(dir.path(), None, &[], &[("CONFIRM_PURCHASE_USD", &fee)]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        count(&calls, "aws ec2 purchase-capacity-block"),
        2,
        "{calls}"
    );
}

#[test]
fn a_sold_out_second_block_stops_the_script_before_the_first_purchase() {
    let (dir, fee) = workdir();
    let ids = offering_ids();
    assert_eq!(ids.len(), 2, "{ids:?}");
    let (out, calls) = run_in_env(
        dir.path(),
        None,
        &[],
        &[("CONFIRM_PURCHASE_USD", &fee), ("SOLD_OUT", &ids[1])],
    );
    assert!(!out.status.success());
    assert_eq!(
        count(&calls, "aws ec2 purchase-capacity-block"),
        0,
        "{calls}"
    );
    // Both offerings were read again, the first still for sale.
    assert_eq!(
        count(&calls, "aws ec2 describe-capacity-block-offerings"),
        2,
        "{calls}"
    );
    let err = stderr(&out);
    assert!(
        err.contains(&format!("no longer for sale: block 2 ({})", ids[1]))
            && err.contains("Nothing was bought by this run"),
        "{err}"
    );
    assert!(!calls.contains("eksctl create"), "{calls}");
}

#[test]
fn a_purchase_without_an_id_stops_and_says_what_was_bought() {
    let (dir, fee) = workdir();
    let (out, calls) = run_in_env(
        dir.path(),
        None,
        &[],
        &[
            ("CONFIRM_PURCHASE_USD", &fee),
            ("PURCHASE_ANSWERS_NONE", "2"),
        ],
    );
    assert!(!out.status.success());
    assert_eq!(
        count(&calls, "aws ec2 purchase-capacity-block"),
        2,
        "{calls}"
    );
    let err = stderr(&out);
    assert!(
        err.contains("the purchase of block 2") && err.contains("answered no reservation id"),
        "{err}"
    );
    assert!(
        err.contains("stopped: blocks bought: 1:cr-0123456789abcde1; blocks not bought: 2"),
        "{err}"
    );
    assert!(!calls.contains("eksctl create"), "{calls}");
    let config = std::fs::read_to_string(dir.path().join("eksctl-cluster.yaml")).unwrap();
    assert!(
        !config.contains("None"),
        "no id None written into the config: {config}"
    );
}

#[test]
fn an_fsx_quota_too_small_for_the_checkpoints_stops_before_buying() {
    let (dir, fee) = workdir();
    // 64 x H100: 16,800 GiB of checkpoint storage; the stand-in quota holds 2,400.
    let (out, calls) = run_in_env(
        dir.path(),
        None,
        &[],
        &[("CONFIRM_PURCHASE_USD", &fee), ("FSX_QUOTA_GIB", "2400.0")],
    );
    assert!(!out.status.success());
    assert_eq!(
        count(&calls, "aws ec2 purchase-capacity-block"),
        0,
        "{calls}"
    );
    assert!(
        calls.contains("aws service-quotas list-service-quotas")
            && calls.contains("aws fsx describe-file-systems"),
        "{calls}"
    );
    assert!(
        stderr(&out).contains("needs 16800 GiB: request an increase"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn checkpoint_storage_is_made_in_the_run_stage_not_at_set_up() {
    let dir = tempfile::tempdir().unwrap();
    for (name, content) in artifacts("h100-blocks", "pytorchjob") {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
    // Before the block starts: set-up buys and creates the cluster, then stops; no
    // file system yet.
    stand_ins(dir.path(), 0, AFTER_BLOCK_START - 7 * 24 * 3600);
    let script = std::fs::read_to_string(dir.path().join("aws-cli.sh")).unwrap();
    let fee = confirmation(&script).unwrap();
    let (out, calls) = run_in_env(dir.path(), None, &[], &[("CONFIRM_PURCHASE_USD", &fee)]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        count(&calls, "aws ec2 purchase-capacity-block"),
        2,
        "{calls}"
    );
    assert!(!calls.contains("checkpoint-storage.yaml"), "{calls}");
    // Once it started, `run` makes it, before the NCCL check.
    stand_ins(dir.path(), 0, AFTER_BLOCK_START);
    let (out, calls) = run_in_env(dir.path(), None, &["run"], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let storage = calls
        .find("kubectl apply -f checkpoint-storage.yaml")
        .unwrap_or_else(|| panic!("{calls}"));
    let check = calls
        .find("kubectl apply -f nccl-tests-mpijob.yaml")
        .unwrap();
    assert!(storage < check, "{calls}");
}

/// The files of the h100-blocks scenario asking for `gpus` instead, default names.
fn plan_files(gpus: i64) -> std::collections::BTreeMap<String, String> {
    let (mut req, facts) = common::scenario("h100-blocks");
    req.gpus = Some(gpus);
    req.framework = Some("pytorchjob".into());
    let policy = trainplace_engine::Policy::embedded();
    let valid = req.validate(&policy.catalog, common::now()).unwrap();
    let rec = trainplace_advisor::recommend(&valid, &policy.catalog, &facts).unwrap();
    trainplace_advisor::artifacts::artifacts(&rec, &policy)
        .into_iter()
        .map(|a| (a.name, a.content))
        .collect()
}

#[test]
fn two_plans_with_default_names_do_not_share_a_block() {
    let (a, fee_a) = workdir();
    let (out, calls) = run_in_env(a.path(), None, &[], &[("CONFIRM_PURCHASE_USD", &fee_a)]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        count(&calls, "aws ec2 purchase-capacity-block"),
        2,
        "{calls}"
    );
    // Another plan (half the GPUs), the same default cluster and job names, the same
    // account: it finds none of the first plan's blocks and buys its own.
    let b = tempfile::tempdir().unwrap();
    let files = plan_files(32);
    for (name, content) in &files {
        let path = b.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
    stand_ins(b.path(), 0, AFTER_BLOCK_START);
    std::fs::copy(a.path().join("state"), b.path().join("state")).unwrap();
    let fee_b = confirmation(&files["aws-cli.sh"]).expect("plan B buys blocks");
    let (out, calls) = run_in_env(b.path(), None, &[], &[("CONFIRM_PURCHASE_USD", &fee_b)]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("is already bought"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        count(&calls, "aws ec2 purchase-capacity-block") >= 1,
        "{calls}"
    );
    // The first plan, run again, still finds its own blocks and buys nothing.
    let (out, calls) = run_in_env(a.path(), None, &[], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        count(&calls, "aws ec2 purchase-capacity-block"),
        0,
        "{calls}"
    );
}
