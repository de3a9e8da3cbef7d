//! The buying part of `aws-cli.sh`, run with the real AWS CLI (PyPI `awscli`, whose
//! botocore validates every command, flag, parameter and `--query` before it sends
//! anything) against moto's server and the loopback answerer (tests/aws_loopback): every
//! step before the nodes (the Local Zone opt-in, the look-up of blocks already bought, the
//! re-read of every offering, the FSx quota, the purchase, the EventBridge rule), twice,
//! for the GB200 plan and a two-block p5 plan. The steps after it (eksctl, kubectl, helm)
//! are run with stand-ins in crates/advisor/tests and against the sandbox in
//! tests/cluster/advisor.rs; eksctl itself in tests/advisor_eksctl.rs.

#[path = "aws_loopback/mod.rs"]
mod aws_loopback;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use aws_loopback::{Aws, venv_tool};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn fixture(name: &str) -> String {
    repo()
        .join("crates/advisor/fixtures")
        .join(name)
        .display()
        .to_string()
}

/// `trainplace advise ARGS --emit DIR` for a Capacity Block plan on `offerings`, and the
/// script's set-up stage cut before its nodes step (`buy.sh`).
fn emit(args: &[&str], offerings: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_trainplace"))
        .arg("advise")
        .args(args)
        .args(["--capacity", "capacity-block", "--offerings", offerings])
        .args(["--now", "2026-11-22T00:00:00Z", "--emit"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "advise: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let script = std::fs::read_to_string(dir.path().join("aws-cli.sh")).unwrap();
    // The nodes step's heading, `# N. Nodes: ...`.
    let mut at = 0;
    let mut nodes = None;
    for line in script.split_inclusive('\n') {
        let numbered = line
            .strip_prefix("# ")
            .and_then(|l| l.split_once(". "))
            .is_some_and(|(n, rest)| {
                n.bytes().all(|b| b.is_ascii_digit()) && rest.starts_with("Nodes:")
            });
        if numbered {
            nodes = Some(at);
            break;
        }
        at += line.len();
    }
    let nodes = nodes.unwrap_or_else(|| panic!("no nodes step in\n{script}"));
    // The set-up stage's `if` closed where the nodes would begin.
    let buy = format!("{}\necho BUY-STEPS-DONE\nfi\n", &script[..nodes]);
    std::fs::write(dir.path().join("buy.sh"), buy).unwrap();
    dir
}

/// `sh buy.sh` in `dir` with the real `aws` (from .venv) against `aws`.
fn run(aws: &Aws, dir: &Path, env: &[(&str, &str)]) -> Output {
    run_file(aws, dir, "buy.sh", env)
}

/// `sh FILE` in `dir` with the real `aws` (from .venv) against `aws`, and the stand-ins
/// in `dir/bin` (if any) before it on the PATH.
fn run_file(aws: &Aws, dir: &Path, file: &str, env: &[(&str, &str)]) -> Output {
    let bin = venv_tool("aws");
    let path = format!(
        "{}:{}:{}",
        dir.join("bin").display(),
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap()
    );
    Command::new("sh")
        .arg(file)
        .current_dir(dir)
        .env_clear()
        .env("PATH", path)
        .envs(aws.env(dir))
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The fee the script asks to see, from its own message.
fn fee(dir: &Path) -> String {
    let script = std::fs::read_to_string(dir.join("aws-cli.sh")).unwrap();
    let key = "run again with CONFIRM_PURCHASE_USD=";
    let at = script.find(key).unwrap() + key.len();
    script[at..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect()
}

#[test]
fn the_two_block_p5_plan_buys_both_blocks_once_with_the_real_aws_cli() {
    let offerings = fixture("capacity-block-offerings.json");
    let dir = emit(
        &["--gpus", "64", "--family", "h100", "--days", "7"],
        &offerings,
    );
    let topology = dir.path().join("reservation-topology.json");
    let aws = Aws::start_with(&[
        ("LOOPBACK_OFFERINGS", &offerings),
        ("LOOPBACK_RESERVATION_TOPOLOGY", topology.to_str().unwrap()),
    ]);
    let fee = fee(dir.path());
    // No confirmation: nothing bought.
    let out = run(&aws, dir.path(), &[]);
    assert!(!out.status.success(), "{}", text(&out));
    assert_eq!(aws.count("answerer PurchaseCapacityBlock"), 0);
    // Confirmed: both blocks, each offering read again first.
    aws.clear();
    let out = run(&aws, dir.path(), &[("CONFIRM_PURCHASE_USD", &fee)]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("BUY-STEPS-DONE"));
    let requests = aws.requests();
    assert_eq!(aws.count("answerer PurchaseCapacityBlock"), 2, "{requests}");
    assert_eq!(
        aws.count("answerer DescribeCapacityBlockOfferings"),
        2,
        "{requests}"
    );
    assert!(
        requests.find("DescribeCapacityBlockOfferings") < requests.find("PurchaseCapacityBlock"),
        "{requests}"
    );
    // moto itself answered the FSx look-up and the EventBridge rule.
    assert_eq!(
        aws.count("moto AWSSimbaAPIService_v20180301.DescribeFileSystems"),
        1,
        "{requests}"
    );
    assert_eq!(aws.count("moto AWSEvents.PutRule"), 1, "{requests}");
    let config = std::fs::read_to_string(dir.path().join("eksctl-cluster.yaml")).unwrap();
    assert!(!config.contains("REPLACE-WITH"), "{config}");
    // The blocks' topology, read once they are bought: scheduled, so EC2 gives none yet.
    assert_eq!(
        aws.count("answerer DescribeCapacityReservationTopology"),
        1,
        "{requests}"
    );
    assert!(
        requests.rfind("PurchaseCapacityBlock")
            < requests.find("DescribeCapacityReservationTopology"),
        "{requests}"
    );
    assert!(
        text(&out).contains(
            "topology: not known yet for cr-00000000000000001 (scheduled) cr-00000000000000002 (scheduled)"
        ),
        "{}",
        text(&out)
    );
    // Again: both found by their tags, nothing bought; both started now, under one
    // layer-2 node and two layer-3 nodes.
    std::fs::write(
        &topology,
        serde_json::json!({"CapacityReservations": [
            {"CapacityReservationId": "cr-00000000000000001", "State": "active", "InstanceType": "p5.48xlarge",
             "AvailabilityZone": "us-east-1a", "NetworkNodes": ["nn-l1", "nn-l2", "nn-l3-a"]},
            {"CapacityReservationId": "cr-00000000000000002", "State": "active", "InstanceType": "p5.48xlarge",
             "AvailabilityZone": "us-east-1a", "NetworkNodes": ["nn-l1", "nn-l2", "nn-l3-b"]},
        ]})
        .to_string(),
    )
    .unwrap();
    aws.clear();
    let out = run(&aws, dir.path(), &[("CONFIRM_PURCHASE_USD", &fee)]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(aws.count("answerer PurchaseCapacityBlock"), 0);
    assert!(
        text(&out).contains("block 2 of this plan is already bought"),
        "{}",
        text(&out)
    );
    assert!(
        text(&out).contains(
            "topology: 2 reservation(s) under 1 layer-1, 1 layer-2, 2 layer-3 network node(s)\ntopology: the farthest two meet at layer 2: one layer-2 node above 2 layer-3 nodes"
        ),
        "{}",
        text(&out)
    );
}

#[test]
fn a_sold_out_block_stops_the_real_run_before_any_purchase() {
    let offerings = fixture("capacity-block-offerings.json");
    let dir = emit(
        &["--gpus", "64", "--family", "h100", "--days", "7"],
        &offerings,
    );
    let config = std::fs::read_to_string(dir.path().join("eksctl-cluster.yaml")).unwrap();
    let second = config
        .match_indices("REPLACE-WITH-cr-ID-OF-")
        .nth(1)
        .map(|(at, key)| {
            config[at + key.len()..]
                .split_whitespace()
                .next()
                .unwrap()
                .to_string()
        })
        .unwrap();
    let sold = dir.path().join("sold-out");
    std::fs::write(&sold, &second).unwrap();
    let aws = Aws::start_with(&[
        ("LOOPBACK_OFFERINGS", &offerings),
        ("LOOPBACK_SOLD_OUT", sold.to_str().unwrap()),
    ]);
    let fee = fee(dir.path());
    let out = run(&aws, dir.path(), &[("CONFIRM_PURCHASE_USD", &fee)]);
    assert!(!out.status.success(), "{}", text(&out));
    assert_eq!(aws.count("answerer PurchaseCapacityBlock"), 0);
    assert!(
        text(&out).contains(&format!("no longer for sale: block 2 ({second})")),
        "{}",
        text(&out)
    );
}

#[test]
fn the_gb200_plan_opts_in_before_it_buys_and_once() {
    let offerings = fixture("gb200-offerings.json");
    let aws = Aws::start_with(&[("LOOPBACK_OFFERINGS", &offerings)]);
    let dir = emit(
        &["--gpus", "72", "--family", "gb200", "--days", "7"],
        &offerings,
    );
    let fee = fee(dir.path());
    let out = run(&aws, dir.path(), &[("CONFIRM_PURCHASE_USD", &fee)]);
    assert!(out.status.success(), "{}", text(&out));
    let requests = aws.requests();
    let opt_in = requests
        .find("answerer ModifyAvailabilityZoneGroup")
        .unwrap_or_else(|| panic!("{requests}"));
    let reread = requests
        .find("answerer DescribeCapacityBlockOfferings")
        .unwrap();
    let buy = requests.find("answerer PurchaseCapacityBlock").unwrap();
    assert!(opt_in < reread && reread < buy, "{requests}");
    // The nodes' AMI was read (before the purchase) and written into the config.
    let ami = requests.find("answerer AmazonSSM.GetParameter").unwrap();
    assert!(ami < buy, "{requests}");
    let config = std::fs::read_to_string(dir.path().join("eksctl-cluster.yaml")).unwrap();
    assert!(config.contains("ami: ami-0f0e0d0c0b0a09080"), "{config}");
    // Again: opted in already, the block found: no opt-in, no purchase.
    aws.clear();
    let out = run(&aws, dir.path(), &[("CONFIRM_PURCHASE_USD", &fee)]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(aws.count("answerer ModifyAvailabilityZoneGroup"), 0);
    assert_eq!(aws.count("answerer PurchaseCapacityBlock"), 0);
    assert!(
        text(&out).contains("Local Zone group us-east-1-dfw-2: opted in"),
        "{}",
        text(&out)
    );
}
