//! The topology reads of `aws-cli.sh`, run with the real AWS CLI (PyPI `awscli`, whose
//! botocore validates every command and parameter before it sends anything) against
//! the loopback answerer (tests/aws_loopback), which answers both topology calls in the
//! documented response shape: the run stage's `describe-instance-topology` over the
//! cluster's nodes (a `kubectl` stand-in lists their provider ids), in batches of at most
//! 100 ids, and a script with a wrong parameter, which must not pass; and the set-up
//! stage's `describe-capacity-reservation-topology` of a block the account already holds
//! (of blocks it buys: tests/advisor_aws_cli.rs).

#[path = "aws_loopback/mod.rs"]
mod aws_loopback;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use aws_loopback::{Aws, venv_tool};
use serde_json::{Value, json};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `trainplace advise` for 8 x p5.48xlarge on the fixture's offerings, emitted.
fn emit() -> tempfile::TempDir {
    emit_with(&[])
}

fn emit_with(extra: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let offerings = repo().join("crates/advisor/fixtures/capacity-block-offerings.json");
    let out = Command::new(env!("CARGO_BIN_EXE_trainplace"))
        .args(["advise", "--gpus", "64", "--family", "h100", "--days", "7"])
        .args(extra)
        .args(["--capacity", "capacity-block", "--offerings"])
        .arg(offerings)
        .args(["--now", "2026-11-22T00:00:00Z", "--emit"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "advise: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    dir
}

/// The script's opening (up to the set-up stage, with `topology_summary`) and the run
/// stage's topology step, as `topology.sh`.
fn topology_step(dir: &Path) -> String {
    let script = std::fs::read_to_string(dir.join("aws-cli.sh")).unwrap();
    let head = &script[..script.find("if [ \"$STAGE\" = setup ]").unwrap()];
    let start = script
        .find(". How far apart the nodes are in the EC2 network")
        .unwrap_or_else(|| panic!("no instance topology step in\n{script}"));
    let start = script[..start].rfind('\n').unwrap() + 1;
    let end = start + script[start..].find("\n\n").unwrap();
    format!("{head}{}\n", &script[start..end])
}

/// A `kubectl` stand-in in `dir/bin` that lists `ids` as the provider ids of the
/// nodes, and only for the plan's selector.
fn kubectl(dir: &Path, ids: &[String]) {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let lines: String = ids
        .iter()
        .map(|id| format!("aws:///us-east-1a/{id}\\n"))
        .collect();
    let stub = format!(
        "#!/bin/sh\ncase \"$*\" in *'get nodes -l node.kubernetes.io/instance-type=p5.48xlarge,topology.kubernetes.io/zone=us-east-1a -o jsonpath='*) printf '{lines}';; *) echo \"kubectl stand-in: unexpected $*\" >&2; exit 1;; esac\n"
    );
    let path = bin.join("kubectl");
    std::fs::write(&path, stub).unwrap();
    let status = Command::new("chmod").arg("+x").arg(&path).status().unwrap();
    assert!(status.success());
}

/// `n` instances under one layer-1 node: two layer-2 nodes, three layer-3 nodes
/// (half, a third, the rest), the last one not running (no network nodes).
fn instances(n: usize) -> (Vec<String>, Value) {
    let ids: Vec<String> = (0..n).map(|i| format!("i-{i:017x}")).collect();
    let items: Vec<Value> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| {
            let mut item = json!({"InstanceId": id, "InstanceType": "p5.48xlarge",
                "AvailabilityZone": "us-east-1a", "ZoneId": "use1-az4"});
            if i + 1 < n {
                let (l2, l3) = match i * 6 / n {
                    0..=2 => ("nn-l2-a", "nn-l3-a"),
                    3 | 4 => ("nn-l2-a", "nn-l3-b"),
                    _ => ("nn-l2-b", "nn-l3-c"),
                };
                item["NetworkNodes"] = json!(["nn-l1", l2, l3]);
            }
            item
        })
        .collect();
    (ids, json!({"Instances": items}))
}

/// The set-up stage up to its nodes step, closed, as `setup.sh`.
fn setup_stage(dir: &Path) {
    let script = std::fs::read_to_string(dir.join("aws-cli.sh")).unwrap();
    let nodes = script
        .find(". Nodes: ")
        .unwrap_or_else(|| panic!("no nodes step in\n{script}"));
    let nodes = script[..nodes].rfind('\n').unwrap() + 1;
    std::fs::write(
        dir.join("setup.sh"),
        format!("{}echo SETUP-DONE\nfi\n", &script[..nodes]),
    )
    .unwrap();
}

/// `sh FILE STAGE` in `dir`.
fn run(aws: &Aws, dir: &Path, file: &str, stage: &str) -> Output {
    let bin = venv_tool("aws");
    let path = format!(
        "{}:{}:{}",
        dir.join("bin").display(),
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap()
    );
    Command::new("sh")
        .args([file, stage])
        .current_dir(dir)
        .env_clear()
        .env("PATH", path)
        .envs(aws.env(dir))
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

/// Set up: the emitted plan, its topology step, 101 nodes behind the stand-in, and
/// the answerer holding their topology.
fn setup() -> (tempfile::TempDir, Aws, String) {
    let dir = emit();
    let step = topology_step(dir.path());
    let (ids, topology) = instances(101);
    kubectl(dir.path(), &ids);
    let file = dir.path().join("answer-instance-topology.json");
    std::fs::write(&file, topology.to_string()).unwrap();
    let aws = Aws::start_with(&[("LOOPBACK_INSTANCE_TOPOLOGY", file.to_str().unwrap())]);
    (dir, aws, step)
}

#[test]
fn the_run_stage_reads_the_nodes_topology_with_the_real_aws_cli() {
    let (dir, aws, step) = setup();
    std::fs::write(dir.path().join("topology.sh"), &step).unwrap();
    let out = run(&aws, dir.path(), "topology.sh", "run");
    assert!(out.status.success(), "{}", text(&out));
    let said = text(&out);
    assert!(
        said.contains(
            "topology: 100 instance(s) under 1 layer-1, 2 layer-2, 3 layer-3 network node(s)\ntopology: the farthest two meet at layer 1: one layer-1 node above 2 layer-2 nodes\ntopology: not known yet for i-00000000000000064 (p5.48xlarge)"
        ),
        "{said}"
    );
    // 101 ids: two calls of at most 100 (the API's limit, which the answerer keeps),
    // once for the saved JSON and once for the summary.
    assert_eq!(
        aws.count("answerer DescribeInstanceTopology"),
        4,
        "{}",
        aws.requests()
    );
    // The saved JSON, as the CLI printed it: one document per call, 101 instances.
    let saved = std::fs::read_to_string(dir.path().join("instance-topology.json")).unwrap();
    let docs: Vec<Value> = serde_json::Deserializer::from_str(&saved)
        .into_iter::<Value>()
        .map(Result::unwrap)
        .collect();
    assert_eq!(docs.len(), 2, "{saved}");
    let count: usize = docs
        .iter()
        .map(|d| d["Instances"].as_array().unwrap().len())
        .sum();
    assert_eq!(count, 101);
}

#[test]
fn a_wrong_parameter_or_query_does_not_pass() {
    let (dir, aws, step) = setup();
    let summary = "topology: 100 instance(s) under";
    // Each a plausible slip: an option the CLI does not have, a filter it does not take
    // by that name, a member the answer does not have.
    let wrong = [
        ("--instance-ids", "--instance-id-list"),
        (
            "--region \"$REGION\" --output json",
            "--region \"$REGION\" --output json --filters Name=tag:eks:cluster-name,Values=x",
        ),
        ("--query 'Instances[]", "--query 'Instance[]"),
        (
            "NetworkNodes[0],NetworkNodes[1],NetworkNodes[2]",
            "NetworkNode[0],NetworkNode[1],NetworkNode[2]",
        ),
    ];
    for (right, slip) in wrong {
        assert!(step.contains(right), "{right} not in\n{step}");
        std::fs::write(dir.path().join("wrong.sh"), step.replacen(right, slip, 1)).unwrap();
        aws.clear();
        let out = run(&aws, dir.path(), "wrong.sh", "run");
        let said = text(&out);
        assert!(!said.contains(summary), "{slip}: passed\n{said}");
    }
    // The option slip is the CLI's own refusal: no request left it.
    std::fs::write(
        dir.path().join("wrong.sh"),
        step.replacen("--instance-ids", "--instance-id-list", 2),
    )
    .unwrap();
    aws.clear();
    let out = run(&aws, dir.path(), "wrong.sh", "run");
    assert_eq!(aws.count("answerer DescribeInstanceTopology"), 0);
    assert!(
        text(&out).contains("topology: describe-instance-topology failed"),
        "{}",
        text(&out)
    );
}

#[test]
fn a_held_blocks_topology_is_read_at_set_up_with_the_real_aws_cli() {
    let held = repo().join("crates/advisor/fixtures/existing-reservations.json");
    let dir = emit_with(&["--existing-reservations", held.to_str().unwrap()]);
    setup_stage(dir.path());
    let topology = dir.path().join("answer-reservation-topology.json");
    std::fs::write(
        &topology,
        json!({"CapacityReservations": [{"CapacityReservationId": "cr-0b7c6d5e4f3a21098",
            "State": "active", "InstanceType": "p5.48xlarge", "AvailabilityZone": "us-east-1b",
            "AvailabilityZoneId": "use1-az6", "NetworkNodes": ["nn-l1", "nn-l2", "nn-l3"]}]})
        .to_string(),
    )
    .unwrap();
    let aws = Aws::start_with(&[("LOOPBACK_RESERVATION_TOPOLOGY", topology.to_str().unwrap())]);
    let out = run(&aws, dir.path(), "setup.sh", "setup");
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("SETUP-DONE"), "{said}");
    assert_eq!(
        aws.count("answerer DescribeCapacityReservationTopology"),
        1,
        "{}",
        aws.requests()
    );
    assert!(
        said.contains("topology: 1 reservation(s) under 1 layer-1, 1 layer-2, 1 layer-3 network node(s)\ntopology: all under one layer-3 network node: as close as EC2 describes"),
        "{said}"
    );
}
